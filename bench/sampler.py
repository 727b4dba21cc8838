"""What the verifier's CPU sampler costs the candidate it times: one process, a row-softmax
kernel in C++ with OpenMP (what a candidate builds) and torch.softmax, each timed in
interleaved rounds with the sampler armed and not armed. Prints one JSON object.

    python bench/sampler.py [--rounds 15] [--calls 60]

`overhead_*` is armed over unarmed, medians of per-call time over the rounds (1.00: no cost).
The sampler interrupts each thread every `sample_us` of its CPU time (the kernel checks at its
tick, so at most once per tick per thread); each interruption records one address.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "verifiers" / "kernel" / "harness"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

KERNEL = r"""
#include <math.h>
extern "C" void own_softmax(const float* x, float* y, long rows, long cols) {
  #pragma omp parallel for
  for (long r = 0; r < rows; ++r) {
    const float* a = x + r * cols; float* b = y + r * cols; float m = a[0], s = 0.f;
    for (long c = 0; c < cols; ++c) m = a[c] > m ? a[c] : m;
    for (long c = 0; c < cols; ++c) { b[c] = expf(a[c] - m); s += b[c]; }
    for (long c = 0; c < cols; ++c) b[c] /= s;
  }
}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=60)
    ap.add_argument("--sample-us", type=int, default=1000)
    args = ap.parse_args()
    if shutil.which("g++") is None:
        sys.exit("bench/sampler.py: g++ is needed to build the sampler and the kernel")
    import torch
    import worker
    from _kernels_common import machine

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "k.cpp").write_text(KERNEL)
        subprocess.run(
            [
                "g++",
                "-O2",
                "-fPIC",
                "-shared",
                str(ROOT / "verifiers" / "kernel" / "harness" / "sampler.cpp"),
                "-o",
                str(folder / "sampler.so"),
                "-lrt",
            ],
            check=True,
        )
        subprocess.run(
            [
                "g++",
                "-O3",
                "-march=native",
                "-ffast-math",
                "-fPIC",
                "-shared",
                "-fopenmp",
                str(folder / "k.cpp"),
                "-o",
                str(folder / "libk.so"),
            ],
            check=True,
        )
        sampler = worker.Sampler(str(folder / "sampler.so"), args.sample_us)
        lib = ctypes.CDLL(str(folder / "libk.so"))
        x = torch.randn(4096, 1024)
        y = torch.empty_like(x)
        subjects = {
            "own_kernel": lambda: lib.own_softmax(
                ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(y.data_ptr()), 4096, 1024
            ),
            "torch_softmax": lambda: torch.softmax(x, -1),
        }
        per_call: dict[tuple[str, bool], list[float]] = {}
        for fn in subjects.values():
            for _ in range(20):
                fn()
        for _ in range(args.rounds):
            for name, fn in subjects.items():
                for armed in (False, True):
                    if armed:
                        sampler.arm(args.calls)
                    t0 = time.perf_counter()
                    for _ in range(args.calls):
                        fn()
                    elapsed = time.perf_counter() - t0
                    if armed:
                        sampler.disarm()
                    per_call.setdefault((name, armed), []).append(elapsed / args.calls)
        report = sampler.report()
    out = {
        "sample_us": args.sample_us,
        "rounds": args.rounds,
        "calls_per_round": args.calls,
        "samples": report["count"],
        "sampled_vs_cpu": round(report["sampled_ms"] / max(report["cpu_ms"], 1e-9), 3),
        "problems": report["problems"],
    }
    for name in subjects:
        off, on = statistics.median(per_call[(name, False)]), statistics.median(per_call[(name, True)])
        out[f"{name}_ms"] = round(off * 1e3, 4)
        out[f"overhead_{name}"] = round(on / off, 4)
    out["machine"] = machine()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
