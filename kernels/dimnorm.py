"""Normalisations over any one dimension, output shaped as the input: softmax and log-softmax
over a dim that is not the last (the last is the row template's), and a tensor divided by (or
multiplied with) a statistic of itself over one dim, as KernelBench writes norms by hand:
`x / torch.norm(x, p=2, dim=1, keepdim=True)`, `x / torch.sum(torch.abs(x), dim=1, keepdim=True)`,
`x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + eps)`, F.normalize's clamp_min.

Same view as the reductions (kernels/dimreduce.py): [outer, R, inner] around the dim. Over a
middle dim a thread takes a block of columns and walks its R rows a vector of columns at a
time, once for the statistic and once to write (softmax: three times), so every load is a
contiguous vector and nothing is reassociated across rows. Over the last dim (inner == 1) each
row is contiguous and its statistic is one vectorised loop. Statistics accumulate in double;
the steps after them (add eps, sqrt, rsqrt, clamp_min) run in float, in the task's order.
"""

from __future__ import annotations

from assay.kernels.cpp_templates import _dispatch
from assay.kernels.task import TaskInfo

SOFTMAX = {"softmax", "_softmax", "log_softmax", "_log_softmax"}
# The statistics, each as the double expression of one element `w` it sums.
STATS = {"sumsq": "w * w", "meansq": "w * w", "sumabs": "(w < 0 ? -w : w)", "meanabs": "(w < 0 ? -w : w)"}


def recognise(info: TaskInfo) -> dict | None:
    """The spec of a softmax over a non-last dim or of x / stat(x, dim), or None."""
    nodes, out = info.nodes, info.graph.get("output") or []
    if not nodes or out != [f"%n{len(nodes) - 1}"]:
        return None
    first = nodes[0]
    x = first["args"].get("input")
    if not isinstance(x, str) or not x.startswith("%in"):
        return None
    shape = info.ref_meta(x)["shape"]
    if not shape:
        return None
    if first["op"] in SOFTMAX:
        dim = first["args"].get("dim")
        if len(nodes) != 1 or not isinstance(dim, int) or not -len(shape) <= dim < len(shape):
            return None
        dim %= len(shape)
        if dim == len(shape) - 1 or first["args"].get("dtype") not in (None, "float32"):
            return None  # the row template's, or a dtype change it says it refuses
        return {
            "op": first["op"].lstrip("_"),
            "x": x,
            "dim": dim,
            "keepdim": True,
            "out_dtype": "float32",
            "consts": [],
        }
    return _by_hand(nodes, x, shape)


def _one_dim(args: dict, rank: int) -> int | None:
    dim = args.get("dim")
    if isinstance(dim, list) and len(dim) == 1:
        dim = dim[0]
    if not isinstance(dim, int) or isinstance(dim, bool) or not -rank <= dim < rank or not args.get("keepdim"):
        return None
    if args.get("dtype") not in (None, "float32"):
        return None
    return dim % rank


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _by_hand(nodes: list[dict], x: str, shape: list[int]) -> dict | None:
    rank = len(shape)
    a0 = nodes[0]["args"]
    if nodes[0]["op"] == "linalg_vector_norm" and a0.get("ord") in (1, 2):
        dim = _one_dim(a0, rank)
        stat, steps, k = ("sumsq", [["sqrt", None]], 1) if a0["ord"] == 2 else ("sumabs", [], 1)
    else:
        square = (nodes[0]["op"] == "pow" and a0.get("exponent") == 2) or (
            nodes[0]["op"] == "mul" and a0.get("other") == x
        )
        if not (square or nodes[0]["op"] == "abs") or len(nodes) < 3:
            return None
        red = nodes[1]
        if red["op"] not in ("sum", "mean") or red["args"].get("input") != "%n0":
            return None
        dim = _one_dim(red["args"], rank)
        stat, steps, k = red["op"] + ("sq" if square else "abs"), [], 2
    if dim is None or len(nodes) < k + 1:
        return None
    consts: list[dict] = []
    for j in range(k, len(nodes) - 1):
        node, prev = nodes[j], f"%n{j - 1}"
        a = node["args"]
        if a.get("input") != prev:
            return None
        if node["op"] == "add" and _number(a.get("other")) and a.get("alpha", 1) == 1:
            steps.append(["add", len(consts)])
            consts.append({"value": float(a["other"]), "path": f"{j}.other"})
        elif node["op"] in ("sqrt", "rsqrt") and len(a) == 1:
            steps.append([node["op"], None])
        elif node["op"] in ("clamp_min", "clamp") and _number(a.get("min")) and a.get("max") is None:
            steps.append(["clamp_min", len(consts)])
            consts.append({"value": float(a["min"]), "path": f"{j}.min"})
        elif node["op"] in ("expand_as", "expand") and node.get("shape") == shape:
            continue  # F.normalize broadcasts the statistic before dividing: no arithmetic
        else:
            return None
    # The last node combines x with the last step's value.
    last, stat_ref = nodes[-1], f"%n{len(nodes) - 2}"
    a = last["args"]
    if last["op"] == "div" and a.get("input") == x and a.get("other") == stat_ref and a.get("rounding_mode") is None:
        combine = "div"
    elif last["op"] == "mul" and {a.get("input"), a.get("other")} == {x, stat_ref}:
        combine = "mul"
    else:
        return None
    return {
        "op": "norm",
        "x": x,
        "dim": dim,
        "keepdim": True,
        "out_dtype": "float32",
        "stat": stat,
        "steps": steps,
        "combine": combine,
        "consts": consts,
    }


def _steps_cpp(steps: list[list], vec: bool) -> str:
    out = []
    for name, c in steps:
        if name == "add":
            out.append(f"s = s + vsplat(K[{c}]);" if vec else f"s = s + K[{c}];")
        elif name == "sqrt":
            out.append("s = vsqrt(s);" if vec else "s = sqrtf(s);")
        elif name == "rsqrt":
            out.append("s = vrsqrt(s);" if vec else "s = 1.0f / sqrtf(s);")
        else:  # clamp_min: NaN stays NaN, as in torch
            out.append(
                f"s = vsel(s != s, s, vmax(s, vsplat(K[{c}])));" if vec else f"s = s != s ? s : fmaxf(s, K[{c}]);"
            )
    return " ".join(out)


def _norm_bodies(spec: dict) -> tuple[str, str]:
    """(row body for inner == 1, column body for one vector of columns)."""
    stat, op = spec["stat"], "/" if spec["combine"] == "div" else "*"
    mean = stat.startswith("mean")
    row = f"""
      double a = 0.0;
#pragma omp simd reduction(+:a)
      for (long r = 0; r < R; ++r) {{ const double w = xr[r]; a += {STATS[stat]}; }}
      float s = (float)({"a / (double)R" if mean else "a"});
      {_steps_cpp(spec["steps"], vec=False)}
#pragma omp simd
      for (long r = 0; r < R; ++r) yr[r] = xr[r] {op} s;"""
    col = f"""
        vd a = {{}};
        for (long r = 0; r < R; ++r) {{ const vd w = __builtin_convertvector(LDC(xc + r * inner), vd); a += {STATS[stat]}; }}
        vf s = __builtin_convertvector({"a / (double)R" if mean else "a"}, vf);
        {_steps_cpp(spec["steps"], vec=True)}
        for (long r = 0; r < R; ++r) STC(yc + r * inner, LDC(xc + r * inner) {op} s);"""
    return row, col


def _softmax_body(op: str) -> str:
    # x - max is never above 0 (or is NaN), so exp needs only its lower clamp. A NaN anywhere in
    # a column makes all of it NaN, as torch's does; vmax alone would drop it.
    write = (
        """const vf inv = 1.0f / s;
        for (long r = 0; r < R; ++r) STC(yc + r * inner, LDC(yc + r * inner) * inv);"""
        if op == "softmax"
        else """const vf ls = vlog(s);
        for (long r = 0; r < R; ++r) STC(yc + r * inner, (LDC(xc + r * inner) - m) - ls);"""
    )
    keep = "STC(yc + r * inner, e); " if op == "softmax" else ""
    return f"""
        vf m = vsplat(-INFINITY); vi bad = {{}};
        for (long r = 0; r < R; ++r) {{ const vf v = LDC(xc + r * inner); m = vmax(v, m); bad |= v != v; }}
        m = vsel(bad, vsplat(NAN), m);
        vf s = vsplat(0.f);
        for (long r = 0; r < R; ++r) {{ const vf e = vexp_nonpos(LDC(xc + r * inner) - m); s += e; {keep}}}
        {write}"""


def source(spec: dict, configs: list[dict], vecmath: str) -> str:
    if spec["op"] == "norm":
        row, col = _norm_bodies(spec)
        rows = f"""
  if (inner == 1) {{
#pragma omp parallel for schedule(static) if (outer * R > 32768)
    for (long o = 0; o < outer; ++o) {{
      const float* xr = x + o * R; float* yr = out + o * R;{row}
    }}
    return;
  }}"""
    else:
        rows, col = "", _softmax_body(spec["op"])
    kernels = f"""{vecmath}
typedef double vd __attribute__((vector_size(VW * 8)));
#define LDC(p) (cnt == VW ? vload(p) : vload_n((p), cnt))
#define STC(p, v) do {{ if (cnt == VW) vstore((p), (v)); else vstore_n((p), (v), cnt); }} while (0)

template <int IB>
static void dimnorm(float* out, const float* const* L, const long* D, const float* K) {{
  (void)K;
  const float* x = L[0];
  const long outer = D[0], R = D[1], inner = D[2];{rows}
  const long nb = (inner + IB - 1) / IB;
#pragma omp parallel for schedule(static) if (outer * R * inner > 32768)
  for (long t = 0; t < outer * nb; ++t) {{
    const long o = t / nb, i0 = (t % nb) * IB, n = inner - i0 < IB ? inner - i0 : IB;
    const float* xb = x + o * R * inner + i0;
    float* yb = out + o * R * inner + i0;
    for (long c = 0; c < n; c += VW) {{
      const long cnt = n - c < VW ? n - c : VW;
      const float* xc = xb + c; float* yc = yb + c;
      (void)yc;{col}
    }}
  }}
}}
"""
    return kernels + _dispatch([f"&dimnorm<{c['ib']}>" for c in configs])
