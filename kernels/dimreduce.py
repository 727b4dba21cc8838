"""Reductions over any one dimension: sum, mean, prod, max, min (values, as amax/amin or
torch.max(x, dim)[0]) and argmax, argmin (int64 indices, or torch.max(x, dim)[1]).

The input is viewed as [outer, R, inner] around the reduced dimension. Over the last one
(inner == 1) each output is one contiguous row; over any other, a thread takes a block of
`inner` columns and walks the R rows beneath it, one accumulator per column, so the loop
vectorises across columns with no reassociation (the reason eager is slow there: it strides).
Sums and means accumulate in double, so the result is never further from the exact one than
eager's float cascade; max, min and the arg-reductions follow torch: NaN wins, and the first
index of the extreme (or of the first NaN) is returned. Normalisations over one dim (softmax
over a middle one, x / norm(x) written by hand) share this view and template kind; their
kernels are in kernels/dimnorm.py.
"""

from __future__ import annotations

from assay.kernels import dimnorm
from assay.kernels.cpp_templates import _dispatch
from assay.kernels.task import TaskInfo

VALUE_OPS = {"sum", "mean", "prod", "amax", "amin"}
INDEX_OPS = {"argmax", "argmin"}
# torch.max(x, dim) / torch.min(x, dim) return both; getitem picks one.
# Shaped as the input, on the same [outer, R, inner] view: kernels/dimnorm.py.
NORM_OPS = {"softmax", "log_softmax", "norm"}
PAIRS = {"max": ("amax", "argmax"), "min": ("amin", "argmin")}
SPACE = [{"ib": 64}, {"ib": 256}, {"ib": 16}]


class NotADimReduce(Exception):
    """Why a graph that looks like one is not (its message goes into the no-template reason)."""


def recognise(info: TaskInfo) -> dict | None:
    """The spec of a one-dim reduction of a forward input, None when the graph is not one."""
    nodes, out = info.nodes, info.graph.get("output") or []
    if not nodes or len(out) != 1:
        return None
    first = nodes[0]
    if first["op"] in VALUE_OPS | INDEX_OPS and len(nodes) == 1:
        op = first["op"]
    elif first["op"] in PAIRS and all(n["op"] == "getitem" and n["args"].get("arg0") == "%n0" for n in nodes[1:]):
        picked = next((n for k, n in enumerate(nodes) if f"%n{k}" == out[0]), None)
        if picked is None or picked["op"] != "getitem" or picked["args"].get("arg1") not in (0, 1):
            return None
        op = PAIRS[first["op"]][picked["args"]["arg1"]]
    else:
        return None
    a = first["args"]
    x = a.get("input")
    if not isinstance(x, str) or not x.startswith("%in"):
        return None
    meta = info.ref_meta(x)
    shape = meta["shape"]
    if meta.get("dtype") != "float32":
        raise NotADimReduce(f"{op} of a {meta.get('dtype')} tensor (the templates are fp32 only)")
    if a.get("dtype") not in (None, "float32"):
        raise NotADimReduce(f"{op} with a dtype change to {a.get('dtype')}")
    dim = a.get("dim")
    if isinstance(dim, list):
        if len(dim) != 1:
            raise NotADimReduce(f"{op} over dims {dim}, not one")
        dim = dim[0]
    if not isinstance(dim, int) or isinstance(dim, bool) or not -len(shape) <= dim < len(shape):
        raise NotADimReduce(f"{op} over dim {dim!r}, not one dim of {shape}")
    if shape[dim] == 0 and op not in ("sum", "prod"):
        raise NotADimReduce(f"{op} over an empty dim")
    return {
        "op": op,
        "x": x,
        "dim": dim % len(shape),
        "keepdim": bool(a.get("keepdim")),
        "out_dtype": "int64" if op in INDEX_OPS else "float32",
        "consts": [],
    }


def space() -> list[dict]:
    return [dict(c) for c in SPACE]


_INIT = {
    "sum": "0.0",
    "mean": "0.0",
    "prod": "1.0",
}
_COMBINE = {"sum": "a + v", "mean": "a + v", "prod": "a * v"}


def source(spec: dict, configs: list[dict], vecmath: str) -> str:
    op = spec["op"]
    if op in NORM_OPS:
        return dimnorm.source(spec, configs, vecmath)
    if op in _COMBINE:
        body = f"""
  // double accumulators: never further from the exact sum than eager's float cascade
  if (inner == 1) {{
#pragma omp parallel for schedule(static) if (outer * R > 32768)
    for (long o = 0; o < outer; ++o) {{
      const float* xr = x + o * R;
      double a = {_INIT[op]};
#pragma omp simd reduction({"+" if op != "prod" else "*"}:a)
      for (long r = 0; r < R; ++r) {{ const double v = xr[r]; a = {_COMBINE[op]}; }}
      out[o] = (float)({"a / (double)R" if op == "mean" else "a"});
    }}
    return;
  }}
  const long nb = (inner + IB - 1) / IB;
#pragma omp parallel for schedule(static) if (outer * R * inner > 32768)
  for (long t = 0; t < outer * nb; ++t) {{
    const long o = t / nb, i0 = (t % nb) * IB, n = inner - i0 < IB ? inner - i0 : IB;
    double acc[IB];
    for (long i = 0; i < n; ++i) acc[i] = {_INIT[op]};
    const float* xb = x + o * R * inner + i0;
    for (long r = 0; r < R; ++r) {{
      const float* xr = xb + r * inner;
#pragma omp simd
      for (long i = 0; i < n; ++i) {{ const double v = xr[i]; const double a = acc[i]; acc[i] = {_COMBINE[op]}; }}
    }}
    float* y = out + o * inner + i0;
    for (long i = 0; i < n; ++i) y[i] = (float)({"acc[i] / (double)R" if op == "mean" else "acc[i]"});
  }}"""
    else:
        better = "v > b" if op in ("amax", "argmax") else "v < b"
        index = op in INDEX_OPS
        store_block = "yi[i] = (int64_t)idx[i];" if index else "y[i] = best[i];"
        if index:
            row = f"""      float b = xr[0]; long k = 0;
      for (long r = 1; r < R && b == b; ++r) {{
        const float v = xr[r];
        if ({better} || v != v) {{ b = v; k = r; }}
      }}
      yi[o] = (int64_t)k;"""
        else:
            # A value has no tie to break, so the row vectorises: the extreme by SIMD lanes and,
            # beside it, whether any NaN was seen (which then is the answer, as in torch).
            red = "max" if op == "amax" else "min"
            row = f"""      float b = xr[0]; int nan = 0;
#pragma omp simd reduction({red}:b) reduction(|:nan)
      for (long r = 0; r < R; ++r) {{ const float v = xr[r]; b = {better} ? v : b; nan |= v != v; }}
      y[o] = nan ? __builtin_nanf("") : b;"""
        body = f"""
  // NaN wins and stays; the first extreme wins ties (strict comparison), as in torch
  int64_t* yi = (int64_t*)out; float* y = out; (void)yi; (void)y;
  if (inner == 1) {{
#pragma omp parallel for schedule(static) if (outer * R > 32768)
    for (long o = 0; o < outer; ++o) {{
      const float* xr = x + o * R;
{row}
    }}
    return;
  }}
  const long nb = (inner + IB - 1) / IB;
#pragma omp parallel for schedule(static) if (outer * R * inner > 32768)
  for (long t = 0; t < outer * nb; ++t) {{
    const long o = t / nb, i0 = (t % nb) * IB, n = inner - i0 < IB ? inner - i0 : IB;
    float best[IB]; long idx[IB];
    const float* xb = x + o * R * inner + i0;
    for (long i = 0; i < n; ++i) {{ best[i] = xb[i]; idx[i] = 0; }}
    for (long r = 1; r < R; ++r) {{
      const float* xr = xb + r * inner;
#pragma omp simd
      for (long i = 0; i < n; ++i) {{
        const float v = xr[i], b = best[i];
        const bool take = b == b && ({better} || v != v);
        best[i] = take ? v : b;
        idx[i] = take ? r : idx[i];
      }}
    }}
    (void)idx; (void)best;
    {"int64_t* yo = yi + o * inner + i0;" if index else "float* yo = y + o * inner + i0;"}
    for (long i = 0; i < n; ++i) {store_block.replace("yi[i]", "yo[i]").replace("y[i]", "yo[i]")}
  }}"""
    kernels = f"""{vecmath}

template <int IB>
static void dimreduce(float* out, const float* const* L, const long* D, const float* K) {{
  (void)K;
  const float* x = L[0];
  const long outer = D[0], R = D[1], inner = D[2];
{body}
}}
"""
    return kernels + _dispatch([f"&dimreduce<{c['ib']}>" for c in configs])
