"""Kernel job tools: read the task, write a candidate, build and quick-test it, benchmark it
against eager and torch.compile in the same run, autotune a template, all in the run's
sandbox. These results help the agent work; they decide nothing. Only the verifier does.
"""

from __future__ import annotations

import ast
import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from assay.kernels import runner
from assay.tools.context import ToolContext
from assay.tools.files import open_in_workspace, read_bytes, write_single_name
from assay.tools.registry import ToolFailure, registry

TASK = "task.py"
TASK_CAP = 1 << 20
KIND = ("kernel",)


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _progress(ctx: ToolContext):
    return lambda message, frac=None: ctx.report(frac if frac is not None else 0.0, 1.0, message)


def _path(ctx: ToolContext, rel: str):
    fd = open_in_workspace(ctx.workspace, rel, os.O_RDONLY)
    os.close(fd)
    return ctx.workspace / rel


def _timeout(ctx: ToolContext, default: float) -> float:
    return min(default, float(ctx.grants.get("max_timeout_s", default)))


# Tracing a task costs a torch import and an export in the sandbox; the MCP server lives for
# the run, so each distinct task text is inspected once. Keyed by content, not by path: the
# agent may not rewrite task.py (its manifest forbids it), but a changed file is a new key.
_inspected: dict[tuple[str, str], runner.TaskInfo] = {}


def _task_bytes(ctx: ToolContext) -> bytes:
    """task.py's bytes, read once by descriptor (no symlink followed). Inspecting the task runs
    its code in the sandbox, and that code may swap task.py for a symlink to a host file:
    nothing read by name after that may reach the client."""
    data, size = read_bytes(ctx.workspace, TASK, TASK_CAP)
    if size > len(data):
        raise ToolFailure(f"task.py is {size} bytes; a task file is at most {TASK_CAP}")
    return data


def _inspect(ctx: ToolContext, path, data: bytes):
    import hashlib

    key = (str(ctx.workspace), hashlib.sha256(data).hexdigest())
    if key not in _inspected:
        _inspected[key] = runner.inspect_task(ctx.sandbox(), path, timeout=_timeout(ctx, 180), progress=_progress(ctx))
    return _inspected[key]


class NoArgs(_Args):
    pass


class TaskView(BaseModel):
    path: str
    source: str
    info: dict[str, Any] = Field(description="the reference's traced graph: ops, inputs, parameters")


@registry.tool(read_only=True, idempotent=True, kinds=KIND)
def read_task(ctx: ToolContext, args: NoArgs) -> TaskView:
    """Read the task (task.py) and its traced graph: op sequence, input shapes and dtypes."""
    path, data = _path(ctx, TASK), _task_bytes(ctx)
    info = _inspect(ctx, path, data)
    return TaskView(path=TASK, source=data.decode("utf-8", "replace"), info=info.raw)


class CandidateArgs(_Args):
    path: str = Field(default="candidate.py", max_length=256, pattern=r"^[A-Za-z0-9_./-]+\.py$")
    source: str = Field(..., max_length=1 << 20)


class CandidateWritten(BaseModel):
    path: str
    bytes_written: int


@registry.tool(destructive=True, idempotent=True, kinds=KIND)
def write_candidate(ctx: ToolContext, args: CandidateArgs) -> CandidateWritten:
    """Write a candidate file: Python defining ModelNew with Model's constructor and forward."""
    try:
        tree = ast.parse(args.source)
    except SyntaxError as exc:
        raise ToolFailure(f"the candidate is not valid Python: line {exc.lineno}: {exc.msg}") from None
    if not any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body):
        raise ToolFailure("the candidate must define class ModelNew at module level")
    if args.path.rsplit("/", 1)[-1] == TASK:
        raise ToolFailure("task.py is the reference; write the candidate to another file")
    data = args.source.encode()
    write_single_name(ctx.workspace, args.path, data)
    return CandidateWritten(path=args.path, bytes_written=len(data))


class BuildArgs(_Args):
    path: str = Field(default="candidate.py", max_length=256)


class BuildReport(BaseModel):
    built: bool
    correct: bool
    build_seconds: float | None
    error: str | None
    detail: str
    trials: list[dict[str, Any]]


@registry.tool(kinds=KIND)
def build_candidate(ctx: ToolContext, args: BuildArgs) -> BuildReport:
    """Build the candidate in the sandbox and quick-test it against the reference on the task's inputs."""
    sb, cand, task = ctx.sandbox(), _path(ctx, args.path), _path(ctx, TASK)
    t = _timeout(ctx, 300)
    # One harness process builds and tests: a second torch import and sandbox exec cost more
    # than the test itself.
    q = runner.quick_test(sb, task, cand, timeout=t, progress=_progress(ctx))
    if q.error == "build":
        return BuildReport(
            built=False, correct=False, build_seconds=None, error=q.error, detail=q.detail[-4000:], trials=[]
        )
    return BuildReport(
        built=q.build_s is not None,
        correct=q.ok,
        build_seconds=q.build_s,
        error=q.error,
        detail=q.detail[-4000:],
        trials=q.trials,
    )


class BenchArgs(_Args):
    path: str = Field(default="candidate.py", max_length=256)
    reps: int = Field(default=15, ge=3, le=200)
    baselines: list[Literal["eager", "compile"]] = Field(default_factory=lambda: ["eager", "compile"])


class BenchReport(BaseModel):
    correct: bool
    seconds: dict[str, float]
    speedup_vs_eager: float | None
    speedup_vs_compile: float | None
    bandwidth_fraction: float | None
    error: str | None
    detail: str


@registry.tool(kinds=KIND)
def benchmark(ctx: ToolContext, args: BenchArgs) -> BenchReport:
    """Time the candidate against eager PyTorch and torch.compile in one sandboxed process."""
    r = runner.benchmark(
        ctx.sandbox(),
        _path(ctx, TASK),
        _path(ctx, args.path),
        baselines=tuple(args.baselines),
        reps=args.reps,
        copy_bandwidth=True,
        timeout=_timeout(ctx, 600),
        progress=_progress(ctx),
    )
    return BenchReport(
        correct=r.ok,
        seconds=r.seconds,
        speedup_vs_eager=r.speedup_vs_eager,
        speedup_vs_compile=r.speedup_vs_compile,
        bandwidth_fraction=r.bandwidth_fraction,
        error=r.error,
        detail=r.detail[-4000:],
    )


class TuneArgs(_Args):
    backend: Literal["cpp", "triton"] = "cpp"
    budget_s: float = Field(default=40.0, gt=0, le=3600, description="stop starting new rounds after this long")


class TuneReport(BaseModel):
    ok: bool
    template: str | None
    best: dict[str, Any] | None
    best_seconds: float | None
    tried: int
    warm_start: bool
    seeded: list[dict[str, Any]]
    elapsed_s: float
    error: str | None
    detail: str


@registry.tool(kinds=KIND)
def autotune(ctx: ToolContext, args: TuneArgs) -> TuneReport:
    """Autotune the template that fits the task, warm-started from the shared autotune cache."""
    from assay.kernels.autotune import autotune as tune
    from assay.kernels.cache import AutotuneCache
    from assay.kernels.playbook import NoTemplate, plan

    sb, task = ctx.sandbox(), _path(ctx, TASK)
    info = _inspect(ctx, task, _task_bytes(ctx))
    plans = plan(info, args.backend)
    if isinstance(plans, NoTemplate):
        return TuneReport(
            ok=False,
            template=None,
            best=None,
            best_seconds=None,
            tried=0,
            warm_start=False,
            seeded=[],
            elapsed_s=0.0,
            error="no_template",
            detail=plans.reason,
        )
    p = plans[0]
    cache = AutotuneCache.open(ledger=ctx.ledger)
    # The budget bounds when rounds may start; the capability's time limit bounds it in turn.
    r = tune(
        sb,
        task,
        p.template,
        p.space,
        cache,
        budget_s=_timeout(ctx, args.budget_s),
        timeout=_timeout(ctx, 600),
        progress=_progress(ctx),
    )
    return TuneReport(
        ok=r.ok,
        template=p.template.name,
        best=r.best,
        best_seconds=r.best_seconds,
        tried=len(r.trials),
        warm_start=bool(r.seeded),
        seeded=r.seeded,
        elapsed_s=round(r.elapsed_s, 3),
        error=r.error,
        detail=r.detail[-4000:],
    )


# A kernel run's sandbox needs the harness scripts, read-only.
registry.register_binds("kernel", runner.kernel_binds)
