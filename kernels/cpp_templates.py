"""C++ sources for the cpp backend's templates: elementwise chain, row reduction, tiled matmul
with a fused epilogue.

Every template compiles all of its requested configurations into ONE shared object, as C++
template instantiations behind a run-time dispatch table, so an autotune round costs one build.
The ABI is the same for all templates, so the Python side needs one ctypes signature:

    int assay_kernel(int variant, void** ptrs, const long* dims, const float* consts)

ptrs[0] is the output, ptrs[1:] the operands; dims and consts are template-specific and are
computed by the candidate's forward from the actual shapes and constructor arguments.
"""

from __future__ import annotations

import itertools
import math
import struct
from functools import lru_cache
from pathlib import Path

from assay.kernels.pointwise import Chain, cpp_chain_body

CPP_DIR = Path(__file__).with_name("cpp")


@lru_cache(maxsize=1)
def vecmath() -> str:
    return (CPP_DIR / "vecmath.h").read_text()


def _product(space: dict[str, list]) -> list[dict]:
    keys = list(space)
    return [dict(zip(keys, vals, strict=False)) for vals in itertools.product(*(space[k] for k in keys))]


def _dispatch(instances: list[str]) -> str:
    table = ",\n  ".join(instances)
    return f"""
typedef void (*assay_fn)(float*, const float* const*, const long*, const float*);
static const assay_fn ASSAY_VARIANTS[] = {{
  {table}
}};
extern "C" int assay_variant_count() {{ return (int)(sizeof ASSAY_VARIANTS / sizeof ASSAY_VARIANTS[0]); }}
extern "C" int assay_kernel(int v, void** ptrs, const long* dims, const float* consts) {{
  if (v < 0 || v >= assay_variant_count()) return 1;
  ASSAY_VARIANTS[v]((float*)ptrs[0], (const float* const*)(ptrs + 1), dims, consts);
  return 0;
}}
"""


def _consts(chain: Chain) -> list[str]:
    """Constant i as a float k{i} (for functions that take one, as softplus' beta) and a vector c{i}."""
    return [
        f"const float k{i} = K[{i}]; const vf c{i} = vsplat(k{i}); (void)k{i}; (void)c{i};"
        for i in range(len(chain.consts))
    ]


def _literals(chain: Chain) -> list[str] | None:
    """The chain's constants as exact fp32 C++ literals, the values the task was rendered with; None
    when there are none or one is not finite (no literal compares equal to a NaN)."""
    if not chain.consts:
        return None
    out = []
    for c in chain.consts:
        try:
            v = struct.unpack("f", struct.pack("f", float(c["value"])))[0]  # as ctypes.c_float holds it
        except OverflowError:  # beyond fp32: inf at run time
            return None
        if not math.isfinite(v):
            return None
        out.append(f"{v.hex()}f")
    return out


def leaf_dims(chain: Chain, first: int) -> dict[int, int]:
    """Where each broadcast leaf's stride parameters sit in the dims array."""
    slots, d = {}, first
    for j, leaf in enumerate(chain.leaves):
        if leaf["kind"] in ("tail", "row"):
            slots[j] = d
            d += 1 if leaf["kind"] == "tail" else 2
    return slots


# --- elementwise -------------------------------------------------------------------------

# From this output size on, the templates write with streaming stores only. The tuner times one
# call after each cache flush, so a plain store's write-back falls into the next flush, untimed;
# the verifier times calls back to back and pays it. For softmax the tuner picked plain stores in
# four of five cold `make demo` runs, and the verifier timed them at 1.0-1.35x eager where
# streaming stores read 1.5-1.65x; the suite's silu and gelu were tuned to plain stores too, which
# the verifier timed 0-11% slower than streaming ones in four of four pairs (bench/RESULTS.md).
# Smaller outputs may stay in cache for whatever reads them next, so both stay in the space.
STREAM_ONLY_BYTES = 8 << 20

# pf: how many floats ahead each input is asked for with a prefetch hint, 0 for none. On the Intel
# Xeon (480 MB of L3, which a 64 MB flush need not empty) the activations' math held the loads
# back: the hint 512 floats ahead took silu from 0.65-0.70 to 0.83-0.86 of a streaming copy and
# mish from 0.68-0.75 to 0.87-0.89, same rounds (bench/RESULTS.md). Where it does not pay, the
# tuner keeps 0.
ELEMENTWISE_SPACE = {"unroll": [2, 1, 4], "nt": [0, 1], "part": [0, 1, 2], "pf": [512, 0]}


def elementwise_space(out_bytes: int = 0) -> list[dict]:
    nt = [1] if out_bytes >= STREAM_ONLY_BYTES else ELEMENTWISE_SPACE["nt"]
    return _product({**ELEMENTWISE_SPACE, "nt": nt})


def elementwise_source(spec: dict, configs: list[dict]) -> str:
    chain = Chain.from_json(spec["chain"])
    slots = leaf_dims(chain, 2)
    hoisted, per_row, loads, expr = [], [], [], {}
    for j, leaf in enumerate(chain.leaves):
        kind = leaf["kind"]
        if kind == "scalar":
            hoisted.append(f"const vf l{j} = vsplat(L[{j}][0]);")
            expr[j] = f"l{j}"
        elif kind == "row":
            d = slots[j]
            per_row.append(f"const vf l{j} = vsplat(L[{j}][(r / D[{d}]) % D[{d + 1}]]);")
            expr[j] = f"l{j}"
        else:
            base = "pos" if kind == "full" else f"(pos % D[{slots[j]}])"
            per_row.append(f"const float* p{j} = L[{j}] + {base};")
            loads.append(f"if (PF) vprefetch(p{j} + i + PF); const vf x{j} = LD(p{j}, i, cnt);")
            expr[j] = f"x{j}"

    # The constants (softplus' beta and threshold, a clamp's bounds) come at run time, since a
    # model's constructor may set them, but a second instance of the loop has the rendered values
    # as literals, taken when the run-time ones equal them: vsoftplus and vtanh_softplus then lose
    # their test for the general case. Through K, it stayed in the loop: the compiler could not
    # move it out, reloaded the constants and the tables' rows each vector, and mish ran 10-13%
    # slower streamed (bench/RESULTS.md).
    def vmap(consts=None) -> str:
        body = "\n        ".join(loads + cpp_chain_body(chain, expr, consts=consts))
        return f"""vmap_range<U, NT>(out + pos, n, [&](long i, long cnt) -> vf {{
        {body}
      }});"""

    literals = _literals(chain)
    if literals:
        fixed = vmap([(f"vsplat({lit})", lit) for lit in literals])
        loop = f"if constexpr (SPEC) {{\n      {fixed}\n    }} else {{\n      {vmap()}\n    }}"
        pick = "const bool spec = " + " && ".join(f"K[{i}] == {lit}" for i, lit in enumerate(literals)) + ";"
        call = (
            "if (spec) run_range<U, NT, PF, 1>(out, L, D, K, s, e); else run_range<U, NT, PF, 0>(out, L, D, K, s, e);"
        )
    else:
        loop, pick, call = vmap(), "", "run_range<U, NT, PF, 0>(out, L, D, K, s, e);"
    src = f"""{vecmath()}
template <int U, int NT, int PF, int SPEC>
static void run_range(float* __restrict out, const float* const* L, const long* D, const float* K, long s, long e) {{
  const long cols = D[1];
  {" ".join(_consts(chain))}
  {" ".join(hoisted)}
  long pos = s;
  while (pos < e) {{
    const long r = pos / cols, c = pos - r * cols;
    (void)r;
    long n = cols - c;
    if (n > e - pos) n = e - pos;
    {" ".join(per_row)}
    {loop}
    pos += n;
  }}
}}

template <int U, int NT, int PART, int PF>
static void ew(float* out, const float* const* L, const long* D, const float* K) {{
  const long numel = D[0];
  {pick}
#pragma omp parallel if (numel > 32768)
  {{
    const long nt = omp_get_num_threads(), t = omp_get_thread_num();
    if (PART == 0) {{
      long per = (numel + nt - 1) / nt;
      per = (per + 15) & ~15L;  // whole cache lines per thread: no shared output line
      long s = t * per, e = s + per < numel ? s + per : numel;
      if (s < e) {{ {call} }}
    }} else if (PART == 1) {{
      // dynamic chunks: when the scheduler parks one thread, the other takes its share
      const long chunk = 32768;
#pragma omp for schedule(dynamic, 1) nowait
      for (long c = 0; c < (numel + chunk - 1) / chunk; ++c) {{
        const long s = c * chunk, e = (c + 1) * chunk < numel ? (c + 1) * chunk : numel;
        {call}
      }}
    }} else {{
      const long chunk = 131072;
      for (long s = t * chunk; s < numel; s += nt * chunk) {{
        const long e = s + chunk < numel ? s + chunk : numel;
        {call}
      }}
    }}
    if (NT) vfence();
  }}
}}
"""
    return src + _dispatch([f"&ew<{c['unroll']}, {c['nt']}, {c['part']}, {c.get('pf', 0)}>" for c in configs])


# --- row reductions ----------------------------------------------------------------------

ROW_SPACE = {"unroll": [2, 1, 4], "nt": [1, 0]}
# Algorithms per op, the default first. softmax 2: exp once into a per-thread scratch row, then
# one streaming pass writes y, so y's lines are never read (no read-for-ownership traffic).
ROW_ALGS = {"softmax": [2, 0, 1], "log_softmax": [0], "layer_norm": [0, 1], "rms_norm": [0]}
# How many rows ahead a row's exp or write pass asks for with a prefetch hint; 0: none, the
# hardware prefetcher alone. Since each thread reads its rows as one stream (claim_rows) the hint
# one row ahead was never the best: on the AMD EPYC softmax gained from 2 ahead and the others ran
# fastest without, so the tuner chooses for those (bench/RESULTS.md). Softmax's space stays as it
# is: the main job tunes it within its minute.
ROW_PREFETCH = {"softmax": [2], "log_softmax": [0, 2], "layer_norm": [0, 2], "rms_norm": [0, 2]}


def rowreduce_space(op: str, out_bytes: int = 0) -> list[dict]:
    nt = [1] if out_bytes >= STREAM_ONLY_BYTES else ROW_SPACE["nt"]
    return _product({**ROW_SPACE, "nt": nt, "alg": ROW_ALGS[op], "pf": ROW_PREFETCH[op]})


_ROW_PRELUDE = """
#include <atomic>

// Rows split into one contiguous range per thread, claimed a chunk at a time from its front; a
// thread done with its own range goes on to claim from the others'. A contiguous range keeps each
// thread's reads one sequential stream the hardware prefetcher follows: OpenMP's dynamic chunks
// interleave the threads' rows, and the four row reductions ran 7-30% slower with them
// (bench/RESULTS.md). The claims keep what the dynamic chunks were for: a thread parked by the
// scheduler does not hold the call, the other takes its rows.
struct alignas(64) RowClaim { std::atomic<long> next; };
template <class F>
AI void claim_rows(RowClaim* claims, long nrows, long chunk, F f) {
  const long nt = omp_get_num_threads(), t = omp_get_thread_num();
  const long per = (nrows + nt - 1) / nt;
  claims[t].next.store(t * per, std::memory_order_relaxed);
#pragma omp barrier
  for (long k = 0; k < nt; ++k) {
    const long v = (t + k) % nt, end = (v + 1) * per < nrows ? (v + 1) * per : nrows;
    for (long r0; (r0 = claims[v].next.fetch_add(chunk, std::memory_order_relaxed)) < end;)
      for (long r = r0; r < r0 + chunk && r < end; ++r) f(r);
  }
}

// Sum and max over a row with U independent accumulators (breaks the add dependency chain).
template <int U, class F>
AI vf row_fold(const float* x, long n, vf init, F f) {
  vf acc[U];
  for (int u = 0; u < U; ++u) acc[u] = init;
  long i = 0;
  for (; i + U * VW <= n; i += U * VW)
#pragma GCC unroll 16
    for (int u = 0; u < U; ++u) acc[u] = f(acc[u], vload(x + i + u * VW), (long)VW);
  for (; i + VW <= n; i += VW) acc[0] = f(acc[0], vload(x + i), (long)VW);
  if (i < n) acc[0] = f(acc[0], vload_n(x + i, n - i), n - i);
  for (int u = 1; u < U; ++u) acc[0] = f(acc[0], acc[u], -1L);
  return acc[0];
}
"""


def rowreduce_source(spec: dict, configs: list[dict]) -> str:
    op = spec["op"]
    has_w, has_b = int(spec.get("weight") is not None), int(spec.get("bias") is not None)
    # f(acc, v, lanes): lanes == -1 merges two accumulators; lanes < VW is a masked tail
    fmax = "[](vf a, vf v, long m) { return m == -1 || m == VW ? vmax(a, v) : vmax(a, vsel(vfirst(vsplat(1.f), m) != 0.f, v, a)); }"
    if op in ("softmax", "log_softmax"):
        # x - max is never above 0 (or is NaN), so exp needs only its lower clamp: vexp_nonpos
        row = f"""
    const vf mv = vsplat(vhmax(row_fold<U>(xr, cols, vsplat(-INFINITY), {fmax})));
    if ({"ALG == 2" if op == "softmax" else "0"}) {{
      vf s = vsplat(0.f);
      vmap_range<U, 0>(scratch, cols, [&](long i, long cnt) -> vf {{
        if (PF) vprefetch(nx + i);
        vf e = vexp_nonpos(LD(xr, i, cnt) - mv);
        s += cnt == VW ? e : vfirst(e, cnt);
        return e;
      }});
      const vf inv = vsplat(1.0f / vhsum(s));
      vmap_range<U, NT>(yr, cols, [&](long i, long cnt) -> vf {{ return LD(scratch, i, cnt) * inv; }});
    }} else if ({"ALG == 0" if op == "softmax" else "0"}) {{
      // exp once: store it, sum it, then scale the row while it is still in cache
      vf s = vsplat(0.f);
      vmap_range<U, 0>(yr, cols, [&](long i, long cnt) -> vf {{
        if (PF) vprefetch(nx + i);
        vf e = vexp_nonpos(LD(xr, i, cnt) - mv);
        s += cnt == VW ? e : vfirst(e, cnt);
        return e;
      }});
      const vf inv = vsplat(1.0f / vhsum(s));
      vmap_range<U, NT>(yr, cols, [&](long i, long cnt) -> vf {{ return LD(yr, i, cnt) * inv; }});
    }} else {{
      // two reads of x, no read of y: better when a row does not fit in cache
      const vf sv = row_fold<U>(xr, cols, vsplat(0.f), [&](vf a, vf v, long m) {{
        if (m == -1) return a + v;
        vf e = vexp_nonpos(v - mv);
        return a + (m == VW ? e : vfirst(e, m));
      }});
      const float sum = vhsum(sv);
      {
            "const vf inv = vsplat(1.0f / sum); vmap_range<U, NT>(yr, cols, [&](long i, long cnt) -> vf { if (PF) vprefetch(nx + i); return vexp_nonpos(LD(xr, i, cnt) - mv) * inv; });"
            if op == "softmax"
            else "const vf sh = mv + vsplat(logf(sum)); vmap_range<U, NT>(yr, cols, [&](long i, long cnt) -> vf { if (PF) vprefetch(nx + i); return LD(xr, i, cnt) - sh; });"
        }
    }}"""
    elif op == "layer_norm":
        row = """
    const float n = (float)cols;
    float mean, rstd;
    if (ALG == 0) {
      // two passes over a row that stays in cache: exact centred variance
      mean = vhsum(row_fold<U>(xr, cols, vsplat(0.f), [](vf a, vf v, long m) { (void)m; return a + v; })) / n;
      const vf mv = vsplat(mean);
      const float var = vhsum(row_fold<U>(xr, cols, vsplat(0.f), [&](vf a, vf v, long m) {
        if (m == -1) return a + v;
        vf d = m == VW ? v - mv : vfirst(v - mv, m);
        return a + d * d;
      })) / n;
      rstd = 1.0f / sqrtf(var + eps);
    } else {
      // one pass, shifted by the first element so the sum of squares does not cancel
      const vf k = vsplat(xr[0]);
      vf s = vsplat(0.f), q = vsplat(0.f);
      long i = 0;
      for (; i + VW <= cols; i += VW) { vf d = vload(xr + i) - k; s += d; q += d * d; }
      if (i < cols) { vf d = vfirst(vload_n(xr + i, cols - i) - k, cols - i); s += d; q += d * d; }
      const float sm = vhsum(s) / n;
      const float var = vhsum(q) / n - sm * sm;
      mean = xr[0] + sm;
      rstd = 1.0f / sqrtf((var > 0.f ? var : 0.f) + eps);
    }
    const vf mv = vsplat(mean), rv = vsplat(rstd);
    vmap_range<U, NT>(yr, cols, [&](long i, long cnt) -> vf {
      if (PF) vprefetch(nx + i);
      vf y = (LD(xr, i, cnt) - mv) * rv;
      if (HAS_W) y = y * LD(w, i, cnt);
      if (HAS_B) y = y + LD(b, i, cnt);
      return y;
    });"""
    elif op == "rms_norm":
        row = """
    const float ms = vhsum(row_fold<U>(xr, cols, vsplat(0.f), [](vf a, vf v, long m) {
      return m == -1 ? a + v : a + v * v;
    })) / (float)cols;
    const vf rv = vsplat(1.0f / sqrtf(ms + eps));
    vmap_range<U, NT>(yr, cols, [&](long i, long cnt) -> vf {
      if (PF) vprefetch(nx + i);
      vf y = LD(xr, i, cnt) * rv;
      if (HAS_W) y = y * LD(w, i, cnt);
      return y;
    });"""
    else:
        raise ValueError(op)
    src = f"""{vecmath()}
{_ROW_PRELUDE}
static const int HAS_W = {has_w}, HAS_B = {has_b};

template <int U, int NT, int ALG, int PF>
static void rows(float* out, const float* const* L, const long* D, const float* K) {{
  const float* x = L[0];
  const float* w = HAS_W ? L[1] : nullptr;
  const float* b = HAS_B ? L[1 + HAS_W] : nullptr;
  (void)w; (void)b; (void)K;
  const long nrows = D[0], cols = D[1];
  const float eps = {"K[0]" if op in ("layer_norm", "rms_norm") else "0.f"};
  (void)eps;
  RowClaim* claims = new RowClaim[omp_get_max_threads()];
// One parallel region per call: under a busy scheduler every extra fork/join can cost a timeslice.
#pragma omp parallel if (nrows * cols > 32768)
  {{
    float* scratch = ALG == 2 ? aligned_scratch((size_t)cols + VW) : nullptr;
    (void)scratch;
    // claimed in blocks of ~16K elements
    const long rchunk = cols >= 16384 ? 1 : 16384 / (cols > 0 ? cols : 1);
    claim_rows(claims, nrows, rchunk, [&](long r) {{
      const float* xr = x + r * cols;
      float* yr = out + r * cols;
      const float* nx = r + PF < nrows ? xr + PF * cols : xr;  // PF rows ahead, prefetched while this one computes
      (void)nx;
      {row}
    }});
    if (NT) vfence();
    free(scratch);
  }}
  delete[] claims;
}}
"""
    return src + _dispatch(
        [f"&rows<{c['unroll']}, {c['nt']}, {c['alg']}, {c.get('pf', ROW_PREFETCH[op][0])}>" for c in configs]
    )


# --- matmul + epilogue ---------------------------------------------------------------------

MATMUL_TILES = [(6, 2), (4, 3), (8, 2), (4, 2), (12, 1)]
MATMUL_SPACE = {"tile": list(range(len(MATMUL_TILES))), "mb": [96, 48, 192], "part": [0, 1], "apack": [0, 1]}


def matmul_space() -> list[dict]:
    return _product(MATMUL_SPACE)


def matmul_source(spec: dict, configs: list[dict]) -> str:
    chain = Chain.from_json(spec["chain"])
    slots = leaf_dims(chain, 3)
    leaf_lines, expr = [], {}
    for j, leaf in enumerate(chain.leaves):
        k = leaf["kind"]
        if k == "scalar":
            leaf_lines.append(f"const vf l{j} = vsplat(L[2 + {j}][0]);")
        elif k == "row":
            d = slots[j]
            leaf_lines.append(f"const vf l{j} = vsplat(L[2 + {j}][(m / D[{d}]) % D[{d + 1}]]);")
        else:
            base = "(m * N + col)" if k == "full" else f"((m * N + col) % D[{slots[j]}])"
            leaf_lines.append(f"const vf l{j} = LD(L[2 + {j}] + {base}, 0, cnt);")
        expr[j] = f"l{j}"
    epilogue = "\n      ".join(leaf_lines + cpp_chain_body(chain, expr, acc="acc"))
    kn = int(spec["layout"] == "kn")
    src = f"""{vecmath()}
static const int B_KN = {kn};  // 1: B is (K, N); 0: B is (N, K) as nn.Linear stores it

// Epilogue on one accumulator vector: row m, columns [col, col + cnt).
AI vf epilogue(vf acc, long m, long col, long cnt, long N, const float* const* L, const long* D, const float* K) {{
  (void)m; (void)col; (void)cnt; (void)N; (void)L; (void)D; (void)K;
  {" ".join(_consts(chain))}
  {epilogue}
}}

// Pack B into panels of NR columns, k-major, zero-padded: the micro-kernel reads them linearly.
// Called inside a parallel region: the threads share the panels, then meet at the barrier.
template <int NR>
static void pack_b(float* __restrict Bp, const float* B, long N, long Kd) {{
  const long np = (N + NR - 1) / NR;
#pragma omp for schedule(static)
  for (long p = 0; p < np; ++p) {{
    float* dst = Bp + p * Kd * NR;
    for (long j = 0; j < NR; ++j) {{
      const long n = p * NR + j;
      if (n >= N) {{
        for (long k = 0; k < Kd; ++k) dst[k * NR + j] = 0.f;
      }} else if (B_KN) {{
        for (long k = 0; k < Kd; ++k) dst[k * NR + j] = B[k * N + n];
      }} else {{
        const float* src = B + n * Kd;
        for (long k = 0; k < Kd; ++k) dst[k * NR + j] = src[k];
      }}
    }}
  }}
}}

// APACK: A arrives packed k-major ([k][MR]), so its MR values per k sit in one cache line.
template <int MR, int NV, int APACK>
AI void micro(const float* __restrict A, long lda, const float* __restrict Bp, long Kd, vf (&acc)[MR][NV]) {{
  for (long k = 0; k < Kd; ++k) {{
    vf b[NV];
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) b[j] = vload(Bp + (k * NV + j) * VW);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {{
      const vf a = vsplat(APACK ? A[k * MR + i] : A[i * lda + k]);
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) acc[i][j] += a * b[j];
    }}
  }}
}}

template <int MR, int NV, int APACK>
static void tile(float* C, const float* A, const float* Bp, long i0, long p, long M, long N, long Kd,
                 float* apad, const float* const* L, const long* D, const float* K) {{
  const int NR = NV * VW;
  const long mr = M - i0 < MR ? M - i0 : MR;
  const float* a = A + i0 * Kd;
  if (APACK) {{
    for (long k = 0; k < Kd; ++k)
      for (int i = 0; i < MR; ++i) apad[k * MR + i] = i < mr ? a[i * Kd + k] : 0.f;
    a = apad;
  }} else if (mr < MR) {{  // last rows: copy into a zero-padded block so the micro-kernel stays branch-free
    memset(apad, 0, sizeof(float) * MR * Kd);
    memcpy(apad, a, sizeof(float) * mr * Kd);
    a = apad;
  }}
  vf acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) acc[i][j] = vsplat(0.f);
  micro<MR, NV, APACK>(a, Kd, Bp + p * Kd * NR, Kd, acc);
  for (long i = 0; i < mr; ++i) {{
    const long m = i0 + i;
    for (int j = 0; j < NV; ++j) {{
      const long col = p * NR + j * VW;
      if (col >= N) break;
      const long cnt = N - col < VW ? N - col : VW;
      const vf y = epilogue(acc[i][j], m, col, cnt, N, L, D, K);
      if (cnt == VW) vstore(C + m * N + col, y); else vstore_n(C + m * N + col, y, cnt);
    }}
  }}
}}

template <int MR, int NV, int MB, int PART, int APACK>
static void mm(float* C, const float* const* L, const long* D, const float* K) {{
  const long M = D[0], N = D[1], Kd = D[2];
  const int NR = NV * VW;
  const float* A = L[0];
  const long np = (N + NR - 1) / NR, nmb = (M + MB - 1) / MB;
  float* Bp = aligned_scratch((size_t)np * Kd * NR);
  // One parallel region: pack B (the implicit barrier after it), then the tiles.
#pragma omp parallel
  {{
    pack_b<NR>(Bp, L[1], N, Kd);
    float* apad = aligned_scratch((size_t)MR * Kd);
    // PART 0: a thread owns row blocks (A read once); 1: it owns column panels (B read once)
#pragma omp for collapse(2) schedule(static)
    for (long outer = 0; outer < (PART == 0 ? nmb : np); ++outer)
      for (long inner = 0; inner < (PART == 0 ? np : nmb); ++inner) {{
        const long mb = PART == 0 ? outer : inner, p = PART == 0 ? inner : outer;
        const long end = (mb + 1) * MB < M ? (mb + 1) * MB : M;
        for (long i0 = mb * MB; i0 < end; i0 += MR)
          tile<MR, NV, APACK>(C, A, Bp, i0, p, M, N, Kd, apad, L, D, K);
      }}
    free(apad);
  }}
  free(Bp);
}}
"""
    inst = []
    for c in configs:
        mr, nv = MATMUL_TILES[c["tile"]]
        mb = max(mr, c["mb"] // mr * mr)
        inst.append(f"&mm<{mr}, {nv}, {mb}, {c['part']}, {c['apack']}>")
    return src + _dispatch(inst)
