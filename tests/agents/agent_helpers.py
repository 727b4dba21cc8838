"""Helpers for the runtime tests: signed homes, job files, test brains, real `assay` processes,
and ledger read-backs.

Nothing here fakes a part of assay. A test brain is a pydantic-ai FunctionModel put where the
job's brain would be (`assay.agents.runner.make_model`), still wrapped in the real
RedactingModel; everything behind it is the real thing: the `assay mcp` server process, the
gateway, the sandboxes, the ledger, the checkpoint database and the verifier process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SOFTMAX = REPO / "examples" / "kernel" / "softmax.py"
DRIVER = HERE / "brain_driver.py"


# -- homes and jobs ----------------------------------------------------------------------------


def sign_home() -> None:
    """In the current ASSAY_HOME: a trusted manifest key and every shipped manifest signed, as
    `assay policy keygen --if-missing` and `assay policy sign --all-shipped` do."""
    from assay.policies.manifest import SHIPPED_DIR
    from assay.policies.signing import keygen, sign_manifest
    from assay.settings import settings

    settings.cache_clear()
    keygen(if_missing=True)
    for path in sorted(SHIPPED_DIR.glob("*.toml")):
        sign_manifest(path, to_store=True)
    settings.cache_clear()


def write_job(
    folder: Path,
    *,
    name: str = "job.toml",
    task: Path | str | None = None,
    task_text: str | None = None,
    brain: str = "playbook",
    steps: int = 20,
    minutes: float = 10,
    tokens: int | None = None,
    manifest: str = "kernel-agent",
    criteria: str = "kernel-default",
    backend: str = "auto",
) -> Path:
    """A job file for the kernel kind; the task is a copy of the softmax example unless given."""
    folder.mkdir(parents=True, exist_ok=True)
    task_file = folder / "task.py"
    if task_text is not None:
        task_file.write_text(task_text)
    elif task is not None:
        task_file = Path(task)
    else:
        task_file.write_text(SOFTMAX.read_text())
    lines = [
        'kind = "kernel"',
        f"task = {json.dumps(str(task_file))}",
        f"brain = {json.dumps(brain)}",
        f"manifest = {json.dumps(manifest)}",
        f"criteria = {json.dumps(criteria)}",
        "[budget]",
        f"steps = {steps}",
        f"minutes = {minutes}",
    ]
    if tokens is not None:
        lines.append(f"tokens = {tokens}")
    lines += ["[sandbox]", f"backend = {json.dumps(backend)}"]
    path = folder / name
    path.write_text("\n".join(lines) + "\n")
    return path


# -- brains ----------------------------------------------------------------------------------


def install_brain(monkeypatch, fn: Callable, *, seen: list | None = None) -> None:
    """Every run started in this process uses `fn` (a FunctionModel function) as its brain.

    `seen`, if given, collects every message list the brain was shown (after redaction)."""
    from pydantic_ai.models.function import FunctionModel

    import assay.agents.runner as runner
    from assay.agents.brains import RedactingModel

    def brain(messages, info):
        if seen is not None:
            seen.append(list(messages))
        return fn(messages, info)

    def make_model(name: str, *, kind, redactor, http_client: Any = None):
        return RedactingModel(FunctionModel(brain, model_name=f"test:{getattr(fn, '__name__', 'brain')}"), redactor)

    monkeypatch.setattr(runner, "make_model", make_model)


# -- processes --------------------------------------------------------------------------------


def assay_argv(*args: str, brain: str | None = None) -> list[str]:
    """`assay ARGS` as a user runs it, or with a scripted test brain through the driver."""
    if brain is None:
        return [sys.executable, "-m", "assay", *args]
    return [sys.executable, str(DRIVER), brain, *args]


def plant_packages(folder: Path, tripped: Path, names: tuple[str, ...]) -> Path:
    """Packages under FOLDER that, imported, leave a file named for them in TRIPPED and fail."""
    tripped.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).mkdir(parents=True)
        (folder / name / "__init__.py").write_text(
            f"open({str(tripped / name)!r}, 'w').close()\nraise ImportError('planted')\n"
        )
    return tripped


def assay(
    *args: str,
    brain: str | None = None,
    timeout: float = 300,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess:
    return subprocess.run(
        assay_argv(*args, brain=brain),
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )


def spawn(
    *args: str, brain: str | None = None, env: dict[str, str] | None = None, log: Path | None = None
) -> subprocess.Popen:
    """Start `assay ARGS` in its own process group (so a test can clean up what it leaves)."""
    env = {**os.environ, **(env or {})}
    if log is None:
        return subprocess.Popen(
            assay_argv(*args, brain=brain),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    with open(log, "w") as out:  # the child holds its own copy of the descriptor
        return subprocess.Popen(
            assay_argv(*args, brain=brain), stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )


def reap_group(proc: subprocess.Popen) -> None:
    """SIGKILL whatever is left of the process group a spawned `assay` started."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def wait_for(pred: Callable[[], Any], *, timeout: float = 120, every: float = 0.1, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


# -- the ledger, read back --------------------------------------------------------------------


def open_ledger(url: str | None = None):
    from assay.ledger import Ledger

    return Ledger.open(url, create=False)


def latest_run_id(url: str | None = None) -> str | None:
    try:
        with open_ledger(url) as ledger:
            runs = ledger.list_runs(limit=1)
            return runs[0].id if runs else None
    except Exception:  # the ledger may not exist yet
        return None


def rows(run_id: str, url: str | None = None) -> dict[str, list]:
    """Every event row of a run, per table, as (key, a few identifying fields)."""
    with open_ledger(url) as ledger:
        return {
            "steps": [(s.key, s.name) for s in ledger.steps(run_id)],
            "tool_calls": [(c.key, c.tool, c.decision) for c in ledger.tool_calls(run_id)],
            "policy_decisions": [(d.key, d.tool, d.decision) for d in ledger.policy_decisions(run_id)],
            "submissions": [(s.key, s.sha256) for s in ledger.submissions(run_id)],
            "approvals": [(a.key, a.event) for a in ledger.approval_events(run_id)],
            "verdicts": [(v.key, v.id) for v in ledger.verdicts(run_id)],
        }


def run_row(run_id: str, url: str | None = None):
    with open_ledger(url) as ledger:
        return ledger.get_run(run_id)


def assert_verdicts_are_the_verifiers(home: Path, url: str | None = None) -> list:
    """Every verdict row in the ledger: signed by the verifier's key over exactly its payload,
    for a real run, naming that run's latest submission (or none), one per (run, submission);
    and the chain verifies. Returns the rows."""
    from assay.verifiers.signing import check, load_public_key

    public = load_public_key(home)
    with open_ledger(url) as ledger:
        verdicts = ledger.verdicts()
        seen = set()
        for v in verdicts:
            assert check(public, v.payload, v.signature) == "valid", f"verdict {v.id} is not signed by the verifier"
            assert v.payload["run_id"] == v.run_id
            assert v.payload["verifier_version"]
            subs = ledger.submissions(v.run_id)
            if v.payload["submission"] is None:
                assert v.key == "verdict:none"
            else:
                sub = next(s for s in subs if s.key == v.payload["submission"])
                assert v.payload["submission_hash"] == sub.sha256
                assert v.key == f"verdict:{sub.key}"
            assert (v.run_id, v.key) not in seen, "two verdicts for one submission"
            seen.add((v.run_id, v.key))
        chain = ledger.verify_chain(signature_check=lambda p, s: check(public, p, s) == "valid")
        assert chain.ok, chain.summary()
    return verdicts
