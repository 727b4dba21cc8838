"""Quant job tools, all in the run's sandbox: the task's quantizable modules and the machine,
per-module sensitivity, and a recipe tried with the figures the verifier computes (drift on
the task's probes, bytes, latency side by side). They run the verifier's own measuring script
(verifiers/quant/harness/quant_judge.py, bound read-only: the same code, so a tried recipe
predicts its verdict), but with the agent's seeds and without the verifier's held-out probes.
These results help the agent work; they decide nothing. Only the verifier does.
"""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from assay.errors import UserError
from assay.recipe import CONFIGS, QUANTIZING, parse_recipe
from assay.tools.context import ToolContext
from assay.tools.files import open_in_workspace, read_bytes
from assay.tools.judge_script import run_judge_script
from assay.tools.registry import ToolFailure, registry

TASK = "task.py"
KIND = ("quant",)
MOUNT = "/assay/quant/harness"
COMMON = "/assay/common/harness"
# The agent's own seeds: the verifier draws others, so nothing tuned to these carries over.
SEED, HELDOUT_SEED = 1234, 5678


def _harness_dirs() -> tuple[tuple[Path, str], ...]:
    # package data of the verifier's room, found by path (not imported): the script is standalone
    quant = Path(str(resources.files("assay").joinpath("verifiers", "quant", "harness")))
    common = Path(str(resources.files("assay").joinpath("verifiers", "common", "harness")))
    return ((quant, MOUNT), (common, COMMON))


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _task(ctx: ToolContext) -> None:
    fd = open_in_workspace(ctx.workspace, TASK, os.O_RDONLY)
    os.close(fd)


def _run(ctx: ToolContext, plan: dict[str, Any], default_timeout: float) -> dict[str, Any]:
    _task(ctx)
    sb = ctx.sandbox()
    timeout = min(default_timeout, float(ctx.grants.get("max_timeout_s", default_timeout)))
    threads = str(max(1, int(round(sb.spec.limits.cpus))))
    plan = {
        "task": f"{sb.spec.workdir}/{TASK}",
        "seed": SEED,
        "heldout_seed": HELDOUT_SEED,
        "threads": int(threads),
        **plan,
    }
    env = {"HOME": str(sb.spec.workdir), "OMP_NUM_THREADS": threads, "PYTHONDONTWRITEBYTECODE": "1"}
    return run_judge_script(sb, f"{MOUNT}/quant_judge.py", plan, timeout, env)


class NoArgs(_Args):
    pass


class ModuleTable(BaseModel):
    output: str
    modules: list[dict[str, Any]] = Field(description="Linear modules: name, class, in/out features, param bytes")
    param_bytes: int
    bytes_fp32: int
    machine: dict[str, Any] = Field(description="CPU, ISA flags (VNNI, AMX), torch's CPU capability, threads")
    configs: list[str] = Field(description="the recipe vocabulary")
    kernels: list[dict[str, Any]] = Field(
        default_factory=list,
        description="which configs have fast kernels here: the commonest Linear shape alone, speed vs fp32 "
        "at 1 row and 32 rows (advice, not a verdict)",
    )


@registry.tool(read_only=True, idempotent=True, kinds=KIND)
def quant_modules(ctx: ToolContext, args: NoArgs) -> ModuleTable:
    """The task's quantizable (Linear) modules with shapes and bytes, what this machine has, and
    which configs run fast here on the commonest Linear shape."""
    r = _run(ctx, {"mode": "modules"}, 180)
    return ModuleTable(
        output=r["output"],
        modules=r["modules"],
        param_bytes=r["param_bytes"],
        bytes_fp32=r["bytes_fp32"],
        machine=r["machine"],
        configs=list(CONFIGS),
        kernels=r.get("kernels", []),
    )


class ConfigSpec(_Args):
    # the recipe format's own names (none excepted), so the two lists cannot drift apart
    config: Literal[QUANTIZING]  # pyright: ignore[reportInvalidTypeForm] - a Literal built from the recipe's tuple
    bits: int | None = Field(default=None, ge=2, le=8)
    group_size: int | None = Field(default=None, ge=0, le=256)
    per_channel: bool | None = None

    def rule(self) -> dict[str, Any]:
        """The config as a recipe rule would give it (validated by the recipe format itself)."""
        given = (("bits", self.bits), ("group_size", self.group_size), ("per_channel", self.per_channel))
        extra = "".join(f"{k} = {json.dumps(v)}\n" for k, v in given if v is not None)
        try:
            recipe = parse_recipe(f'[[rule]]\nmatch = "*"\nconfig = "{self.config}"\n{extra}'.encode(), "config")
        except UserError as exc:
            raise ToolFailure(str(exc)) from None
        out = recipe.plan()[0]
        out.pop("match")
        return out


class SensitivityArgs(_Args):
    configs: list[ConfigSpec] = Field(min_length=1, max_length=6)
    groups: dict[str, list[str]] | None = Field(
        default=None, description="name -> module names quantized together (default: each module alone)"
    )


class Sensitivity(BaseModel):
    output: str
    bytes_fp32: int
    rows: list[dict[str, Any]] = Field(description="per group and config: drift on the task's probes, bytes saved")


@registry.tool(read_only=True, idempotent=True, kinds=KIND)
def quant_sensitivity(ctx: ToolContext, args: SensitivityArgs) -> Sensitivity:
    """Quantize each module (or group) alone with each config; measure drift (SQNR, KL or cosine)."""
    r = _run(ctx, {"mode": "sensitivity", "configs": [c.rule() for c in args.configs], "groups": args.groups}, 600)
    return Sensitivity(output=r["output"], bytes_fp32=r["bytes_fp32"], rows=r["rows"])


class TryArgs(_Args):
    path: str = Field(default="recipe.toml", max_length=256, pattern=r"^[A-Za-z0-9_./-]+\.toml$")
    time: bool = Field(default=False, description="also time it against fp32, side by side")


class Tried(BaseModel):
    quantized_modules: int
    linear_modules: int
    rules: list[dict[str, Any]]
    size_ratio: float
    probes: dict[str, Any]
    heldout: dict[str, Any] | None = Field(description="probes drawn like the task's with the tool's own seed")
    speedup_vs_fp32: float | None


@registry.tool(kinds=KIND)
def quant_try(ctx: ToolContext, args: TryArgs) -> Tried:
    """Apply a recipe file to a fresh model and measure what the verifier measures, on your probes."""
    data, size = read_bytes(ctx.workspace, args.path, 1 << 16)
    if size > len(data):
        raise ToolFailure(f"{args.path} is {size} bytes; a recipe is at most 64 KiB")
    try:
        recipe = parse_recipe(data, args.path)
    except UserError as exc:
        raise ToolFailure(str(exc)) from None
    plan = {
        "mode": "measure",
        "rules": recipe.plan(),
        "heldout_count": 8,
        "rounds": 8 if args.time else 0,
        "target_round_s": 0.05,
        "warmup_s": 0.2,
        "max_iters": 4000,
        "flush_mb": 64,
    }
    r = _run(ctx, plan, 600)
    speed = None
    if r.get("timing"):
        import statistics

        def per_call(subject: str) -> float:
            return statistics.median(e["wall_s"] / e["n"] for e in r["timing"] if e["subject"] == subject)

        speed = round(per_call("fp32") / per_call("quant"), 4)
    return Tried(
        quantized_modules=len(r["quantized_modules"]),
        linear_modules=r["linear_modules"],
        rules=r["rules"],
        size_ratio=round(r["bytes_quant"] / r["bytes_fp32"], 4),
        probes=r["probes"],
        heldout=r["heldout"],
        speedup_vs_fp32=speed,
    )


registry.register_binds("quant", _harness_dirs)
