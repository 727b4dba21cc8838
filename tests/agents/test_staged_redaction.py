"""Redaction at the way in, through `assay run`: a job whose task file holds a registered token
and an AWS key id. The workspace the agent works on holds placeholders (the verifier reads the
original), and code the agent runs there prints nothing of either, in any of 32 encodings."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "way_in", Path(__file__).resolve().parents[1] / "tools" / "test_way_in.py"
)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
way_in = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(way_in)
ENCODER, ENV, TOKEN, AWS_ID, _leaks = way_in.ENCODER, way_in.ENV, way_in.TOKEN, way_in.AWS_ID, way_in._leaks


def test_through_assay_run_the_task_is_staged_redacted(tmp_path, monkeypatch, need):
    """A job whose task file holds the canaries: the workspace the agent works on holds
    placeholders, and code the agent runs there prints nothing of the secrets."""
    need(shutil.which("bwrap") is not None, "bubblewrap is not installed")
    from agent_helpers import install_brain, write_job
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart

    from assay.agents.job import load_job
    from assay.agents.runner import start_run
    from assay.ledger import Ledger
    from assay.policies.manifest import SHIPPED_DIR
    from assay.policies.signing import keygen, sign_manifest

    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    keygen(if_missing=True)
    for path in SHIPPED_DIR.glob("*.toml"):
        sign_manifest(path, to_store=True)
    task = (
        f'DEPLOY_TOKEN = "{TOKEN}"\nAWS_ACCESS_KEY_ID = "{AWS_ID}"\n'
        + (Path(__file__).resolve().parents[2] / "examples" / "kernel" / "gelu.py").read_text()
    )
    job = write_job(tmp_path / "job", task_text=task, backend="bwrap", steps=4)
    staged_printer = ENCODER + (
        "\nsrc = open('task.py').read()\n"
        "import re\n"
        "for name, value in re.findall(r'^(\\w+) = \"(.*)\"$', src, re.M):\n"
        "    for form, shown in forms(value).items():\n"
        "        print(name, form, shown)\n"
    )

    def brain(messages, info):
        n = sum(isinstance(m, ModelResponse) for m in messages)
        if n == 0:
            return ModelResponse(
                parts=[ToolCallPart("exec", {"command": ["python", "-c", staged_printer]}, tool_call_id="p1")]
            )
        return ModelResponse(parts=[TextPart("nothing to submit")])

    install_brain(monkeypatch, brain)
    outcome = start_run(load_job(job), verify=lambda run_id: {"payload": {"passed": False}})
    with Ledger.open() as ledger:
        calls = ledger.tool_calls(outcome.run_id)
    printed = calls[0].outcome["structured"]["stdout"]
    assert "DEPLOY_TOKEN plain [[SECRET:" in printed and "AWS_ACCESS_KEY_ID plain [[SECRET:" in printed
    assert _leaks(json.dumps([c.outcome for c in calls], ensure_ascii=False)) == []
    from assay.settings import settings

    staged = (settings().home / "runs" / outcome.run_id / "workspace" / "task.py").read_text()
    assert TOKEN not in staged and AWS_ID not in staged and "def get_inputs" in staged
