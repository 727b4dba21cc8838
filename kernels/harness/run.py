"""Build, test, benchmark and tune a candidate against its task, inside the sandbox.

usage:
  python run.py build CANDIDATE.py
  python run.py test  TASK.py CANDIDATE.py [--seeds 0,1] [--atol 1e-4] [--rtol 1e-4]
  python run.py bench TASK.py CANDIDATE.py [--baselines eager,compile] [--reps 20] [--warmup 3] [--warmup-s 0.3] [--copy-bw]
  python run.py tune  TASK.py CANDIDATE.py --variants 0,1,2 [--reps 7]

Prints one JSON line (prefixed by @@ASSAY_JSON). Importing the candidate builds it (it carries
its own C++ and calls torch.utils.cpp_extension.load), so `build` is an import with a stopwatch.
Every timing in one invocation shares the process, the thread count and the cache flusher,
so ratios between candidate, eager and torch.compile are like for like.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402


def _load_candidate(path):
    _common.prepare_backend()
    t0 = _common._perf()
    mod = _common.load_module(path, "assay_candidate")
    return mod, _common._perf() - t0


def cmd_build(args) -> None:
    try:
        mod, seconds = _load_candidate(args.candidate)
    except BaseException as exc:  # compiler errors arrive as RuntimeError with the log
        _common.fail("build", exc)
        return
    if not hasattr(mod, "ModelNew"):
        _common.emit({"ok": False, "error": "build", "detail": "the candidate defines no ModelNew"})
        return
    _common.emit({"ok": True, "seconds": seconds, "variants": len(getattr(mod, "ASSAY_VARIANTS", []) or [None])})


def _reference_and_candidate(args, seed):
    import torch

    task = _common.load_module(args.task, "assay_task")
    cand, build_s = _load_candidate(args.candidate)
    init, inputs = _common.make_case(task, seed)
    ref, new = _common.build_pair(task, cand, init, seed)
    dev = _common.device_for(cand)
    ref, new, *inputs = _common.to_device([ref, new, *inputs], dev)
    with torch.no_grad():
        expected = ref(*inputs)
    return task, cand, ref, new, inputs, expected, build_s


def cmd_test(args) -> None:
    import torch

    trials = []
    try:
        task = _common.load_module(args.task, "assay_task")
        cand, build_s = _load_candidate(args.candidate)
    except BaseException as exc:
        _common.fail("build", exc)
        return
    for seed in [int(s) for s in args.seeds.split(",")]:
        init, inputs = _common.make_case(task, seed)
        try:
            ref, new = _common.build_pair(task, cand, init, seed)
            ref, new, *inputs = _common.to_device([ref, new, *inputs], _common.device_for(cand))
            with torch.no_grad():
                expected = ref(*inputs)
                actual = new(*inputs)
            res = _common.compare(expected, actual, args.atol, args.rtol)
        except BaseException as exc:
            res = {"ok": False, "reason": f"{type(exc).__name__}: {exc}"[:2000]}
        trials.append({"seed": seed, **res})
    _common.emit({"ok": all(t["ok"] for t in trials), "build_s": build_s, "trials": trials})


def cmd_bench(args) -> None:
    import torch

    _common.setup_threads()
    try:
        task, cand, ref, new, inputs, expected, build_s = _reference_and_candidate(args, 0)
    except BaseException as exc:
        _common.fail("build", exc)
        return
    with torch.no_grad():
        try:
            actual = new(*inputs)
        except BaseException as exc:
            _common.fail("run", exc)
            return
        check = _common.compare(expected, actual, args.atol, args.rtol)
        if _common.interpreted(cand):
            # the interpreter runs Triton in numpy: a correctness check, never a timing
            _common.emit(
                {
                    "ok": check["ok"],
                    "correct": check,
                    "build_s": build_s,
                    "timing": "skipped: TRITON_INTERPRET=1",
                    "device": _common.device(),
                }
            )
            return
        dev = _common.device_for(cand)
        fns = {"candidate": new}
        baselines = [b for b in args.baselines.split(",") if b]
        compile_s = None
        if "eager" in baselines:
            fns["eager"] = ref
        if "compile" in baselines:
            t0 = _common._perf()
            compiled = torch.compile(ref)
            compiled(*inputs)
            compile_s = _common._perf() - t0
            fns["compile"] = compiled
        flush = _common.Flusher(device=dev)
        params = list(ref.parameters()) + list(ref.buffers())
        moved = _common.nbytes(list(inputs) + params) + _common.nbytes([expected])
        # The copy roofline is timed in the same rounds as the subjects, so the neighbours' load
        # on a shared machine hits the kernel and the copy it is measured against alike. Host
        # copies: a roofline for CPU kernels only (a GPU's would be a device-to-device copy).
        copy_fns, copy_bytes = _copy_probes(moved) if args.copy_bw and dev == "cpu" else ({}, {})
        times = _common.time_interleaved(
            {**fns, **copy_fns}, inputs, args.reps, args.warmup, flush, warmup_s=args.warmup_s
        )
        copy = _copy_rates({n: times.pop(n) for n in copy_fns}, copy_bytes) if copy_fns else None
    cand_s = times["candidate"]["median_s"]
    out = {
        "ok": check["ok"],
        "correct": check,
        "build_s": build_s,
        "compile_s": compile_s,
        "times": times,
        "bytes": moved,
        "achieved_gbps": moved / cand_s / 1e9,
        # best-of-N rates, as STREAM reports them: the least-disturbed repetition on a shared machine
        "achieved_gbps_best": moved / times["candidate"]["min_s"] / 1e9,
        # the copy moving the task's bytes, and the STREAM-sized one
        "copy_gbps": copy["task"]["median"] if copy else None,
        "copy_gbps_best": copy["task"]["best"] if copy else None,
        "copy_gbps_large": copy["large"]["median"] if copy else None,
        "copy_gbps_large_best": copy["large"]["best"] if copy else None,
        "device": _common.device() if dev == "cpu" else {"kind": "cuda", "model": torch.cuda.get_device_name()},
    }
    for name in ("eager", "compile"):
        if name in times:
            out[f"speedup_vs_{name}"] = times[name]["median_s"] / cand_s
            out[f"speedup_vs_{name}_min"] = times[name]["min_s"] / times["candidate"]["min_s"]
    _common.emit(out)


_STREAM_COPY = r"""
#include <immintrin.h>
#include <string.h>
#include <omp.h>
// The best copy this machine does: all threads, streaming stores (no read-for-ownership of dst).
extern "C" void assay_stream_copy(float* dst, const float* src, long n) {
#pragma omp parallel for schedule(static)
  for (long b = 0; b < n / 4096; ++b) {
    float* d = dst + b * 4096;
    const float* s = src + b * 4096;
#if defined(__AVX512F__)
    for (long i = 0; i < 4096; i += 16) _mm512_stream_ps(d + i, _mm512_loadu_ps(s + i));
#elif defined(__AVX__)
    for (long i = 0; i < 4096; i += 8) _mm256_stream_ps(d + i, _mm256_loadu_ps(s + i));
#else
    memcpy(d, s, 4096 * sizeof(float));
#endif
  }
  _mm_sfence();
}
"""


def _stream_copy_fn():
    import ctypes
    import hashlib

    from torch.utils.cpp_extension import load

    root = os.environ.get("ASSAY_KERNEL_BUILD_DIR") or os.path.join(os.getcwd(), ".assay-build")
    build = os.path.join(root, "copy_" + hashlib.sha256(_STREAM_COPY.encode()).hexdigest()[:12])
    os.makedirs(build, exist_ok=True)
    src = os.path.join(build, "copy.cpp")
    if not os.path.exists(src):
        with open(src + ".tmp", "w") as f:
            f.write(_STREAM_COPY)
        os.replace(src + ".tmp", src)
    so = load(
        name="assay_stream_copy",
        sources=[src],
        extra_cflags=["-O3", "-march=native", "-fopenmp"],
        extra_ldflags=["-fopenmp"],
        build_directory=build,
        is_python_module=False,
    )
    fn = ctypes.CDLL(str(so)).assay_stream_copy  # is_python_module=False: load() returns the library's path
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
    return fn


def _copy_probes(task_bytes: int) -> tuple[dict, dict]:
    """Memory-to-memory copies (read + write), the roofline for streaming kernels: torch's copy_
    and an all-thread streaming-store copy (so a kernel that uses streaming stores meets a copy
    that does too), each at two sizes. "task" moves as many bytes as the task does, so it pays
    the same fixed costs (thread start, the flush's dirty lines, DRAM pages opened) as the kernel
    it is compared with: no implementation of the task can beat it by much. "large" copies 64 MB
    into 64 MB, twice the last-level cache here each, as STREAM sizes its arrays: the machine's
    sustained rate, which a task moving 32 MB does not reach (a 16 MB copy ran at 26 GB/s where
    the large one ran at 35, in the same rounds here).
    Returns timing subjects and the bytes each moves."""
    import torch

    fns, moved = {}, {}
    try:
        stream = _stream_copy_fn()
    except Exception:  # no compiler: torch's copy alone is the roofline
        stream = None
    for size, numel in (("task", max(4096, task_bytes // 8 // 4096 * 4096)), ("large", 16 << 20)):
        src = torch.randn(numel)
        dst = torch.empty_like(src)
        fns[f"copy:{size}:copy_"] = lambda *_, s=src, d=dst: d.copy_(s)
        if stream is not None:
            fns[f"copy:{size}:stream"] = lambda *_, s=src, d=dst: stream(d.data_ptr(), s.data_ptr(), s.numel())
        moved[size] = 2 * numel * 4
    return fns, moved


def _copy_rates(times: dict, moved: dict) -> dict:
    """GB/s of the better copy at each size, from its median and from its best repetition."""
    out = {}
    for size, nbytes in moved.items():
        ts = [v for k, v in times.items() if k.split(":")[1] == size]
        out[size] = {
            "median": max(nbytes / v["median_s"] for v in ts) / 1e9,
            "best": max(nbytes / v["min_s"] for v in ts) / 1e9,
        }
    return out


def cmd_tune(args) -> None:
    import torch

    started = _common.now()
    _common.setup_threads()
    try:
        task, cand, ref, new, inputs, expected, build_s = _reference_and_candidate(args, 0)
    except BaseException as exc:
        _common.fail("build", exc, started_unix=started)
        return
    flush = _common.Flusher(device=_common.device_for(cand))
    rows, fns = {}, {}
    with torch.no_grad():
        for v in [int(s) for s in args.variants.split(",") if s]:
            rows[v] = {"variant": v}
            try:
                cand.assay_select(v)
                check = _common.compare(expected, new(*inputs), args.atol, args.rtol)
                if check["ok"]:
                    fns[v] = _selected(cand, new, v)
                else:
                    rows[v].update(ok=False, error=check["reason"], done_unix=_common.now())
            except BaseException as exc:
                rows[v].update(ok=False, error=f"{type(exc).__name__}: {exc}"[:500], done_unix=_common.now())
        # All correct variants in the same interleaved rounds: timed one after another, a burst
        # of the neighbours' load during one variant's turn would decide the winner.
        try:
            times = _common.time_interleaved(fns, inputs, args.reps, 1, flush) if fns else {}
        except Exception:  # one variant failed while timed: time each alone to name it
            times = {}
            for v, fn in fns.items():
                try:
                    times[v] = _common.time_interleaved({v: fn}, inputs, args.reps, 1, flush)[v]
                except Exception as exc:
                    rows[v].update(ok=False, error=f"{type(exc).__name__}: {exc}"[:500])
        for v, t in times.items():
            rows[v].update(ok=True, median_s=t["median_s"], min_s=t["min_s"], reps=t["reps"])
        for v in fns:
            rows[v]["done_unix"] = _common.now()
    results = list(rows.values())
    _common.emit(
        {"ok": True, "started_unix": started, "build_s": build_s, "results": results, "device": _common.device()}
    )


def _selected(cand, new, v):
    def call(*a):
        cand.assay_select(v)
        return new(*a)

    return call


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("candidate")
    for name in ("test", "bench", "tune"):
        s = sub.add_parser(name)
        s.add_argument("task")
        s.add_argument("candidate")
        s.add_argument("--atol", type=float, default=1e-4)
        s.add_argument("--rtol", type=float, default=1e-4)
        if name == "test":
            s.add_argument("--seeds", default="0,1")
        if name == "bench":
            s.add_argument("--baselines", default="eager,compile")
            s.add_argument("--reps", type=int, default=20)
            s.add_argument("--warmup", type=int, default=3)
            s.add_argument("--warmup-s", type=float, default=0.3)
            s.add_argument("--copy-bw", action="store_true")
        if name == "tune":
            s.add_argument("--variants", required=True)
            s.add_argument("--reps", type=int, default=7)
    args = p.parse_args()
    {"build": cmd_build, "test": cmd_test, "bench": cmd_bench, "tune": cmd_tune}[args.cmd](args)


if __name__ == "__main__":
    main()
