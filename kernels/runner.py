"""Run the harness in a sandbox and return typed results: what the kernel MCP tools call.

Every function takes a `Sandbox` and HOST paths; a path must be visible inside the sandbox
(under its workspace, or under one of its read-only binds) and is translated here. The
sandbox must bind the harness folder: open it with `kernel_binds()` among its ro_binds.

    spec = SandboxSpec(workspace=ws, ro_binds=kernel_binds() + ((task_dir, "/task"),))
    sb = open_sandbox(spec)
    info = inspect_task(sb, task_dir / "softmax.py")
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from assay.errors import UserError
from assay.kernels.task import TaskInfo
from assay.sandbox.base import STEADY_MALLOC, Sandbox

HARNESS_DIR = Path(__file__).with_name("harness")
HARNESS_MOUNT = "/opt/assay/kernel-harness"
MARKER = "@@ASSAY_JSON "
BUILD_SUBDIR = ".assay-build"

# progress(message, fraction or None): hook a rich progress bar or MCP progress here
Progress = Callable[[str, "float | None"], None]


def kernel_binds() -> tuple[tuple[Path, str], ...]:
    """The read-only binds a kernel sandbox needs (the harness scripts)."""
    return ((HARNESS_DIR, HARNESS_MOUNT),)


class HarnessError(Exception):
    """The harness could not answer (sandbox killed it, or it printed no result)."""

    def __init__(self, kind: str, detail: str):
        super().__init__(f"{kind}: {detail}")
        self.kind, self.detail = kind, detail


def sandbox_path(sb: Sandbox, host: Path | str) -> str:
    """Where a host path appears inside `sb`."""
    p = Path(host).resolve()
    ws = Path(sb.spec.workspace).resolve()
    if p == ws or ws in p.parents:
        return str(PurePosixPath(sb.spec.workdir) / p.relative_to(ws))
    for src, dst in sb.spec.ro_binds:
        s = Path(src).resolve()
        if p == s or s in p.parents:
            return str(PurePosixPath(dst) / p.relative_to(s))
    raise UserError(
        f"{host} is not visible inside the sandbox",
        "put it in the workspace, or bind its folder read-only in the SandboxSpec",
    )


def harness_env(sb: Sandbox) -> dict[str, str]:
    build = str(PurePosixPath(sb.spec.workdir) / BUILD_SUBDIR)
    threads = str(max(1, int(round(sb.spec.limits.cpus))))
    return {
        # builds are cached by source hash in the workspace, so a rebuild of the same kernel is free
        "ASSAY_KERNEL_BUILD_DIR": build,
        "TORCH_EXTENSIONS_DIR": build + "/torch_extensions",
        "TORCHINDUCTOR_CACHE_DIR": build + "/inductor",
        "TRITON_CACHE_DIR": build + "/triton",
        "HOME": str(sb.spec.workdir),
        "OMP_NUM_THREADS": threads,
        "MAX_JOBS": threads,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        # the verifier's allocator conditions, so the agent's timings predict the verdict's
        **STEADY_MALLOC,
    }


def call_harness(sb: Sandbox, script: str, args: list[str], *, timeout: float, env: dict | None = None) -> dict:
    """Run one harness script inside `sb`; its JSON result, or HarnessError."""
    return call_harness_all(sb, script, args, timeout=timeout, env=env)[-1]


def call_harness_all(
    sb: Sandbox, script: str, args: list[str], *, timeout: float, env: dict | None = None
) -> list[dict]:
    """Every JSON result line the script printed, in order."""
    argv = ["python", f"{HARNESS_MOUNT}/{script}", *args]
    res = sb.exec(argv, timeout=timeout, env={**harness_env(sb), **(env or {})})
    lines = [line for line in res.stdout.splitlines() if line.startswith(MARKER)]
    if res.killed:
        raise HarnessError(res.killed, f"the sandbox stopped the harness ({res.killed}) after {res.duration_s:.1f}s")
    if not lines:
        tail = (res.stderr or res.stdout)[-4000:]
        raise HarnessError("no_result", f"exit {res.exit_code}: {tail}")
    return [json.loads(line[len(MARKER) :]) for line in lines]


def _say(progress: Progress | None, msg: str, frac: float | None = None) -> None:
    if progress is not None:
        progress(msg, frac)


# --- typed results --------------------------------------------------------------------------


@dataclass
class BuildResult:
    ok: bool
    seconds: float | None = None
    variants: int = 0
    error: str | None = None  # "build" (compiler/import error) or a HarnessError kind
    detail: str = ""  # the compiler's log tail when it failed


@dataclass
class TestResult:
    ok: bool
    trials: list[dict] = field(default_factory=list)  # seed, ok, max_abs_err, mismatched, reason
    error: str | None = None
    detail: str = ""
    build_s: float | None = None  # the build (or build-cache load) in the same process


@dataclass
class BenchResult:
    ok: bool  # ran and the candidate's output was correct
    seconds: dict[str, float] = field(default_factory=dict)  # median per implementation
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    bytes: int = 0
    achieved_gbps: float | None = None  # from the median time
    copy_gbps: float | None = None
    achieved_gbps_best: float | None = None  # from the best repetition (STREAM's convention)
    copy_gbps_best: float | None = None
    copy_gbps_large: float | None = None  # the STREAM-sized copy (two 64 MB arrays)
    copy_gbps_large_best: float | None = None
    speedup_min: dict[str, float] = field(default_factory=dict)  # ratios of best repetitions
    compile_s: float | None = None
    device: dict = field(default_factory=dict)
    error: str | None = None
    detail: str = ""
    raw: dict = field(default_factory=dict, repr=False)

    @property
    def bandwidth_fraction(self) -> float | None:
        """Achieved over copy bandwidth, both from median times of the same interleaved rounds,
        the copy moving as many bytes as the task (so it pays the same fixed costs). On a
        shared machine the neighbours move the memory bandwidth by up to 2x from one minute to
        the next, and a ratio of figures taken at different times would measure them."""
        return _ratio(self.achieved_gbps, self.copy_gbps)

    @property
    def bandwidth_fraction_large(self) -> float | None:
        """Achieved over the STREAM-sized copy's rate, medians of the same rounds."""
        return _ratio(self.achieved_gbps, self.copy_gbps_large)

    @property
    def bandwidth_fraction_best(self) -> float | None:
        """The same from each one's best repetition (STREAM reports best-of-N rates)."""
        return _ratio(self.achieved_gbps_best, self.copy_gbps_best)


def _ratio(achieved: float | None, copy: float | None) -> float | None:
    return None if achieved is None or not copy else achieved / copy


# --- the functions the tools call -------------------------------------------------------------


def inspect_task(sb: Sandbox, task: Path | str, *, timeout: float = 180, progress: Progress | None = None) -> TaskInfo:
    """Trace the task's Model inside the sandbox. Raises UserError when the task is broken."""
    _say(progress, f"inspecting {Path(task).name}")
    out = call_harness(sb, "inspect_task.py", [sandbox_path(sb, task)], timeout=timeout)
    return _task_info(task, out)


def inspect_tasks(
    sb: Sandbox, tasks: list[Path], *, timeout: float = 600, progress: Progress | None = None
) -> list[TaskInfo | UserError]:
    """Several tasks in one sandboxed process (one torch import): a TaskInfo or the error, per task."""
    _say(progress, f"inspecting {len(tasks)} tasks")
    outs = call_harness_all(sb, "inspect_task.py", [sandbox_path(sb, t) for t in tasks], timeout=timeout)
    if len(outs) != len(tasks):
        raise HarnessError("no_result", f"{len(outs)} results for {len(tasks)} tasks")
    results: list[TaskInfo | UserError] = []
    for task, out in zip(tasks, outs, strict=False):
        try:
            results.append(_task_info(task, out))
        except UserError as exc:
            results.append(exc)
    return results


def _task_info(task: Path | str, out: dict) -> TaskInfo:
    if not out.get("ok"):
        raise UserError(
            f"task {Path(task).name} could not be {'imported' if out.get('error') == 'task_import' else 'traced'}: "
            f"{out.get('detail', '')[-500:]}",
            "a task defines Model(nn.Module), get_inputs() and get_init_inputs(), and Model must trace "
            "with torch.export",
        )
    return TaskInfo.from_json(task, out)


def build(sb: Sandbox, candidate: Path | str, *, timeout: float = 300, progress: Progress | None = None) -> BuildResult:
    _say(progress, f"building {Path(candidate).name}")
    try:
        out = call_harness(sb, "run.py", ["build", sandbox_path(sb, candidate)], timeout=timeout)
    except HarnessError as exc:
        return BuildResult(False, error=exc.kind, detail=exc.detail)
    if not out.get("ok"):
        return BuildResult(False, error=out.get("error"), detail=out.get("detail", ""))
    return BuildResult(True, seconds=out["seconds"], variants=out.get("variants", 1))


def quick_test(
    sb: Sandbox,
    task: Path | str,
    candidate: Path | str,
    *,
    seeds: tuple[int, ...] = (0, 1),
    atol: float = 1e-4,
    rtol: float = 1e-4,
    timeout: float = 300,
    progress: Progress | None = None,
) -> TestResult:
    """The candidate against the reference on the task's own inputs (a few seeds). Not a verdict.
    Builds the candidate first if it is not built: a build failure is error "build"."""
    _say(progress, f"testing {Path(candidate).name}")
    args = [
        "test",
        sandbox_path(sb, task),
        sandbox_path(sb, candidate),
        "--seeds",
        ",".join(map(str, seeds)),
        "--atol",
        repr(atol),
        "--rtol",
        repr(rtol),
    ]
    try:
        out = call_harness(sb, "run.py", args, timeout=timeout)
    except HarnessError as exc:
        return TestResult(False, error=exc.kind, detail=exc.detail)
    if "trials" not in out:
        return TestResult(False, error=out.get("error"), detail=out.get("detail", ""))
    return TestResult(bool(out["ok"]), trials=out["trials"], build_s=out.get("build_s"))


def benchmark(
    sb: Sandbox,
    task: Path | str,
    candidate: Path | str,
    *,
    baselines: tuple[str, ...] = ("eager", "compile"),
    reps: int = 20,
    warmup: int = 3,
    copy_bandwidth: bool = False,
    timeout: float = 600,
    progress: Progress | None = None,
) -> BenchResult:
    """Candidate vs eager (and torch.compile) in one process, interleaved, cache flushed per rep."""
    _say(progress, f"benchmarking {Path(candidate).name} against {', '.join(baselines) or 'nothing'}")
    args = [
        "bench",
        sandbox_path(sb, task),
        sandbox_path(sb, candidate),
        "--baselines",
        ",".join(baselines),
        "--reps",
        str(reps),
        "--warmup",
        str(warmup),
    ] + (["--copy-bw"] if copy_bandwidth else [])
    try:
        out = call_harness(sb, "run.py", args, timeout=timeout)
    except HarnessError as exc:
        return BenchResult(False, error=exc.kind, detail=exc.detail)
    if "times" not in out:
        if "timing" in out:  # Triton under the interpreter: correctness only
            ok = bool(out["ok"])
            return BenchResult(
                ok,
                device=out.get("device", {}),
                error=None if ok else "incorrect",
                detail=out["timing"] if ok else out.get("correct", {}).get("reason", ""),
                raw=out,
            )
        return BenchResult(False, error=out.get("error"), detail=out.get("detail", ""), raw=out)
    return BenchResult(
        ok=bool(out["ok"]),
        seconds={k: v["median_s"] for k, v in out["times"].items()},
        speedup_vs_eager=out.get("speedup_vs_eager"),
        speedup_vs_compile=out.get("speedup_vs_compile"),
        bytes=out.get("bytes", 0),
        achieved_gbps=out.get("achieved_gbps"),
        copy_gbps=out.get("copy_gbps"),
        achieved_gbps_best=out.get("achieved_gbps_best"),
        copy_gbps_best=out.get("copy_gbps_best"),
        copy_gbps_large=out.get("copy_gbps_large"),
        copy_gbps_large_best=out.get("copy_gbps_large_best"),
        speedup_min={
            k[len("speedup_vs_") : -len("_min")]: v
            for k, v in out.items()
            if k.startswith("speedup_vs_") and k.endswith("_min")
        },
        compile_s=out.get("compile_s"),
        device=out.get("device", {}),
        error=None if out["ok"] else "incorrect",
        detail="" if out["ok"] else out.get("correct", {}).get("reason", ""),
        raw=out,
    )
