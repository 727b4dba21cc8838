"""Render a KernelBench candidate file (ModelNew) around a compiled template.

The candidate is self-contained: it carries its C++ source, builds it through
torch.utils.cpp_extension.load (cached by source hash under ASSAY_KERNEL_BUILD_DIR, else
./.assay-build) as a Python module, and its forward is one call of that module: the C entry
(cpp_entry) checks the operands, allocates the output (torch.empty's own CPU allocation) and
runs the kernel. No torch compute op, no call of the reference; a conv candidate alone first
makes the reference's own convolution (the one contraction the verifier allows, on the
reference's sizes) and fuses everything after it.
ModelNew's constructor rebuilds the reference's parameters in the same order from the same RNG
stream (the recipe the harness proved by replay), so a verifier seeding both gets equal weights.
"""

from __future__ import annotations

import json

from assay.kernels import cpp_entry
from assay.kernels.pointwise import Chain

CFLAGS = ["-O3", "-march=native", "-fopenmp", "-ffp-contract=fast", "-fno-math-errno"]


def _ident(name: str, used: set[str]) -> str:
    base = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name) or "arg"
    if base[0].isdigit():
        base = "_" + base
    out, k = base, 1
    while out in used:
        out, k = f"{base}_{k}", k + 1
    used.add(out)
    return out


def _sym(symbols: dict, key: str, literal):
    i = symbols.get(key)
    return f"_init[{i}]" if i is not None else repr(literal)


def uses_own_init(info) -> bool:
    """Whether ModelNew repeats the task's own constructor: where the recipe replay failed."""
    return bool(info.params) and not info.init_recipe.get("replays") and "body" in info.own_init


def own_preamble(info) -> str:
    """Module-level lines the repeated constructor needs (the task's constants and imports)."""
    # Both preludes import these already.
    have = {"import math", "import torch", "import torch.nn as nn"}
    lines = [line for line in info.own_init.get("preamble", []) if line not in have] if uses_own_init(info) else []
    return "\n\n# What the task's constructor reads at module level.\n" + "\n".join(lines) + "\n" if lines else ""


def init_lines(info, consts: list[dict], as_list: bool = False) -> list[str]:
    """Statements of ModelNew.__init__ after super().__init__(). The kernel's runtime constants
    become self._k: a tuple of floats (cpp) or a list (triton, `as_list`)."""
    recipe = info.init_recipe
    symbols = recipe.get("symbols", {})
    cmap = recipe.get("constants", {})
    vals = [f"float(_init[{cmap[c['path']]}])" if c.get("path") in cmap else repr(float(c["value"])) for c in consts]
    k_line = f"self._k = [{', '.join(vals) or '0.0'}]" if as_list else f"self._k = ({''.join(v + ', ' for v in vals)})"
    if uses_own_init(info):
        # The task's own constructor, as KernelBench candidates keep it: same modules, same
        # order, so the verifier's seed gives both the same weights.
        body = [line for line in info.own_init["body"] if line.strip() != "super().__init__()"]
        return body + [k_line]
    lines = []
    made: set[str] = set()

    def container(path: str):
        parts = path.split(".")
        for k in range(1, len(parts)):
            sub = ".".join(parts[:k])
            if sub not in made:
                made.add(sub)
                lines.append(f"self.{sub} = nn.Module()")

    for s, step in enumerate(recipe.get("steps", [])):
        if "module" in step:
            container(step["path"])
            args = []
            for key, val in step["ctor"].items():
                sym = symbols.get(f"{s}.ctor.{key}")
                whole = symbols.get(f"{s}.ctor.{key}.all")
                if whole is not None:
                    args.append(f"{key}=tuple(_init[{whole}])")
                elif sym is not None:
                    args.append(f"{key}=(_init[{sym}],)" if isinstance(val, list) else f"{key}=_init[{sym}]")
                else:
                    args.append(f"{key}={val!r}")
            lines.append(f"self.{step['path']} = nn.{step['module']}({', '.join(args)})")
            made.add(step["path"])
        else:
            container(step["param"])
            if f"{s}.shape" in symbols:
                shape = f"*_init[{symbols[f'{s}.shape']}]"
            else:
                shape = ", ".join(_sym(symbols, f"{s}.shape.{d}", v) for d, v in enumerate(step["shape"]))
            expr = f"torch.{step['init']}({shape})"
            if step.get("scale") is not None:
                expr = f"{expr} * {step['scale']!r}"
            lines.append(f"self.{step['param']} = nn.Parameter({expr})")
    lines.append(k_line)
    return lines


def _ref_expr(info, ref: str, names: list[str]) -> str:
    if ref.startswith("%in"):
        return names[int(ref[3:])]
    return "self." + info.params[int(ref[2:])]["name"]


def entry_forward(kind: str, spec: dict, info, names: list[str]) -> list[str]:
    """Body of a cpp ModelNew.forward: the operands, in cpp_entry's order, to one C call."""
    if kind == "elementwise":
        refs = [leaf["ref"] for leaf in Chain.from_json(spec["chain"]).leaves]
    elif kind == "dimreduce":
        refs = [spec["x"]]
    elif kind == "rowreduce":
        refs = [spec["x"]] + [spec[k] for k in ("weight", "bias") if spec.get(k)]
    elif kind == "matmul":
        refs = [spec["a"], spec["b"]] + [leaf["ref"] for leaf in Chain.from_json(spec["chain"]).leaves]
    elif kind == "conv":
        refs = [leaf["ref"] for leaf in Chain.from_json(spec["chain"]).leaves]
        conv = f"y = {conv_call(spec['conv'], info, names)}"
        exprs = ["y" if r == "%conv" else _ref_expr(info, r, names) for r in refs]
        return [conv, f"return _KERNEL(_variant, self._k, {', '.join(exprs)})"]
    else:
        raise ValueError(kind)
    return [f"return _KERNEL(_variant, self._k, {', '.join(_ref_expr(info, r, names) for r in refs)})"]


def conv_call(conv: dict, info, names: list[str]) -> str:
    """The reference's own convolution, made the way the reference makes it: its module where
    the weights are a module's (self.conv(x): the same op on the same sizes, which is the one
    contraction the verifier lets a candidate call), else the functional op with its arguments."""
    x = _ref_expr(info, conv["input"], names)
    weight = info.params[int(conv["weight"][2:])]["name"] if conv["weight"].startswith("%p") else None
    bias = info.params[int(conv["bias"][2:])]["name"] if conv.get("bias") else None
    owner = weight.rpartition(".")[0] if weight and weight.endswith(".weight") else ""
    if owner and bias in (None, f"{owner}.bias") and uses_own_init(info):
        return f"self.{owner}({x})"
    w = _ref_expr(info, conv["weight"], names)
    b = _ref_expr(info, conv["bias"], names) if conv.get("bias") else "None"
    keys = ", ".join(f"{k}={v!r}" for k, v in conv["options"].items())
    return f"torch.nn.functional.{conv['op']}({x}, {w}, {b}{', ' if keys else ''}{keys})"


PRELUDE = '''import hashlib
import math
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

_SOURCE = r"""{source}"""
_CFLAGS = {cflags}
# The configurations compiled into _SOURCE, in dispatch order; assay_select picks one.
ASSAY_VARIANTS = {variants}
_variant = {selected}


def assay_select(index):
    global _variant
    if not 0 <= int(index) < len(ASSAY_VARIANTS):
        raise IndexError(index)
    _variant = int(index)


def _load():
    tag = hashlib.sha256((_SOURCE + "\\0".join(_CFLAGS)).encode()).hexdigest()[:16]
    root = os.environ.get("ASSAY_KERNEL_BUILD_DIR") or os.path.join(os.getcwd(), ".assay-build")
    build = os.path.join(root, "k" + tag)
    os.makedirs(build, exist_ok=True)
    src = os.path.join(build, "kernel.cpp")
    if not os.path.exists(src):
        tmp = f"{{src}}.{{os.getpid()}}"
        with open(tmp, "w") as f:
            # The module's init function is named for the hash, so it cannot be in _SOURCE.
            f.write(_SOURCE + f"\\nPyMODINIT_FUNC PyInit_assay_k{{tag}}(void) {{{{ return assay_init(\\"assay_k{{tag}}\\"); }}}}\\n")
        os.replace(tmp, src)
    module = load(name="assay_k" + tag, sources=[src], extra_cflags=_CFLAGS, extra_ldflags=["-fopenmp"],
                  build_directory=build, is_python_module=True, verbose=False)
    return module.call


_KERNEL = _load()
'''


def ctor_signature(info, used: set[str]) -> tuple[str, str]:
    """ModelNew.__init__'s parameters as the reference wrote them (names, literal defaults,
    builtin annotations, keyword-only ones after a *), and the tuple expression `_init` binds
    them to in that order; `*args` where the reference's constructor is variadic."""
    if info.init_signature is None:
        return "*args", "args"
    params = info.init_params if info.init_params and len(info.init_params) == len(info.init_signature) else None
    names = [_ident(n, used) for n in info.init_signature]
    if params is None:
        parts = list(names)
    else:
        parts, starred = [], False
        # A default with none after it: Python refuses a required parameter after a defaulted one.
        last_required = max(
            (i for i, p in enumerate(params) if p.get("default") is None and not p.get("keyword_only")), default=-1
        )
        for i, (name, p) in enumerate(zip(names, params, strict=True)):
            if p.get("keyword_only") and not starred:
                parts.append("*")
                starred = True
            text = name + (f": {p['annotation']}" if p.get("annotation") else "")
            default = p.get("default")
            if default is not None and (p.get("keyword_only") or i > last_required):
                text += f" = {default}" if p.get("annotation") else f"={default}"
            parts.append(text)
    a_tuple = f"({', '.join(names)}{',' if len(names) == 1 else ''})"
    return ", ".join(parts), a_tuple


def render_candidate(
    kind: str, template: str, spec: dict, info, source: str, configs: list[dict], selected: int = 0
) -> str:
    used: set[str] = {"self", "_init"}
    sig, a_tuple = ctor_signature(info, used)
    fwd = info.forward_signature or [f"x{i}" for i in range(len(info.inputs))]
    names = [_ident(n, used) for n in fwd]
    consts = spec["chain"]["consts"] if "chain" in spec else spec.get("consts", [])
    head = (
        f'"""assay candidate: {template} template, configuration {json.dumps(configs[selected])}.\n\n'
        'Generated by the kernel playbook from the task graph; see assay.kernels."""\n\n'
    )
    source = cpp_entry.HEAD + source + cpp_entry.entry_source(kind, spec)
    body = PRELUDE.format(source=source, cflags=repr(CFLAGS), variants=json.dumps(configs), selected=selected)
    init = "\n        ".join(init_lines(info, consts))
    fwd_body = "\n        ".join(entry_forward(kind, spec, info, names))
    cls = f"""{own_preamble(info)}

class ModelNew(nn.Module):
    def __init__(self{", " if sig else ""}{sig}):
        super().__init__()
        _init = {a_tuple}
        {init}

    def forward(self, {", ".join(names)}):
        {fwd_body}
"""
    return head + body + cls
