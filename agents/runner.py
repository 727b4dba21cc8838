"""Start, drive, pause and resume runs. The CLI and the TUI both come through here."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from assay.agents.brains import make_model
from assay.agents.job import Job
from assay.agents.toolset import run_toolset
from assay.agents.workflow import RECURSION_LIMIT, RunDeps, build_graph, decision_for
from assay.errors import UserError
from assay.ledger import Ledger, RunStatus
from assay.policies.redaction import Redactor
from assay.runspec import RunSpec
from assay.settings import settings

Event = Callable[[str, dict[str, Any]], None]


@dataclass
class RunOutcome:
    run_id: str
    status: str
    verdict: dict[str, Any] | None = None
    waiting: dict[str, Any] | None = None


def run_dir(run_id: str) -> Path:
    return settings().home / "runs" / run_id


def prepare_workspace(run_id: str, job: Job, redactor: Redactor | None = None) -> Path:
    """The agent's workspace: what the kind stages, passed through the redactor on its way in, so
    no sandbox ever holds a raw secret of the job's files (the verifier reads the originals)."""
    import tempfile

    from assay.policies.redaction.inbound import redact_tree

    ws = run_dir(run_id) / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="assay-stage-", dir=run_dir(run_id)) as staging:
        job.agent_kind.stage(job, Path(staging))
        redact_tree(Path(staging), ws, redactor or Redactor.for_run(os.environ))
    return ws


def check_manifest(job: Job) -> None:
    """The job's manifest exists, is signed by a trusted key and parses: the checks its MCP server
    would make first, made here so that a refused manifest is one line (UserError) and no run."""
    from assay.policies.manifest import resolve_manifest
    from assay.policies.signing import load_signed_manifest

    load_signed_manifest(resolve_manifest(job.manifest))


def job_spec(job: Job, workspace: Path) -> RunSpec:
    return RunSpec(
        kind=job.kind,
        job=job.model_dump(mode="json"),
        job_file=str(job.source) if job.source else None,
        task_path=str(job.task_path),
        criteria=job.criteria,
        manifest=job.manifest,
        workspace=str(workspace),
        sandbox_backend=job.sandbox.backend,
        options=job.options.model_dump(mode="json"),
    )


def job_from_spec(spec: RunSpec) -> Job:
    job = Job.model_validate(spec.job)
    if spec.job_file:
        job = job.model_copy(update={"source": Path(spec.job_file)})
    return job


def _die_with_parent() -> None:
    # A verifier orphaned by a killed run must not append a verdict nobody waits for; the
    # resumed run starts its own (and the ledger keeps exactly one per submission).
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _verifier_env() -> dict[str, str]:
    # PYTHONPATH: where the operator's own kinds (ASSAY_KINDS) are installed; the operator's, as
    # trusted as ASSAY_HOME. Nothing of the agent's reaches this process's environment.
    return {
        k: v
        for k, v in os.environ.items()
        if k.startswith("ASSAY_") or k in ("PATH", "HOME", "LANG", "TMPDIR", "PYTHONPATH")
    }


@contextmanager
def verifier_warming(run_id: str, enabled: bool = True):
    """The verifier process's caches (for kernels: its op recorder and torch.compile of the
    task) built beside the agent at the lowest CPU priority, so the verification after the
    submission does not start by building them. Only the verifier's own process writes them;
    the agent sees nothing of it. Stopped when the run no longer needs it."""
    proc = None
    if enabled and settings().verifier_warm:
        try:
            with open(run_dir(run_id) / "verifier-warm.log", "ab") as log:  # outside the workspace
                proc = subprocess.Popen(
                    [sys.executable, "-P", "-m", "assay.verifiers", "warm", "--run", run_id],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    env=_verifier_env(),
                    preexec_fn=_die_with_parent,
                )
        except OSError:
            proc = None  # an optimisation only: the verifier builds what it needs itself

    def hurry() -> None:
        # The verification has started and may wait on what the warm-up is still building: it
        # takes normal CPU priority from now on (sandbox/background.py).
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                proc.send_signal(signal.SIGUSR1)

    try:
        yield hurry
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=WARM_STOP_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# How long a warm-up still running when its run ends may take to exit (it exits at SIGTERM at
# once; this bounds a process that does not).
WARM_STOP_S = 20


def _verifier_after(hurry: Callable[[], None]) -> Callable[[str], dict[str, Any]]:
    def verify(run_id: str) -> dict[str, Any]:
        hurry()
        return verify_in_process_of_its_own(run_id)

    return verify


def verify_in_process_of_its_own(run_id: str) -> dict[str, Any]:
    env = _verifier_env()
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "assay.verifiers", "verify", "--run", run_id, "--json"],
        capture_output=True,
        text=True,
        env=env,
        preexec_fn=_die_with_parent,
    )
    # 0 pass, 1 fail, 3 inconclusive: a verdict was written; anything else is the process's own failure.
    if proc.returncode not in (0, 1, 3) or not proc.stdout.strip():
        tail = (proc.stderr or "").strip().splitlines()[-1:] or ["no output"]
        raise UserError(
            f"the verifier process failed (exit {proc.returncode}): {tail[0]}",
            "see `python -m assay.verifiers verify --run RUN`",
        )
    return json.loads(proc.stdout.strip().splitlines()[-1])


@asynccontextmanager
async def checkpointer(ledger: Ledger):
    if ledger.dialect == "postgresql":
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        url = str(ledger.engine.url.render_as_string(hide_password=False)).replace(
            "postgresql+psycopg://", "postgresql://"
        )
        async with AsyncPostgresSaver.from_conn_string(url) as saver:
            await saver.setup()
            yield saver
    else:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        db = ledger.engine.url.database
        path = Path(db).with_name("checkpoints.db") if db else settings().home / "checkpoints.db"
        async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
            yield saver


async def _drive(
    run_id: str,
    job: Job,
    ledger: Ledger,
    first: Any,
    *,
    wait: bool,
    on_event: Event,
    verify: Callable[[str], dict[str, Any]],
) -> RunOutcome:
    kind = job.agent_kind
    workspace = run_dir(run_id) / "workspace"
    redactor = Redactor.for_run(os.environ)
    model = make_model(job.brain, kind=kind, redactor=redactor)
    from pydantic_ai import Agent

    # Tool-call keys are "<step>:<tool call id>". The step is the one agent_step is running
    # (it announces it before the model request), so a call in step 7 never collides with a
    # call in step 2 that a model gave the same id, and a resumed step reuses its own keys.
    step_no = {"n": 0}

    def events(kind_: str, data: dict[str, Any]) -> None:
        if kind_ == "step":
            step_no["n"] = int(data["step"])
        on_event(kind_, data)

    toolset = run_toolset(
        run_id,
        workspace,
        job.manifest,
        job.kind,
        padding=job.padding.model_dump(),
        sandbox=job.sandbox.backend,
        step=lambda: str(step_no["n"]),
    )
    agent = Agent(model, toolsets=[toolset], instructions=kind.instructions(job), output_type=str)
    deps = RunDeps(
        run_id=run_id, job=job, ledger=ledger, agent=agent, prompt=kind.prompt(job), verify=verify, on_event=events
    )
    graph_def = build_graph()
    config: RunnableConfig = {"configurable": {"thread_id": run_id}, "recursion_limit": RECURSION_LIMIT}
    async with checkpointer(ledger) as saver, _server_started(agent, run_id, ledger, fresh=first is not None):
        graph = graph_def.compile(checkpointer=saver)
        payload = first
        while True:
            # "sync": a node's checkpoint is written before the next node starts. Under the
            # default ("async") a kill during verify could leave the last checkpoint a step
            # behind; the resumed run redid that step, found the later step's submission in
            # the ledger and went to verify one step short (budget_used.steps 5 of 6).
            result = await graph.ainvoke(payload, config, context=deps, durability="sync")
            interrupts = result.get("__interrupt__") if isinstance(result, dict) else None
            if not interrupts:
                break
            pending = interrupts[0].value
            on_event("approval", pending)
            decision = decision_for(ledger, run_id, pending["id"])
            while decision is None and wait:
                await anyio.sleep(0.5)
                decision = decision_for(ledger, run_id, pending["id"])
            if decision is None:
                return RunOutcome(run_id, RunStatus.waiting_approval.value, waiting=pending)
            payload = Command(resume=decision)
    run = ledger.get_run(run_id)
    return RunOutcome(run_id, run.status if run else "error", verdict=result.get("verdict"))


@asynccontextmanager
async def _server_started(agent: Any, run_id: str, ledger: Ledger, *, fresh: bool):
    """The agent with its MCP server running. A server that will not start (an unsigned or
    unknown manifest, a broken sandbox backend) is a UserError, not a traceback; it has printed
    its own reason on stderr. A new run that never got a server is marked error; a resumed one
    keeps its status, so it can be resumed once the cause is fixed."""
    try:
        await agent.__aenter__()
    except Exception as exc:
        problem = f"the MCP server for run {run_id} did not start ({type(exc).__name__}: {exc})"
        if fresh:
            ledger.set_run_status(run_id, RunStatus.error, error=problem[:500])
        raise UserError(
            problem, "see the server's own error above (a manifest to sign, a sandbox to install)"
        ) from None
    try:
        yield agent
    finally:
        await agent.__aexit__(None, None, None)


def start_run(
    job: Job,
    *,
    wait: bool = True,
    on_event: Event | None = None,
    ledger: Ledger | None = None,
    verify: Callable[[str], dict[str, Any]] | None = None,
) -> RunOutcome:
    check_manifest(job)  # before any row: a run the server could never serve leaves nothing behind
    own = ledger is None
    ledger = ledger or Ledger.open()
    try:
        run = ledger.create_run(
            job=str(job.source or job.task), kind=job.kind, brain=job.brain, budget=job.budget.model_dump()
        )
        workspace = prepare_workspace(run.id, job)
        _store_spec(ledger, run.id, job_spec(job, workspace))
        (on_event or _quiet)("run", {"run_id": run.id})
        with verifier_warming(run.id, enabled=verify is None and wait) as hurry:
            return anyio.run(
                lambda: _drive(
                    run.id,
                    job,
                    ledger,
                    {"step": 0},
                    wait=wait,
                    on_event=on_event or _quiet,
                    verify=verify or _verifier_after(hurry),
                )
            )
    finally:
        if own:
            ledger.close()


def resume_run(
    run_id: str,
    *,
    wait: bool = True,
    on_event: Event | None = None,
    ledger: Ledger | None = None,
    verify: Callable[[str], dict[str, Any]] | None = None,
) -> RunOutcome:
    own = ledger is None
    ledger = ledger or Ledger.open()
    try:
        run = ledger.get_run(run_id)
        if run is None:
            raise UserError(f"no run {run_id!r} in the ledger", "list runs with `assay verdicts` or `assay tui`")
        if RunStatus(run.status).finished:
            return RunOutcome(run_id, run.status, verdict=_last_verdict(ledger, run_id))
        job = job_from_spec(RunSpec.of(run.spec, run_id))
        with verifier_warming(run_id, enabled=verify is None and wait) as hurry:
            return anyio.run(
                lambda: _drive(
                    run_id,
                    job,
                    ledger,
                    None,
                    wait=wait,
                    on_event=on_event or _quiet,
                    verify=verify or _verifier_after(hurry),
                )
            )
    finally:
        if own:
            ledger.close()


def decide_approval(
    run_id: str, decision: str, *, approval_id: str | None = None, actor: str = "cli", ledger: Ledger | None = None
) -> str:
    """Record a human's decision on a pending approval; the waiting (or resumed) run acts on it."""
    from assay.agents.workflow import pending_approval

    own = ledger is None
    ledger = ledger or Ledger.open()
    try:
        if ledger.get_run(run_id) is None:
            raise UserError(f"no run {run_id!r} in the ledger", "check the run id with `assay tui` or `assay verdicts`")
        pending = pending_approval(ledger, run_id)
        if pending is None or (approval_id and pending["id"] != approval_id):
            raise UserError(
                f"run {run_id} has no pending approval{' ' + approval_id if approval_id else ''}", "nothing to decide"
            )
        req = next(e for e in ledger.approval_events(run_id) if e.key == pending["id"])
        ledger.record_approval(
            run_id,
            key=f"{req.key}:{decision}",
            event=decision,
            request_key=req.key,
            fingerprint=req.fingerprint,
            tool=req.tool,
            actor=actor,
        )
        return req.key
    finally:
        if own:
            ledger.close()


def _store_spec(ledger: Ledger, run_id: str, spec: RunSpec) -> None:
    from sqlmodel import select

    from assay.ledger import Run

    with ledger.session(write=True) as s:
        run = s.exec(select(Run).where(Run.id == run_id)).one()
        run.spec = spec.model_dump(mode="json")
        s.add(run)


def _last_verdict(ledger: Ledger, run_id: str) -> dict[str, Any] | None:
    vs = ledger.verdicts(run_id)
    if not vs:
        return None
    v = vs[-1]
    return {
        "id": v.id,
        "run_id": v.run_id,
        "key": v.key,
        "payload": v.payload,
        "signature": v.signature,
        "row_hash": v.row_hash,
    }


def _quiet(kind: str, data: dict[str, Any]) -> None:
    pass


def elapsed(since: float) -> float:
    return time.time() - since
