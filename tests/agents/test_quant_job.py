"""The quant kind end to end, for real: `assay run` of the smallest quant job (a random-init MLP)
with the playbook brain, through the MCP tools, the gateway and the verifier process, to a
signed verdict; the tools it called, in order, from the ledger."""

from __future__ import annotations

import json

import pytest
from agent_helpers import REPO, assay, assert_verdicts_are_the_verifiers, latest_run_id, open_ledger


@pytest.mark.slow
def test_the_playbook_passes_the_smallest_quant_job(home, tmp_path, need):
    from assay.sandbox.backends import availability

    need(any(ok for ok, _ in availability().values()), "no sandbox backend works here")
    report = tmp_path / "report.json"
    out = assay("run", str(REPO / "examples" / "quant" / "mlp.toml"), "--json", str(report), timeout=600)
    doc = json.loads(report.read_text())
    run = doc["runs"][0]
    assert out.returncode == 0, f"exit {out.returncode}; verdict reasons: {run['reasons']}"
    assert run["metrics"]["size_ratio"] < 0.5 and run["metrics"]["readiness"]["viable"] is True
    assert_verdicts_are_the_verifiers(home)
    run_id = latest_run_id()
    with open_ledger() as ledger:
        calls = [s.payload for s in ledger.steps(run_id) if s.name == "agent"]
    tools = [c["tool"] for p in calls for c in p.get("tool_calls", [])]
    assert tools[:2] == ["quant_modules", "quant_sensitivity"] and "quant_try" in tools and tools[-1] == "submit"
