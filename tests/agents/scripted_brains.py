"""Deterministic test brains (pydantic-ai FunctionModel functions), importable both by the tests
and by `brain_driver.py`, which runs the real `assay` CLI with one of them in a child process.

Each brain decides from the message history only, and names its tool calls after the step, so a
run resumed in a new process asks it again and gets the very same calls (and call ids): the
gateway then replays recorded calls instead of running them twice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)

from assay.agents.history import returns  # the playbooks' own reading of tool results

# A candidate the verifier throws out at its source scan, quickly and without running it.
TINY_CANDIDATE = "import subprocess\n\n\nclass ModelNew:\n    pass\n"
SLEEP_S = 6

Call = tuple[str, dict[str, Any]]


def responses(messages: list[ModelMessage]) -> int:
    return sum(1 for m in messages if isinstance(m, ModelResponse))


def calls(tag: str, n: int, batch: list[Call]) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(t, a, tool_call_id=f"{tag}-{n}-{i}") for i, (t, a) in enumerate(batch)])


def text(s: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(s)])


def last_parts(messages: list[ModelMessage]) -> list:
    return list(messages[-1].parts) if messages and isinstance(messages[-1], ModelRequest) else []


def human_note(messages: list[ModelMessage]) -> str | None:
    for p in last_parts(messages):
        if isinstance(p, UserPromptPart) and isinstance(p.content, str) and p.content.startswith("A human "):
            return p.content
    return None


def script(tag: str, steps: list[list[Call] | str], final: str = "done") -> Callable:
    """A brain that makes step i's calls at its i-th request, then answers `final`."""

    def brain(messages, info):
        n = responses(messages)
        if n < len(steps):
            step = steps[n]
            return text(step) if isinstance(step, str) else calls(tag, n + 1, step)
        return text(final)

    brain.__name__ = tag
    return brain


def exec_py(code: str, timeout_s: float = 20) -> Call:
    return ("exec", {"command": ["python", "-c", code], "timeout_s": timeout_s})


# -- brains the CLI tests run through the driver ----------------------------------------------------

# Six steps with a slow tool call in the middle (step 3): the crash tests kill the run before,
# during and after it, and while the verifier runs.
steady = script(
    "steady",
    [
        [("list_files", {})],
        [("write_file", {"path": "notes.txt", "content": "step two\n"})],
        [exec_py(f"import time; open('slow-started', 'w').close(); time.sleep({SLEEP_S}); print('slept')")],
        [("read_file", {"path": "notes.txt"}), exec_py("print(6 * 7)")],
        [("write_file", {"path": "candidate.py", "content": TINY_CANDIDATE})],
        [("submit", {"entry": "candidate.py"})],
    ],
    final="submitted",
)

# Submits at once: the quickest way to a (failing) signed verdict.
quick = script(
    "quick",
    [
        [("write_file", {"path": "candidate.py", "content": TINY_CANDIDATE})],
        [("submit", {"entry": "candidate.py"})],
    ],
    final="submitted",
)

# Never submits: the verdict is "no submission".
idle = script("idle", [[("list_files", {})]], final="giving up: no candidate")

# Calls a tool the kernel-agent manifest gates behind a human (a g++ run over 30 s).
GATED: Call = ("exec", {"command": ["g++", "--version"], "timeout_s": 45})


def approver(messages, info):
    n = responses(messages) + 1
    note = human_note(messages)
    if note is not None:
        if note.startswith("A human approved"):
            return calls("approver", n, [GATED])
        return calls("approver", n, [("write_file", {"path": "after-deny.txt", "content": "carried on\n"})])
    done = returns(messages)
    if not done:
        return calls("approver", n, [GATED])
    tool, content, failed = done[-1]
    wrote = [c for t, c, f in done if t == "write_file" and not f]
    if tool == "submit":
        return text("submitted")
    if tool == "write_file" and any("candidate.py" in str(c) for c in wrote):
        return calls("approver", n, [("submit", {"entry": "candidate.py"})])
    return calls("approver", n, [("write_file", {"path": "candidate.py", "content": TINY_CANDIDATE})])


approver.__name__ = "approver"

BRAINS: dict[str, Callable] = {"steady": steady, "quick": quick, "idle": idle, "approver": approver}
