"""Helpers shared by the harness scripts.

These scripts run INSIDE a sandbox, with the harness folder bound read-only, so they import
nothing from assay: only the standard library and torch. A verifier may import this module
too (it is on sys.path next to the scripts) to load tasks and time candidates the same way.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import platform
import sys
import time
import traceback
from typing import Any

# Bound before any task or candidate code runs, so code under test cannot swap the clock
# this harness reads (it can still patch `time`, but not these references).
_perf = time.perf_counter
_wall = time.time

MARKER = "@@ASSAY_JSON "


def emit(obj: dict) -> None:
    """Print the one result line the host parses; anything else on stdout is noise."""
    sys.stdout.flush()
    sys.stdout.write("\n" + MARKER + json.dumps(obj, default=_jsonable) + "\n")
    sys.stdout.flush()


def fail(kind: str, exc: BaseException | None = None, **extra) -> None:
    detail = "".join(traceback.format_exception_only(type(exc), exc)).strip() if exc else ""
    emit({"ok": False, "error": kind, "detail": detail[-8000:], **extra})


def _jsonable(value):
    if isinstance(value, (set, tuple)):
        return list(value)
    if hasattr(value, "tolist"):
        return value.tolist()
    return repr(value)


def load_module(path: str, name: str):
    """Import a task or candidate file by path, under a private module name."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def device() -> dict:
    """What a tuned configuration is valid for: the CPU model, its vector ISA, the thread count."""
    import torch

    model, flags = "", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "Model", "CPU part") and not model:
                    model = value.strip()
                elif key in ("flags", "Features") and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    model = model or platform.processor() or platform.machine()
    isa = [f for f in ("avx2", "fma", "avx512f", "avx512bw", "avx512_bf16", "amx_tile", "asimd", "sve") if f in flags]
    return {
        "kind": "cpu",
        "model": model,
        "isa": isa,
        "capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
    }


def prepare_backend() -> None:
    """Without a GPU, Triton kernels run under its interpreter (correctness only). Must happen
    before a candidate imports triton; harmless for C++ candidates."""
    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")


def device_for(candidate) -> str:
    """Where a candidate runs: Triton on the GPU when there is one, everything else on the CPU."""
    import torch

    if getattr(candidate, "ASSAY_BACKEND", "cpp") == "triton" and torch.cuda.is_available():
        return "cuda"
    return "cpu"


def interpreted(candidate) -> bool:
    return getattr(candidate, "ASSAY_BACKEND", "cpp") == "triton" and os.environ.get("TRITON_INTERPRET") == "1"


def to_device(objs: list, device: str) -> list[Any]:
    import torch

    if device == "cpu":
        return objs
    return [o.to(device) if isinstance(o, (torch.Tensor, torch.nn.Module)) else o for o in objs]


def make_case(task, seed: int):
    """Reference model, candidate inputs and init inputs for one seed (KernelBench order)."""
    import torch

    torch.manual_seed(seed)
    init = list(task.get_init_inputs())
    torch.manual_seed(seed)
    inputs = list(task.get_inputs())
    return init, inputs


def build_pair(task, candidate, init, seed: int):
    """Construct Model and ModelNew from the same seed, as KernelBench's evaluator does."""
    import torch

    torch.manual_seed(seed)
    ref = task.Model(*init)
    torch.manual_seed(seed)
    new = candidate.ModelNew(*init)
    return ref.eval(), new.eval()


def compare(expected, actual, atol: float, rtol: float) -> dict:
    import torch

    if not isinstance(actual, torch.Tensor):
        return {"ok": False, "reason": f"output is {type(actual).__name__}, not a tensor"}
    if tuple(actual.shape) != tuple(expected.shape):
        return {"ok": False, "reason": f"shape {list(actual.shape)} != {list(expected.shape)}"}
    if actual.dtype != expected.dtype:
        return {"ok": False, "reason": f"dtype {actual.dtype} != {expected.dtype}"}
    if expected.is_complex():  # .double() would keep the real part only
        actual, expected = (torch.view_as_real(t.resolve_conj()) for t in (actual, expected))
    a, e = actual.double(), expected.double()
    # Element by element, as the verifier judges: NaN only where eager has NaN, an infinity only
    # where eager has the same one. (A whole-tensor "both have some non-finite value" let a NaN
    # anywhere pass once eager's output held one NaN, and NaN differences never counted.)
    nan_a, nan_e = torch.isnan(a), torch.isnan(e)
    special = nan_a | nan_e | torch.isinf(a) | torch.isinf(e)
    bad_special = special & ~((nan_a & nan_e) | (a == e))
    diff = torch.where(special, torch.zeros_like(a), (a - e).abs())
    bad = (~special & (diff > atol + rtol * e.abs())) | bad_special
    diff = torch.where(bad_special, torch.full_like(diff, float("inf")), diff)
    max_abs = float(diff.max()) if diff.numel() else 0.0
    n_bad = int(bad.sum())
    return {
        "ok": n_bad == 0,
        "max_abs_err": max_abs,
        "mismatched": n_bad,
        "reason": "" if n_bad == 0 else f"{n_bad} elements off, max abs err {max_abs:.3g}",
    }


class Flusher:
    """Evicts the last-level cache between repetitions so each one starts from memory."""

    def __init__(self, mbytes: int = 64, device: str = "cpu"):
        import torch

        self.buf = torch.empty(mbytes << 20, dtype=torch.uint8, device=device)
        self.k = 0
        self.sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def __call__(self) -> None:
        self.k = (self.k + 1) & 0x7F
        self.buf.fill_(self.k)
        self.sync()


def time_interleaved(
    fns: dict, args, reps: int, warmup: int, flush: Flusher | None, budget_s: float | None = None, warmup_s: float = 0.0
):
    """Median seconds per call of each fn, measured round-robin so machine noise hits all alike.
    On a GPU the clock stops after a device synchronise, so queued work is counted. Warm-up: at
    least `warmup` rounds and `warmup_s` seconds of them (a fresh candidate's first ten or so
    calls can cost several times its steady pace)."""
    sync = flush.sync if flush is not None else (lambda: None)
    names = list(fns)
    start, done = _perf(), 0
    while done < warmup or (_perf() - start < warmup_s and done < 10000):
        for n in names:
            fns[n](*args)
        done += 1
    sync()
    samples: dict[str, list[float]] = {n: [] for n in names}
    start = _perf()
    for r in range(reps):
        order = names[r % len(names) :] + names[: r % len(names)]
        for n in order:
            if flush is not None:
                flush()
            t0 = _perf()
            fns[n](*args)
            sync()
            samples[n].append(_perf() - t0)
        if budget_s is not None and r >= 2 and _perf() - start > budget_s:
            break
    return {n: _stats(s) for n, s in samples.items()}


def _stats(s: list[float]) -> dict:
    s = sorted(s)
    return {"median_s": s[len(s) // 2], "min_s": s[0], "reps": len(s)}


def nbytes(tensors) -> int:
    import torch

    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def setup_threads() -> None:
    """Same thread count for eager, compile and candidate: all the CPUs this sandbox got."""
    import torch

    n = int(os.environ.get("OMP_NUM_THREADS") or 0) or len(os.sched_getaffinity(0))
    torch.set_num_threads(n)


def now() -> float:
    return _wall()
