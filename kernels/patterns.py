"""Recognise what a task computes from its traced graph: elementwise chain, row reduction,
matmul or convolution with an epilogue. Recognition reads only the normalised graph, never source text."""

from __future__ import annotations

import math
from dataclasses import dataclass

from assay.kernels import dimnorm, dimreduce
from assay.kernels.pointwise import Chain, Unsupported, add_node, const, is_pointwise
from assay.kernels.task import TaskInfo


@dataclass
class Pattern:
    kind: str  # "elementwise" | "rowreduce" | "matmul" | "dimreduce" | "conv"
    spec: dict  # JSON-able; what a template needs to render this instance


@dataclass
class NoMatch:
    reason: str


def recognise(info: TaskInfo) -> Pattern | NoMatch:
    nodes, outs = info.nodes, info.graph.get("output") or []
    if not nodes:
        return NoMatch("the graph has no operations")
    if len(outs) != 1 or not str(outs[0]).startswith("%n"):
        return NoMatch(f"expected one computed tensor output, got {outs!r}")
    try:  # before the dtype check: an arg-reduction's output is int64
        reduce = dimreduce.recognise(info)
    except dimreduce.NotADimReduce as exc:
        return NoMatch(str(exc))
    if reduce is not None:
        return Pattern("dimreduce", reduce)
    for meta in info.inputs + info.params + nodes:
        if "shape" in meta and meta.get("dtype") not in ("float32", None):
            return NoMatch(f"dtype {meta.get('dtype')} (the templates are fp32 only)")
    for meta in info.inputs:
        if "shape" not in meta:
            return NoMatch("a non-tensor forward input")
    try:
        if all(is_pointwise(n) for n in nodes):
            return Pattern("elementwise", _elementwise(info))
        if nodes[0]["op"] in ("linear", "mm", "matmul") and all(is_pointwise(n) for n in nodes[1:]):
            return Pattern("matmul", _matmul(info))
        if nodes[0]["op"] in CONVS and all(is_pointwise(n) for n in nodes[1:]):
            return Pattern("conv", _conv(info))
        row = _rowreduce(info)
        if row is not None:
            return Pattern("rowreduce", row)
        norm = dimnorm.recognise(info)
        if norm is not None:
            return Pattern("dimreduce", norm)
    except Unsupported as exc:
        return NoMatch(str(exc))
    ops = sorted({n["op"] for n in nodes if not is_pointwise(n)})
    return NoMatch(f"no template for {', '.join(ops)}")


def _lower(info: TaskInfo, chain: Chain, nodes: list[tuple[str, int, dict]], values: dict | None = None) -> None:
    """Pointwise nodes -> chain ops; graph inputs become leaves, numbers become constants.

    nodes: (value name, graph index, node); values: graph names already bound to operands."""
    leaf_index: dict[str, int] = {}
    values = dict(values or {})

    def operand(arg, path):
        if isinstance(arg, str) and arg.startswith("%"):
            if arg in values:
                return values[arg]
            if arg.startswith("%n"):
                raise Unsupported(f"{arg} is computed by an op outside the fused chain")
            if arg not in leaf_index:
                leaf_index[arg] = len(chain.leaves)
                chain.leaves.append({"ref": arg, "shape": list(info.ref_meta(arg)["shape"])})
            return f"L{leaf_index[arg]}"
        if isinstance(arg, bool) or not isinstance(arg, (int, float)):
            raise Unsupported(f"argument {arg!r}")
        return const(chain, arg, path)

    for name, k, node in nodes:
        values[name] = add_node(chain, k, node, operand)
    chain.out = values[info.graph["output"][0]]


def place_leaves(chain: Chain, out_shape: list[int]) -> None:
    """Say how each leaf broadcasts against the output: the forward computes the strides."""
    n = len(out_shape)
    for leaf in chain.leaves:
        shape = leaf["shape"]
        if len(shape) > n:
            raise Unsupported(f"operand of shape {shape} is larger than the output {out_shape}")
        padded = [1] * (n - len(shape)) + list(shape)
        if padded == list(out_shape):
            leaf.update(kind="full")
            continue
        if math.prod(shape) == 1:
            leaf.update(kind="scalar")
            continue
        real = [d for d in range(n) if padded[d] != 1]
        if any(padded[d] != out_shape[d] for d in real):
            raise Unsupported(f"operand of shape {shape} does not broadcast to {out_shape}")
        a, b = real[0], real[-1] + 1
        if any(padded[d] == 1 and out_shape[d] != 1 for d in range(a, b)):
            raise Unsupported(f"operand of shape {shape} broadcasts over a middle dimension")
        # dims as negative offsets from the end, so they stay right when a verifier resizes
        leaf.update(kind="tail" if b == n else "row", a=a - n, b=b - n, rank=len(shape))
    if not any(leaf["kind"] == "full" for leaf in chain.leaves):
        raise Unsupported("no operand has the output's full shape")


def _elementwise(info: TaskInfo) -> dict:
    chain = Chain()
    _lower(info, chain, [(f"%n{k}", k, n) for k, n in enumerate(info.nodes)])
    out_shape = info.nodes[-1]["shape"]
    place_leaves(chain, out_shape)
    return {"chain": chain.to_json(), "out_shape": out_shape}


def _matmul(info: TaskInfo) -> dict:
    mm = info.nodes[0]
    args = mm["args"]
    a, b = args.get("input"), args.get("weight") if mm["op"] == "linear" else args.get("other")
    layout = "nk" if mm["op"] == "linear" else "kn"
    if not (isinstance(a, str) and isinstance(b, str)) or a.startswith("%n") or b.startswith("%n"):
        raise Unsupported("matmul operands must be graph inputs or parameters")
    a_shape, b_shape = info.ref_meta(a)["shape"], info.ref_meta(b)["shape"]
    if len(b_shape) != 2 or len(a_shape) < 2:
        raise Unsupported(f"matmul of shapes {a_shape} x {b_shape}")
    chain = Chain()
    bias = args.get("bias") if mm["op"] == "linear" else None
    # The accumulator tile is operand "A"; linear's bias is the epilogue's first op.
    steps = [(f"%n{k}", k, n) for k, n in list(enumerate(info.nodes))[1:]]
    if bias is not None:
        steps.insert(0, ("%n0", 0, {"op": "add", "args": {"input": "%acc", "other": bias, "alpha": 1}}))
        _lower(info, chain, steps, values={"%acc": "A"})
    else:
        _lower(info, chain, steps, values={"%n0": "A"})
    out_shape = info.nodes[-1]["shape"]
    if chain.leaves:
        try:
            place_leaves(chain, out_shape)
        except Unsupported as exc:
            if "full shape" not in str(exc):
                raise
    return {"chain": chain.to_json(), "a": a, "b": b, "layout": layout, "out_shape": out_shape, "a_rank": len(a_shape)}


CONVS = ("conv1d", "conv2d", "conv3d")


def _conv(info: TaskInfo) -> dict:
    """A convolution, then an elementwise chain over its output (KernelBench level 2's
    commonest form). The convolution stays ATen's (oneDNN here): the verifier lets a candidate
    make the reference's own contractions and no others. The chain runs as one elementwise
    kernel whose first operand is the convolution's output: one pass over it where eager makes
    one per op."""
    conv = info.nodes[0]
    args = conv["args"]
    x, weight, bias = args.get("input"), args.get("weight"), args.get("bias")
    if not isinstance(x, str) or x.startswith("%n") or not isinstance(weight, str) or weight.startswith("%n"):
        raise Unsupported("convolution operands must be graph inputs or parameters")
    if bias is not None and (not isinstance(bias, str) or bias.startswith("%n")):
        raise Unsupported("a convolution bias must be a parameter")
    if len(info.nodes) == 1:
        raise Unsupported(f"a {conv['op']} alone: nothing to fuse after it (the convolution stays ATen's)")
    out_shape = conv["shape"]
    chain = Chain()
    chain.leaves.append({"ref": "%conv", "shape": list(out_shape)})
    _lower(info, chain, [(f"%n{k}", k, n) for k, n in list(enumerate(info.nodes))[1:]], values={"%n0": "L0"})
    if info.nodes[-1]["shape"] != out_shape:
        raise Unsupported(f"the chain after {conv['op']} changes the shape {out_shape} to {info.nodes[-1]['shape']}")
    place_leaves(chain, out_shape)
    options = {k: args[k] for k in ("stride", "padding", "dilation", "groups") if args.get(k) is not None}
    return {
        "chain": chain.to_json(),
        "out_shape": out_shape,
        "conv": {"op": conv["op"], "input": x, "weight": weight, "bias": bias, "options": options},
    }


def _rowreduce(info: TaskInfo) -> dict | None:
    nodes = info.nodes
    first = nodes[0]
    x = first["args"].get("input")
    if not isinstance(x, str) or x.startswith("%n"):
        return None
    shape = info.ref_meta(x)["shape"]
    last = len(shape) - 1
    if len(nodes) == 1 and first["op"] in ("softmax", "_softmax", "log_softmax", "_log_softmax"):
        dim = first["args"].get("dim")
        if dim not in (-1, last):
            return None  # over another dim: kernels/dimnorm.py
        if first["args"].get("half_to_float") or first["args"].get("dtype") not in (None, "float32"):
            raise Unsupported(f"{first['op']} with a dtype change")
        return {"op": first["op"].lstrip("_"), "x": x, "weight": None, "bias": None, "consts": []}
    if len(nodes) == 1 and first["op"] in ("layer_norm", "rms_norm"):
        a = first["args"]
        ns = list(a.get("normalized_shape") or [])
        # Over the trailing dims: each row is their product, contiguous, and a weight of shape
        # normalized_shape lies along it in the same order.
        if not ns or ns != shape[len(shape) - len(ns) :]:
            raise Unsupported(f"{first['op']} over {a.get('normalized_shape')}, not trailing dims of {shape}")
        eps = a.get("eps")
        consts = [{"value": float(eps) if eps is not None else 1.1920928955078125e-07, "path": "0.eps"}]
        return {
            "op": first["op"],
            "x": x,
            "weight": a.get("weight"),
            "bias": a.get("bias"),
            "consts": consts,
            "row_dims": len(ns),
        }
    return _rmsnorm_by_hand(info, x, shape)


def _rmsnorm_by_hand(info: TaskInfo, x: str, shape: list[int]) -> dict | None:
    """x * rsqrt(mean(x^2, -1, keepdim) + eps) [* w], or x / sqrt(...), spelled out in ops."""
    nodes = info.nodes
    ref = {f"%n{i}": n for i, n in enumerate(nodes)}

    def op_of(r, *names):
        n = ref.get(r) if isinstance(r, str) else None
        return n if n is not None and n["op"] in names else None

    last = len(shape) - 1
    i = 0
    sq = nodes[0]
    if not (
        (sq["op"] == "pow" and sq["args"].get("exponent") == 2 and sq["args"]["input"] == x)
        or (sq["op"] == "mul" and sq["args"]["input"] == x and sq["args"]["other"] == x)
    ):
        return None
    mean = nodes[1] if len(nodes) > 1 else None
    if not (
        mean
        and mean["op"] == "mean"
        and mean["args"]["input"] == "%n0"
        and list(mean["args"].get("dim") or []) in ([-1], [last])
        and mean["args"].get("keepdim")
    ):
        return None
    add = nodes[2] if len(nodes) > 2 else None
    if not (
        add
        and add["op"] == "add"
        and add["args"]["input"] == "%n1"
        and isinstance(add["args"]["other"], (int, float))
        and add["args"].get("alpha", 1) == 1
    ):
        return None
    eps = {"value": float(add["args"]["other"]), "path": "2.other"}
    root = nodes[3] if len(nodes) > 3 else None
    if root is None or root["op"] not in ("rsqrt", "sqrt") or root["args"]["input"] != "%n2":
        return None
    scale = nodes[4] if len(nodes) > 4 else None
    want = "mul" if root["op"] == "rsqrt" else "div"
    if not scale or scale["op"] != want:
        return None
    pair = [scale["args"]["input"], scale["args"]["other"]]
    if want == "mul":
        pair = sorted(pair)
    if pair != sorted([x, "%n3"]) if want == "mul" else pair != [x, "%n3"]:
        return None
    i = 5
    weight = None
    if len(nodes) == 6 and nodes[5]["op"] == "mul":
        others = {nodes[5]["args"]["input"], nodes[5]["args"]["other"]} - {"%n4"}
        if len(others) != 1:
            return None
        w = others.pop()
        if not isinstance(w, str) or w.startswith("%n") or info.ref_meta(w)["shape"] != [shape[-1]]:
            return None
        weight, i = w, 6
    if i != len(nodes):
        return None
    return {"op": "rms_norm", "x": x, "weight": weight, "bias": None, "consts": [eps]}
