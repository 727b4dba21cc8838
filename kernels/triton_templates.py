"""Triton templates: elementwise chain, row reduction, matmul with epilogue.

Checked on the CPU under TRITON_INTERPRET=1 (correctness only: the interpreter runs the
kernel in numpy, so its timings mean nothing) and timed only where a GPU exists. The
candidate has the same shape as the cpp backend's: a self-contained file defining ModelNew,
whose forward allocates the output with torch.empty and launches the kernel.
"""

from __future__ import annotations

import json

from assay.kernels.candidate import init_lines
from assay.kernels.pointwise import Chain, triton_op

ELEMENTWISE = [{"block": b, "warps": w} for b in (1024, 2048, 4096) for w in (4, 8)]
ROWS = [{"warps": w} for w in (4, 8, 2)]
MATMUL = [
    {"bm": m, "bn": n, "bk": k, "warps": w}
    for (m, n, k, w) in ((64, 64, 32, 4), (128, 64, 32, 4), (64, 128, 32, 4), (128, 128, 32, 8), (32, 64, 32, 4))
]

HELPERS = """
@triton.jit
def _tanh(x):
    return 2.0 * tl.sigmoid(2.0 * x) - 1.0


@triton.jit
def _gelu(x):
    return 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))


@triton.jit
def _gelu_tanh(x):
    return 0.5 * x * (1.0 + _tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


@triton.jit
def _softplus(x, beta, threshold):
    bx = x * beta
    soft = tl.log(1.0 + tl.exp(tl.minimum(bx, threshold))) / beta
    return tl.where(bx > threshold, x, soft)
"""


def space(kind: str, spec: dict) -> list[dict]:
    return {"elementwise": ELEMENTWISE, "rowreduce": ROWS, "matmul": MATMUL}[kind]


def _chain_lines(chain: Chain, leaf: dict[int, str], acc: str | None = None) -> list[str]:
    def name(o):
        if o is None:
            return None
        if o[0] == "L":
            return leaf[int(o[1:])]
        if o[0] == "C":
            return f"c{o[1:]}"
        if o[0] == "V":
            return f"v{o[1:]}"
        return acc

    lines = [f"v{i} = {triton_op(op, [name(o) for o in op['x']])}" for i, op in enumerate(chain.ops)]
    lines.append(f"y = {name(chain.out)}")
    return lines


def _leaf_loads(chain: Chain, offs: str, mask: str, row: str) -> tuple[list[str], list[str], dict[int, str]]:
    """(kernel parameters, load statements, leaf -> value) for each leaf's broadcast kind."""
    params, loads, expr = [], [], {}
    for j, leaf in enumerate(chain.leaves):
        k = leaf["kind"]
        params.append(f"l{j}")
        if k == "full":
            loads.append(f"x{j} = tl.load(l{j} + {offs}, mask={mask}, other=0.0)")
        elif k == "scalar":
            loads.append(f"x{j} = tl.load(l{j})")
        elif k == "tail":
            params.append(f"p{j}")
            loads.append(f"x{j} = tl.load(l{j} + ({offs}) % p{j}, mask={mask}, other=0.0)")
        else:
            params += [f"i{j}", f"p{j}"]
            loads.append(f"x{j} = tl.load(l{j} + (({row}) // i{j}) % p{j}, mask={mask}, other=0.0)")
        expr[j] = f"x{j}"
    return params, loads, expr


def source(kind: str, spec: dict, configs: list[dict]) -> str:
    ind = "\n    "
    if kind == "elementwise":
        chain = Chain.from_json(spec["chain"])
        params, loads, expr = _leaf_loads(chain, "offs", "mask", "offs // cols")
        consts = [f"c{i}" for i in range(len(chain.consts))]
        sig = ", ".join(["out", *params, *consts, "numel", "cols", "BLOCK: tl.constexpr"])
        body = ind.join(
            [
                "pid = tl.program_id(0)",
                "offs = pid * BLOCK + tl.arange(0, BLOCK)",
                "mask = offs < numel",
                *loads,
                *_chain_lines(chain, expr),
                "tl.store(out + offs, y, mask=mask)",
            ]
        )
        return f"@triton.jit\ndef assay_kernel({sig}):\n    {body}\n"
    if kind == "rowreduce":
        op = spec["op"]
        has_w, has_b = spec.get("weight") is not None, spec.get("bias") is not None
        sig = (
            ["out", "x"] + (["w"] if has_w else []) + (["b"] if has_b else []) + ["cols", "eps", "BLOCK: tl.constexpr"]
        )
        lines = [
            "row = tl.program_id(0)",
            "offs = tl.arange(0, BLOCK)",
            "mask = offs < cols",
            "base = row.to(tl.int64) * cols",
        ]
        if op in ("softmax", "log_softmax"):
            lines += [
                "v = tl.load(x + base + offs, mask=mask, other=-float('inf'))",
                "m = tl.max(v, axis=0)",
                "e = tl.exp(v - m)",
                "s = tl.sum(e, axis=0)",
                "y = e / s" if op == "softmax" else "y = v - m - tl.log(s)",
            ]
        elif op == "layer_norm":
            lines += [
                "v = tl.load(x + base + offs, mask=mask, other=0.0)",
                "mean = tl.sum(v, axis=0) / cols",
                "d = tl.where(mask, v - mean, 0.0)",
                "var = tl.sum(d * d, axis=0) / cols",
                "y = d * (1.0 / tl.sqrt(var + eps))",
            ]
        else:
            lines += [
                "v = tl.load(x + base + offs, mask=mask, other=0.0)",
                "ms = tl.sum(v * v, axis=0) / cols",
                "y = v * (1.0 / tl.sqrt(ms + eps))",
            ]
        if has_w:
            lines.append("y = y * tl.load(w + offs, mask=mask, other=0.0)")
        if has_b:
            lines.append("y = y + tl.load(b + offs, mask=mask, other=0.0)")
        lines.append("tl.store(out + base + offs, y, mask=mask)")
        return f"@triton.jit\ndef assay_kernel({', '.join(sig)}):\n    {ind.join(lines)}\n"
    chain = Chain.from_json(spec["chain"])
    params, loads, expr = _leaf_loads(chain, "idx", "cmask", "rm[:, None]")
    consts = [f"c{i}" for i in range(len(chain.consts))]
    sig = ", ".join(
        [
            "out",
            "a",
            "b",
            *params,
            *consts,
            "M",
            "N",
            "K",
            "sbk",
            "sbn",
            "BM: tl.constexpr",
            "BN: tl.constexpr",
            "BK: tl.constexpr",
        ]
    )
    lines = [
        "pm = tl.program_id(0)",
        "pn = tl.program_id(1)",
        "rm = pm * BM + tl.arange(0, BM)",
        "rn = pn * BN + tl.arange(0, BN)",
        "rk = tl.arange(0, BK)",
        "acc = tl.zeros((BM, BN), dtype=tl.float32)",
        "for k0 in range(0, K, BK):",
        "    ka = k0 + rk",
        "    av = tl.load(a + rm[:, None] * K + ka[None, :], mask=(rm[:, None] < M) & (ka[None, :] < K), other=0.0)",
        "    bv = tl.load(b + ka[:, None] * sbk + rn[None, :] * sbn, mask=(ka[:, None] < K) & (rn[None, :] < N), other=0.0)",
        "    acc += tl.dot(av, bv, input_precision='ieee')",
        "idx = rm[:, None] * N + rn[None, :]",
        "cmask = (rm[:, None] < M) & (rn[None, :] < N)",
        *loads,
        *_chain_lines(chain, expr, acc="acc"),
        "tl.store(out + idx, y, mask=cmask)",
    ]
    return f"@triton.jit\ndef assay_kernel({sig}):\n    {ind.join(lines)}\n"


def _ref(info, ref: str, names: list[str]) -> str:
    if ref.startswith("%in"):
        return names[int(ref[3:])]
    return "self." + info.params[int(ref[2:])]["name"]


def _leaf_args(chain: Chain, shape: str) -> list[str]:
    out = []
    for leaf in chain.leaves:
        if leaf["kind"] == "tail":
            out.append(f"_prod({shape}[{leaf['a']}:])")
        elif leaf["kind"] == "row":
            out += [f"_prod({shape}[{leaf['b']}:-1])", f"_prod({shape}[{leaf['a']}:{leaf['b']}])"]
    return out


def _interleave(chain: Chain, leaves: list[str], shape: str) -> list[str]:
    """Kernel arguments in parameter order: each leaf, then its broadcast sizes."""
    extra = iter(_leaf_args(chain, shape))
    out = []
    for j, leaf in enumerate(chain.leaves):
        out.append(leaves[j])
        if leaf["kind"] == "tail":
            out.append(next(extra))
        elif leaf["kind"] == "row":
            out += [next(extra), next(extra)]
    return out


def forward_lines(kind: str, spec: dict, info, names: list[str]) -> list[str]:
    if kind == "elementwise":
        chain = Chain.from_json(spec["chain"])
        leaves = [_ref(info, leaf["ref"], names) for leaf in chain.leaves]
        full = next(j for j, leaf in enumerate(chain.leaves) if leaf["kind"] == "full")
        args = _interleave(chain, [f"_ts[{j}]" for j in range(len(leaves))], "_shape")
        consts = [f"self._k[{i}]" for i in range(len(chain.consts))]
        return [
            f"_ts = ({', '.join(leaves)},)",
            "_check(_ts)",
            f"_shape = _ts[{full}].shape",
            f"_out = torch.empty(_shape, dtype=torch.float32, device=_ts[{full}].device)",
            "_numel = _out.numel()",
            "_cfg = ASSAY_VARIANTS[_variant]",
            "_grid = (triton.cdiv(_numel, _cfg['block']),)",
            f"assay_kernel[_grid](_out, {', '.join(args + consts)}{', ' if args or consts else ''}_numel, _shape[-1], "
            "BLOCK=_cfg['block'], num_warps=_cfg['warps'])",
            "return _out",
        ]
    if kind == "rowreduce":
        ts = [_ref(info, spec["x"], names)] + [_ref(info, spec[k], names) for k in ("weight", "bias") if spec.get(k)]
        return [
            f"_ts = ({', '.join(ts)},)",
            "_check(_ts)",
            "_x = _ts[0]",
            "_out = torch.empty(_x.shape, dtype=torch.float32, device=_x.device)",
            f"_cols = _prod(_x.shape[-{spec.get('row_dims', 1)}:])",
            "_rows = _x.numel() // max(_cols, 1)",
            "_cfg = ASSAY_VARIANTS[_variant]",
            "assay_kernel[(_rows,)](_out, *_ts, _cols, self._k[0], BLOCK=triton.next_power_of_2(_cols), "
            "num_warps=_cfg['warps'])",
            "return _out",
        ]
    chain = Chain.from_json(spec["chain"])
    a, b = _ref(info, spec["a"], names), _ref(info, spec["b"], names)
    leaves = [_ref(info, leaf["ref"], names) for leaf in chain.leaves]
    args = _interleave(chain, [f"_ts[{2 + j}]" for j in range(len(leaves))], "_shape")
    consts = [f"self._k[{i}]" for i in range(len(chain.consts))]
    nk = spec["layout"] == "nk"
    return [
        f"_a, _b = {a}, {b}",
        f"_ts = (_a, _b, {', '.join(leaves)})",
        "_check(_ts)",
        "_k = _a.shape[-1]",
        f"_n = _b.shape[{0 if nk else 1}]",
        "_m = _a.numel() // max(_k, 1)",
        "_shape = (*_a.shape[:-1], _n)",
        "_out = torch.empty(_shape, dtype=torch.float32, device=_a.device)",
        "_cfg = ASSAY_VARIANTS[_variant]",
        "_grid = (triton.cdiv(_m, _cfg['bm']), triton.cdiv(_n, _cfg['bn']))",
        # B is read as (K, N) through strides, so nn.Linear's (N, K) weight needs no transpose copy
        f"assay_kernel[_grid](_out, _a, _b, {', '.join(args + consts)}{', ' if args or consts else ''}_m, _n, _k, "
        f"{'1, _k' if nk else '_n, 1'}, BM=_cfg['bm'], BN=_cfg['bn'], BK=_cfg['bk'], num_warps=_cfg['warps'])",
        "return _out",
    ]


PRELUDE = """import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

ASSAY_BACKEND = "triton"
# The configurations this file can launch; assay_select picks one.
ASSAY_VARIANTS = {variants}
_variant = {selected}


def assay_select(index):
    global _variant
    if not 0 <= int(index) < len(ASSAY_VARIANTS):
        raise IndexError(index)
    _variant = int(index)


def _prod(dims):
    return math.prod(dims)


def _check(ts):
    for t in ts:
        if t.dtype != torch.float32 or not t.is_contiguous():
            raise ValueError("this kernel takes contiguous float32 tensors")

{helpers}
"""


def render_candidate(template, configs: list[dict], selected: int = 0) -> str:
    info, spec = template.info, template.spec
    from assay.kernels.candidate import _ident, ctor_signature, own_preamble

    used: set[str] = {"self", "_init"}
    sig, a_tuple = ctor_signature(info, used)
    names = [_ident(n, used) for n in (info.forward_signature or [f"x{i}" for i in range(len(info.inputs))])]
    consts = spec["chain"]["consts"] if "chain" in spec else spec.get("consts", [])
    init = init_lines(info, consts, as_list=True)
    head = (
        f'"""assay candidate: triton.{template.kind} template, configuration {json.dumps(configs[selected])}.\n\n'
        'Generated by the kernel playbook from the task graph; see assay.kernels."""\n\n'
    )
    body = PRELUDE.format(variants=json.dumps(configs), selected=selected, helpers=HELPERS)
    kern = source(template.kind, spec, configs)
    fwd = "\n        ".join(forward_lines(template.kind, spec, info, names))
    init_s = "\n        ".join(init)
    cls = f"""{own_preamble(template.info)}

class ModelNew(nn.Module):
    def __init__(self{", " if sig else ""}{sig}):
        super().__init__()
        _init = {a_tuple}
        {init_s}

    def forward(self, {", ".join(names)}):
        {fwd}
"""
    return head + body + "\n" + kern + cls
