"""The compile kind end to end, for real: `assay run` of a compile job (item_branch, aot_eager)
with the playbook brain, through the MCP tools, the gateway and the verifier process, to a
signed verdict; the tools it called, in order, from the ledger; the diagnosis it wrote, in the
verdict's metrics."""

from __future__ import annotations

import json

import pytest
from agent_helpers import REPO, assay, assert_verdicts_are_the_verifiers, latest_run_id, open_ledger


@pytest.mark.slow
def test_the_playbook_fixes_a_graph_break_and_the_verifier_agrees(home, tmp_path, need):
    from assay.sandbox.backends import availability

    need(any(ok for ok, _ in availability().values()), "no sandbox backend works here")
    report = tmp_path / "report.json"
    out = assay("run", str(REPO / "examples" / "compile" / "item_branch_aot.toml"), "--json", str(report), timeout=600)
    run = json.loads(report.read_text())["runs"][0]
    assert out.returncode == 0, f"exit {out.returncode}; verdict reasons: {run['reasons']}"
    m = run["metrics"]
    assert m["original"]["breaks"] == 1 and m["fixed"]["breaks"] == 0 and m["fixed"]["fullgraph"] is True
    assert "torch.where" in m["diagnosis"] and "| graph breaks | 1 | 0 |" in m["diagnosis"]
    assert_verdicts_are_the_verifiers(home)
    with open_ledger() as ledger:
        calls = [s.payload for s in ledger.steps(latest_run_id()) if s.name == "agent"]
    tools = [c["tool"] for p in calls for c in p.get("tool_calls", [])]
    assert tools == ["compile_diagnose", "read_file", "write_file", "compile_check", "write_file", "submit"]
