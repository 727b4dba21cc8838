"""Pointwise ops the templates can fuse: graph node -> one line of vector C++ (or Triton).

A chain is SSA: every value is a leaf tensor ("L<i>"), a runtime scalar ("C<i>", read from
the kernel's constant array so a constructor argument can change it without a rebuild), or an
earlier op ("V<i>"). Ops not listed here are not fusable, and a task that needs one gets no
template rather than a guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class Unsupported(Exception):
    """The graph holds something no template covers; the message says what."""


@dataclass
class Chain:
    leaves: list[dict] = field(default_factory=list)  # {"ref", "shape"} (+ "kind", "a", "b" once placed)
    consts: list[dict] = field(default_factory=list)  # {"value", "path"}: path = where in the graph it came from
    ops: list[dict] = field(default_factory=list)  # {"fn", "x": [operands], "attr": {...}}
    out: str = ""

    def to_json(self) -> dict:
        return {"leaves": self.leaves, "consts": self.consts, "ops": self.ops, "out": self.out}

    @classmethod
    def from_json(cls, d: dict) -> Chain:
        return cls(list(d["leaves"]), list(d["consts"]), list(d["ops"]), d["out"])


# op name -> (tensor/scalar argument names, numeric attributes passed as runtime constants,
#             other attributes fixed at build time)
UNARY = {
    "neg": ((), ()),
    "abs": ((), ()),
    "exp": ((), ()),
    "log": ((), ()),
    "sqrt": ((), ()),
    "rsqrt": ((), ()),
    "reciprocal": ((), ()),
    "sigmoid": ((), ()),
    "tanh": ((), ()),
    "relu": ((), ()),
    "silu": ((), ()),
    "mish": ((), ()),
    "gelu": ((), ("approximate",)),
    "softplus": (("beta", "threshold"), ()),
    "leaky_relu": (("negative_slope",), ()),
    "elu": (("alpha", "scale", "input_scale"), ()),
    "hardswish": ((), ()),
    "hardsigmoid": ((), ()),
    "hardtanh": (("min_val", "max_val"), ()),
    "clamp": (("min", "max"), ()),
    "clamp_min": (("min",), ()),
    "clamp_max": (("max",), ()),
    "pow": (("exponent",), ()),
    "square": ((), ()),
}
BINARY = {"add", "sub", "rsub", "mul", "div", "maximum", "minimum"}
# Ops lowered to another with fixed arguments: SELU is ELU with ATen's two constants.
SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
ALIASES = {"selu": ("elu", {"alpha": SELU_ALPHA, "scale": SELU_SCALE, "input_scale": 1.0})}
POW_EXPONENTS = {2, 3, 0.5, -0.5, -1, 1, -2}


def is_pointwise(node: dict) -> bool:
    return node["op"] in UNARY or node["op"] in BINARY or node["op"] in ALIASES


def add_node(chain: Chain, k, node: dict, operand) -> str:
    """Lower graph node k into the chain; `operand(arg, path)` maps a graph argument to an operand
    (path, "<node>.<arg name>", is where a constant came from, so it can be traced to __init__)."""
    op, args = node["op"], node["args"]
    if op in ALIASES:
        op, fixed_args = ALIASES[op]
        args = {"input": args["input"], **fixed_args}
    if op in BINARY:
        if op == "div" and args.get("rounding_mode") is not None:
            raise Unsupported(f"div with rounding_mode={args['rounding_mode']}")
        x = [operand(args["input"], f"{k}.input"), operand(args["other"], f"{k}.other")]
        alpha = args.get("alpha", 1)
        if op in ("add", "sub", "rsub") and alpha != 1:
            x.append(const(chain, alpha, f"{k}.alpha"))
        chain.ops.append({"fn": op, "x": x, "attr": {}})
    elif op in UNARY:
        numeric, fixed = UNARY[op]
        x = [operand(args["input"], f"{k}.input")]
        attr = {name: args.get(name) for name in fixed}
        if op == "pow":
            e = args.get("exponent")
            if not isinstance(e, (int, float)) or e not in POW_EXPONENTS:
                raise Unsupported(f"pow with exponent {e!r}")
            attr["exponent"] = e
            numeric = ()
        if op == "gelu" and attr["approximate"] not in ("none", "tanh"):
            raise Unsupported(f"gelu approximate={attr['approximate']!r}")
        for name in numeric:
            v = args.get(name)
            if v is None:
                attr[f"no_{name}"] = True
                x.append(None)
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                x.append(const(chain, v, f"{k}.{name}"))
            else:
                raise Unsupported(f"{op} with a tensor {name}")
        chain.ops.append({"fn": op, "x": x, "attr": attr})
    else:
        raise Unsupported(f"op {op!r} is not pointwise")
    return f"V{len(chain.ops) - 1}"


def const(chain: Chain, value, path: str) -> str:
    chain.consts.append({"value": float(value), "path": path})
    return f"C{len(chain.consts) - 1}"


# --- C++ ---------------------------------------------------------------------------------


def cpp_op(op: dict, x: list[str | None], scalars: list[str] | None = None) -> str:
    """The vector expression of one op on operands `x`; `scalars`: each operand as one float, for
    the ops that take one (softplus' beta and threshold), where it differs from lane 0 of x."""
    fn, a = op["fn"], op["attr"]
    v = x[0]
    assert v is not None  # every op's first operand is a value; only later ones may be absent
    sc = scalars or [f"{n}[0]" for n in x]
    simple = {
        "neg": f"-{v}",
        "abs": f"vabs({v})",
        "exp": f"vexp({v})",
        "log": f"vlog({v})",
        "sqrt": f"vsqrt({v})",
        "rsqrt": f"vrsqrt({v})",
        "reciprocal": f"(1.0f / {v})",
        "sigmoid": f"vsigmoid({v})",
        "tanh": f"vtanh({v})",
        "relu": f"vrelu({v})",
        "silu": f"vsilu({v})",
        "mish": f"vmish({v})",
        "square": f"({v} * {v})",
        "hardswish": f"({v} * vclamp({v} + 3.0f, 0.0f, 6.0f) * (1.0f / 6.0f))",
        "hardsigmoid": f"(vclamp({v} + 3.0f, 0.0f, 6.0f) * (1.0f / 6.0f))",
    }
    if fn in simple:
        return simple[fn]
    if fn in ("add", "sub", "rsub"):
        y = x[1] if len(x) == 2 else f"({x[1]} * {x[2]})"
        if fn == "rsub":
            y = x[0] if len(x) == 2 else f"({x[0]} * {x[2]})"
            return f"({x[1]} - {y})"
        return f"({v} {'+' if fn == 'add' else '-'} {y})"
    if fn == "mul":
        return f"({v} * {x[1]})"
    if fn == "div":
        return f"({v} / {x[1]})"
    if fn == "maximum":
        return f"vmax({v}, {x[1]})"
    if fn == "minimum":
        return f"vmin({v}, {x[1]})"
    if fn == "gelu":
        return f"vgelu({v})" if a["approximate"] == "none" else f"vgelu_tanh({v})"
    if fn == "softplus":
        return f"vsoftplus({v}, {sc[1]}, {sc[2]})"
    if fn == "leaky_relu":
        return f"vsel({v} > 0.f, {v}, {v} * {x[1]})"
    if fn == "elu":
        return f"vsel({v} > 0.f, {v} * {x[2]}, {x[2]} * {x[1]} * (vexp({v} * {x[3]}) - 1.0f))"
    if fn in ("clamp", "hardtanh", "clamp_min", "clamp_max"):
        lo = x[1] if fn in ("clamp", "hardtanh", "clamp_min") else None
        hi = x[2] if fn in ("clamp", "hardtanh") else (x[1] if fn == "clamp_max" else None)
        out = v
        if lo is not None:
            out = f"vmax({out}, {lo})"
        if hi is not None:
            out = f"vmin({out}, {hi})"
        return out
    if fn == "pow":
        e = a["exponent"]
        return {
            2: f"({v} * {v})",
            3: f"({v} * {v} * {v})",
            0.5: f"vsqrt({v})",
            -0.5: f"vrsqrt({v})",
            -1: f"(1.0f / {v})",
            1: v,
            -2: f"(1.0f / ({v} * {v}))",
        }[e]
    raise Unsupported(fn)


def cpp_chain_body(
    chain: Chain, leaf_expr: dict[int, str], acc: str | None = None, consts: list[tuple[str, str]] | None = None
) -> list[str]:
    """Statements computing the chain; leaf i is read from leaf_expr[i]; "A" operands are `acc`.
    consts[i]: constant i as a vector and as a float expression (default: the template's c{i}
    and k{i}); literals there let the compiler fold what depends on them."""
    lines = []
    consts = consts if consts is not None else [(f"c{i}", f"k{i}") for i in range(len(chain.consts))]

    def scalar(o):
        return consts[int(o[1:])][1] if o[0] == "C" else f"{name(o)}[0]"

    def name(o):
        if o is None:
            return None
        if o[0] == "L":
            return leaf_expr[int(o[1:])]
        if o[0] == "C":
            return consts[int(o[1:])][0]
        if o[0] == "V":
            return f"v{o[1:]}"
        if o == "A":
            return acc
        raise ValueError(o)

    for i, op in enumerate(chain.ops):
        x = op["x"]
        inner = chain.ops[int(x[0][1:])] if op["fn"] == "tanh" and x[0][0] == "V" else None
        if inner is not None and inner["fn"] == "softplus":
            # mish's core: one exp instead of softplus' exp and log and tanh's exp (vecmath.h).
            # The softplus value, when nothing else reads it, is dead code the compiler drops.
            v, beta, threshold = name(inner["x"][0]), scalar(inner["x"][1]), scalar(inner["x"][2])
            lines.append(f"const vf v{i} = vtanh_softplus({v}, {beta}, {threshold});")
            continue
        lines.append(f"const vf v{i} = {cpp_op(op, [name(o) for o in x], [scalar(o) for o in x])};")
    lines.append(f"return {name(chain.out)};")
    return lines


# --- Triton --------------------------------------------------------------------------------


def triton_op(op: dict, x: list[str | None]) -> str:
    fn, a = op["fn"], op["attr"]
    v = x[0]
    assert v is not None  # every op's first operand is a value; only later ones may be absent
    simple = {
        "neg": f"-{v}",
        "abs": f"tl.abs({v})",
        "exp": f"tl.exp({v})",
        "log": f"tl.log({v})",
        "sqrt": f"tl.sqrt({v})",
        "rsqrt": f"tl.rsqrt({v})",
        "reciprocal": f"(1.0 / {v})",
        "sigmoid": f"tl.sigmoid({v})",
        "tanh": f"_tanh({v})",
        "relu": f"tl.maximum({v}, 0.0)",
        "silu": f"({v} * tl.sigmoid({v}))",
        "mish": f"({v} * _tanh(_softplus({v}, 1.0, 20.0)))",
        "square": f"({v} * {v})",
        "hardswish": f"({v} * tl.minimum(tl.maximum({v} + 3.0, 0.0), 6.0) / 6.0)",
        "hardsigmoid": f"(tl.minimum(tl.maximum({v} + 3.0, 0.0), 6.0) / 6.0)",
    }
    if fn in simple:
        return simple[fn]
    if fn in ("add", "sub", "rsub"):
        y = x[1] if len(x) == 2 else f"({x[1]} * {x[2]})"
        if fn == "rsub":
            y = x[0] if len(x) == 2 else f"({x[0]} * {x[2]})"
            return f"({x[1]} - {y})"
        return f"({v} {'+' if fn == 'add' else '-'} {y})"
    binary = {
        "mul": "({0} * {1})",
        "div": "({0} / {1})",
        "maximum": "tl.maximum({0}, {1})",
        "minimum": "tl.minimum({0}, {1})",
    }
    if fn in binary:
        return binary[fn].format(v, x[1])
    if fn == "gelu":
        return f"_gelu({v})" if a["approximate"] == "none" else f"_gelu_tanh({v})"
    if fn == "softplus":
        return f"_softplus({v}, {x[1]}, {x[2]})"
    if fn == "leaky_relu":
        return f"tl.where({v} > 0.0, {v}, {v} * {x[1]})"
    if fn == "elu":
        return f"tl.where({v} > 0.0, {v} * {x[2]}, {x[2]} * {x[1]} * (tl.exp({v} * {x[3]}) - 1.0))"
    if fn in ("clamp", "hardtanh", "clamp_min", "clamp_max"):
        lo = x[1] if fn in ("clamp", "hardtanh", "clamp_min") else None
        hi = x[2] if fn in ("clamp", "hardtanh") else (x[1] if fn == "clamp_max" else None)
        out = v
        if lo is not None:
            out = f"tl.maximum({out}, {lo})"
        if hi is not None:
            out = f"tl.minimum({out}, {hi})"
        return out
    if fn == "pow":
        e = a["exponent"]
        return {
            2: f"({v} * {v})",
            3: f"({v} * {v} * {v})",
            0.5: f"tl.sqrt({v})",
            -0.5: f"tl.rsqrt({v})",
            -1: f"(1.0 / {v})",
            1: v,
            -2: f"(1.0 / ({v} * {v}))",
        }[e]
    raise Unsupported(fn)
