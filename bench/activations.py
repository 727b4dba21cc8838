"""The C++ templates' activations against a copy of the same size, in one process; prints JSON.

    python bench/activations.py [--against REV] [--rounds 60] [--only gelu,softplus] [--prefetch 512]

The suite (bench/kernels.py) times whole candidates, one harness process per task, against a
copy timed in the same rounds; between processes its copy rate moves by a third on this shared
machine, which hides a change of a tenth in one activation. Here every activation of
kernels/cpp/vecmath.h streams a 2048x2048 fp32 tensor (16 MB in, 16 MB out, all threads,
streaming stores), round-robin with a streaming copy of the same tensor and the last-level cache
flushed before each call, so the noise meets all of them alike. Per activation: the median ms,
`fraction_of_copy` (the copy's median over its own: 1.0 means the math costs nothing beyond the
memory traffic) and `in_cache_ns` (ns per element on one thread over 4096 floats that stay in
L1: the math alone). Each activation's loop asks for its input `--prefetch` floats ahead, as the
elementwise template's tuned `pf` does (0: the hardware prefetcher alone). `--against REV` builds
REV's vecmath.h into the same program, in the same rounds: a before/after of a vecmath change
that the machine's drift cannot fake.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEADER = ROOT / "kernels" / "cpp" / "vecmath.h"
N = 2048 * 2048  # elements streamed per call: 16 MB in, 16 MB out

# name -> expression of x (a vf), as the elementwise template calls it; softplus and mish with
# torch's defaults.
ACTIVATIONS = {
    "silu": "vsilu(x)",
    "sigmoid": "vsigmoid(x)",
    "gelu": "vgelu(x)",
    "gelu_tanh": "vgelu_tanh(x)",
    "tanh": "vtanh(x)",
    "softplus": "vsoftplus(x, one, twenty)",
    "mish": "vmish(x)",
    "exp": "vexp(x)",
}

PROGRAM = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <omp.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>
%(namespaces)s
static const long N = %(n)dL;
static double now_ms() { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
// Globals: the compiler sees softplus's arguments as the template's runtime values.
static float one = 1.0f, twenty = 20.0f;
alignas(64) static float small_in[4096], small_out[4096];
%(subjects)s
typedef double (*stream_fn)(float*, const float*);
typedef double (*cache_fn)();

int main(int argc, char** argv) {
  int rounds = atoi(argv[1]);
  float* x = (float*)aligned_alloc(64, N * 4);
  float* o = (float*)aligned_alloc(64, N * 4);
  const long fl_n = (64L << 20) / 4;
  float* fl = (float*)aligned_alloc(64, fl_n * 4);
  for (long i = 0; i < N; ++i) x[i] = (i %% 4096 - 2048) * 0.004f;
  for (int i = 0; i < 4096; ++i) small_in[i] = (i - 2048) * 0.004f;
  memset(o, 0, N * 4); memset(fl, 0, fl_n * 4);
  const char* names[] = {%(names)s};
  stream_fn streams[] = {%(streams)s};
  cache_fn caches[] = {%(caches)s};
  const int K = sizeof(names) / sizeof(names[0]);
  std::vector<std::vector<double>> t(K);
  std::vector<double> cache_ns(K);
  for (int k = 0; k < K; ++k) cache_ns[k] = caches[k]();
  for (int r = 0; r < rounds + 2; ++r) {
    for (int j = 0; j < K; ++j) {
      int k = (j + r) %% K;  // a rotating order, so no subject always follows the same one
#pragma omp parallel for
      for (long i = 0; i < fl_n; i += 16) fl[i] += 1.f;
      double ms = streams[k](o, x);
      if (r >= 2) t[k].push_back(ms);  // two rounds of warm-up
    }
  }
  std::printf("{");
  for (int k = 0; k < K; ++k) {
    std::sort(t[k].begin(), t[k].end());
    std::printf("%%s\"%%s\": {\"median_ms\": %%.4f, \"best_ms\": %%.4f, \"in_cache_ns\": %%.4f}", k ? ", " : "", names[k],
                t[k][t[k].size() / 2], t[k][0], cache_ns[k]);
  }
  std::printf("}\n");
}
"""

# One subject: the elementwise template's own loop (vmap_range, streaming stores) over each
# thread's share, and the same loop over 4096 floats in L1 on one thread.
SUBJECT = r"""
static double stream_%(k)d(float* o, const float* xs) {
  using namespace %(ns)s;
  const double t0 = now_ms();
#pragma omp parallel
  {
    const long nt = omp_get_num_threads(), t = omp_get_thread_num();
    const long per = ((N + nt - 1) / nt + 63) & ~63L, s = t * per, e = std::min(N, s + per);
    if (s < e) vmap_range<2, 1>(o + s, e - s, [&](long i, long cnt) -> vf { %(pf)s const vf x = LD(xs + s, i, cnt); return %(expr)s; });
    vfence();
  }
  return now_ms() - t0;
}
static double cache_%(k)d() {
  using namespace %(ns)s;
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const double t0 = now_ms();
    for (int k = 0; k < 4000; ++k) {
      vmap_range<2, 0>(small_out, 4096, [&](long i, long cnt) -> vf { const vf x = LD(small_in, i, cnt); return %(expr)s; });
      __asm__ volatile("" ::: "memory");
    }
    best = std::min(best, (now_ms() - t0) * 1e6 / (4000.0 * 4096));
  }
  return best;
}
"""


def _source(headers: dict[str, Path], names: list[str], prefetch: int = 0) -> str:
    namespaces = [f'namespace {ns} {{\n#include "{header}"\n}}' for ns, header in headers.items()]
    subjects = [("copy", "cur", "x")]
    for ns in headers:
        subjects += [(name if ns == "cur" else f"{name}@{ns}", ns, ACTIVATIONS[name]) for name in names]
    return PROGRAM % {
        "n": N,
        "namespaces": "\n".join(namespaces),
        # the copy stays a plain streaming copy: the roofline the suite divides by
        "subjects": "".join(
            SUBJECT
            % {"k": k, "ns": ns, "expr": expr, "pf": f"vprefetch(xs + s + i + {prefetch});" if prefetch and k else ""}
            for k, (_, ns, expr) in enumerate(subjects)
        ),
        "names": ", ".join(f'"{label}"' for label, _, _ in subjects),
        "streams": ", ".join(f"stream_{k}" for k in range(len(subjects))),
        "caches": ", ".join(f"cache_{k}" for k in range(len(subjects))),
    }


def _header_at(rev: str, into: Path) -> Path:
    res = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:kernels/cpp/vecmath.h"], capture_output=True, text=True
    )
    if res.returncode != 0:
        why = (res.stderr.strip().splitlines() or ["git failed"])[0]
        print(f"error: no kernels/cpp/vecmath.h at {rev!r} ({why}): give a commit of this repository", file=sys.stderr)
        raise SystemExit(2)
    path = into / "vecmath_against.h"
    path.write_text(res.stdout)
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", metavar="REV", help="also time this git revision's vecmath.h, in the same rounds")
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument(
        "--prefetch",
        type=int,
        default=512,
        metavar="FLOATS",
        help="prefetch hint distance in each activation's loop, as the template's pf (0: none)",
    )
    ap.add_argument("--only", help="comma-separated activations (default: all of " + ", ".join(ACTIVATIONS) + ")")
    args = ap.parse_args()
    names = [n.strip() for n in args.only.split(",")] if args.only else list(ACTIVATIONS)
    unknown = [n for n in names if n not in ACTIVATIONS]
    if args.prefetch < 0:
        print("error: --prefetch must be 0 or more floats", file=sys.stderr)
        return 2
    if unknown or args.rounds < 1:
        print(
            f"error: unknown activation {unknown[0]!r}: choose from {', '.join(ACTIVATIONS)}"
            if unknown
            else "error: --rounds must be at least 1",
            file=sys.stderr,
        )
        return 2
    if shutil.which("g++") is None:
        print("error: g++ is needed to build the activations: install it (apt-get install -y g++)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="assay-act-") as tmp:
        headers = {"cur": HEADER}
        if args.against:
            headers["against"] = _header_at(args.against, Path(tmp))
        src = Path(tmp) / "act.cpp"
        src.write_text(_source(headers, names, args.prefetch))
        exe = Path(tmp) / "act"
        flags = ["-O3", "-march=native", "-ffp-contract=fast", "-fno-math-errno", "-fopenmp"]
        res = subprocess.run(["g++", *flags, "-o", str(exe), str(src)], capture_output=True, text=True)
        if res.returncode != 0:
            print(f"error: the activations did not build:\n{res.stderr[-3000:]}", file=sys.stderr)
            return 1
        threads = len(os.sched_getaffinity(0))
        run = subprocess.run(
            [str(exe), str(args.rounds)],
            capture_output=True,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": str(threads), "OMP_PROC_BIND": "false"},
        )
        if run.returncode != 0:
            print(f"error: the activations crashed: {run.stderr[-2000:]}", file=sys.stderr)
            return 1
    times = json.loads(run.stdout)
    copy = times.pop("copy")["median_ms"]
    out = {
        "bytes_moved": 2 * N * 4,
        "copy_gbps": round(2 * N * 4 / copy / 1e6, 1),
        "activations": {
            name: {
                "median_ms": round(t["median_ms"], 4),
                "fraction_of_copy": round(copy / t["median_ms"], 3),
                "in_cache_ns": round(t["in_cache_ns"], 3),
            }
            for name, t in times.items()
        },
        "rounds": args.rounds,
        "against": args.against,
        "prefetch": args.prefetch,
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "threads": threads,
            "load_avg_1m": os.getloadavg()[0],
        },
    }
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
