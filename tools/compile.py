"""Compile job tools, all in the run's sandbox: the task's symptom as the verifier measures it,
and a rewritten model checked the way the verifier checks it. They run the verifier's own
judge script (verifiers/compile/harness/compile_judge.py, bound read-only: the same code, so a
check predicts its verdict) with the agent's seeds, not the verifier's held-out ones. These
results help the agent work; they decide nothing. Only the verifier does.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from assay.tools.context import ToolContext
from assay.tools.files import open_in_workspace
from assay.tools.judge_script import run_judge_script
from assay.tools.registry import registry

TASK = "task.py"
KIND = ("compile",)
MOUNT = "/assay/compile/harness"
COMMON = "/assay/common/harness"
# The agent's own seeds: the verifier draws others.
SEED, HELDOUT_SEEDS = 1234, [5678, 91011]
# compile-default's parity figures (the verifier reads its own profile)
TOLERANCE = {"atol": 1e-4, "rtol": 1e-4, "fp64_factor": 10.0}


def _harness_dirs() -> tuple[tuple[Path, str], ...]:
    # package data of the verifier's room, found by path (not imported): the script is standalone
    judge = Path(str(resources.files("assay").joinpath("verifiers", "compile", "harness")))
    common = Path(str(resources.files("assay").joinpath("verifiers", "common", "harness")))
    return ((judge, MOUNT), (common, COMMON))


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _options(ctx: ToolContext, job_backend: bool) -> dict[str, Any]:
    options = ctx.job.get("options") or {}
    backend = options.get("backend", "inductor")
    if not job_backend and backend == "inductor":
        # breaks, recompiles and coverage are dynamo's, the same under any backend; only a crash
        # or a divergence of Inductor's own needs its 20-80 s compiles
        return {"backend": "aot_eager", "mode": None}
    return {"backend": backend, "mode": options.get("mode")}


def _run(ctx: ToolContext, plan: dict[str, Any], default_timeout: float, job_backend: bool) -> dict[str, Any]:
    for name in (TASK, *([plan["fixed_name"]] if plan.get("fixed_name") else [])):
        os.close(open_in_workspace(ctx.workspace, name, os.O_RDONLY))
    sb = ctx.sandbox()
    timeout = min(default_timeout, float(ctx.grants.get("max_timeout_s", default_timeout)))
    threads = max(1, int(round(sb.spec.limits.cpus)))
    work = str(sb.spec.workdir)
    plan = {
        "task": f"{work}/{TASK}",
        "fixed": f"{work}/{plan.pop('fixed_name', 'fixed.py')}",
        "seed": SEED,
        "heldout_seeds": HELDOUT_SEEDS,
        "threads": threads,
        "rounds": 0,
        **TOLERANCE,
        **_options(ctx, job_backend),
        **plan,
    }
    env = {
        "HOME": work,
        "OMP_NUM_THREADS": str(threads),
        "PYTHONDONTWRITEBYTECODE": "1",
        # docker mounts /tmp noexec: Inductor's compiled .so files must live in the workspace
        "TORCHINDUCTOR_CACHE_DIR": f"{work}/.cache/inductor",
    }
    return run_judge_script(sb, f"{MOUNT}/compile_judge.py", plan, timeout, env)


class DiagnoseArgs(_Args):
    job_backend: bool = Field(
        default=False,
        description="compile with the job's backend (Inductor: 20-80 s a compile) to see its crash or divergence; "
        "otherwise aot_eager, where graph breaks, recompiles and coverage read the same",
    )


class Symptom(BaseModel):
    torch: str
    backend: str = Field(description="the backend the crash and divergence figures were measured with")
    figures: dict[str, Any] = Field(
        description="Model under torch.compile: graphs, breaks with reasons and source lines, fullgraph error, "
        "recompiles over the input sequence with the guard that failed, coverage, opaque calls, the job backend's "
        "crash (with the stage: dynamo, aot_autograd, inductor lowering, codegen, c++ compile, runtime) or divergence "
        "from eager (with eager's own distance from an fp64 run)"
    )


@registry.tool(read_only=True, idempotent=True, kinds=KIND)
def compile_diagnose(ctx: ToolContext, args: DiagnoseArgs) -> Symptom:
    """What goes wrong when the task's Model is compiled, measured as the verifier measures it."""
    r = _run(ctx, {"diagnose": True}, 300, args.job_backend)
    return Symptom(torch=r.get("torch", ""), backend=r.get("backend", ""), figures=r["original"])


class CheckArgs(DiagnoseArgs):
    path: str = Field(default="fixed.py", max_length=256, pattern=r"^[A-Za-z0-9_-]+\.py$")


class Checked(BaseModel):
    figures: dict[str, Any] = Field(description="ModelNew: the same figures as compile_diagnose, and parity per case")
    tamper: list[str] = Field(description="what the verifier would refuse: changed dynamo config, replaced functions")
    symptom: dict[str, Any] = Field(description="the original Model's figures, measured beside it")


@registry.tool(kinds=KIND)
def compile_check(ctx: ToolContext, args: CheckArgs) -> Checked:
    """Measure a rewritten model (a file defining ModelNew) the way the verifier will: breaks,
    fullgraph, recompiles, coverage, and parity with Model eager on the tool's own seeds."""
    r = _run(ctx, {"fixed_name": args.path}, 400, args.job_backend)
    fixed = r.get("fixed") or {}
    return Checked(figures=fixed, tamper=r.get("tamper", []), symptom=r.get("original", {}))


registry.register_binds("compile", _harness_dirs)
