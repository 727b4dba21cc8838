"""Inspect a KernelBench task inside the sandbox: trace Model, print its graph as JSON.

usage: python inspect_task.py TASK.py [TASK2.py ...]   (one JSON line per task, in order)

The playbook recognises patterns from this graph (normalised ATen op names and their
arguments), never from the task's source text. Tensor references in the graph are
positional ("%in0" user input, "%p0" parameter, "%n3" node), so renaming a variable in the
task changes nothing here.
"""

from __future__ import annotations

import ast
import inspect
import math
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402
from own_init import own_init  # noqa: E402

KNOWN_MODULES = {
    "Linear": ("in_features", "out_features", "bias"),
    "LayerNorm": ("normalized_shape", "eps", "elementwise_affine", "bias"),
    "RMSNorm": ("normalized_shape", "eps", "elementwise_affine"),
}


def dtype_name(dt) -> str:
    return str(dt).replace("torch.", "")


def describe_value(v):
    import torch

    if isinstance(v, torch.Tensor):
        return {"shape": list(v.shape), "dtype": dtype_name(v.dtype)}
    if isinstance(v, (int, float, bool, str)) or v is None:
        return {"value": v}
    if isinstance(v, (list, tuple)) and all(isinstance(e, (int, float, bool)) for e in v):
        return {"value": list(v)}
    return {"value": repr(v)}


def normalise_graph(ep):
    """ATen graph -> list of nodes with positional refs and schema-normalised kwargs."""
    import torch
    from torch.fx.operator_schemas import normalize_function

    sig = ep.graph_signature
    refs: dict[str, str] = {}
    user_i = 0
    param_names = []
    for spec in sig.input_specs:
        name = spec.arg.name
        if spec.kind.name == "USER_INPUT":
            refs[name] = f"%in{user_i}"
            user_i += 1
        elif spec.kind.name in ("PARAMETER", "BUFFER", "CONSTANT_TENSOR"):
            refs[name] = f"%p{len(param_names)}"
            param_names.append(spec.target)
    nodes, output = [], None

    def conv(a):
        if isinstance(a, torch.fx.Node):
            if a.name not in refs:
                raise ValueError(f"unsupported graph input {a.name}")
            return refs[a.name]
        if isinstance(a, (list, tuple)):
            return [conv(e) for e in a]
        if isinstance(a, torch.dtype):
            return dtype_name(a)
        if isinstance(a, (torch.device, torch.layout, torch.memory_format)):
            return str(a)
        if isinstance(a, float) and not math.isfinite(a):
            return str(a)
        return a

    for node in ep.graph.nodes:
        if node.op == "call_function":
            target = node.target
            schema = getattr(target, "_schema", None)
            name = schema.name.split("::")[-1] if schema is not None else getattr(target, "__name__", str(target))
            norm = None
            if schema is not None:
                try:
                    norm = normalize_function(
                        target, tuple(node.args), dict(node.kwargs), normalize_to_only_use_kwargs=True
                    )
                except Exception:
                    norm = None
            if norm is not None:
                kwargs = {k: conv(v) for k, v in norm.kwargs.items()}
            else:
                kwargs = {f"arg{i}": conv(a) for i, a in enumerate(node.args)}
                kwargs.update({k: conv(v) for k, v in node.kwargs.items()})
            val = node.meta.get("val")
            ref = f"%n{len(nodes)}"
            refs[node.name] = ref
            entry = {"op": name, "args": kwargs}
            if hasattr(val, "shape"):
                entry.update(shape=list(val.shape), dtype=dtype_name(val.dtype))
            nodes.append(entry)
        elif node.op == "output":
            outs = node.args[0]
            output = [conv(o) for o in (outs if isinstance(outs, (list, tuple)) else [outs])]
    return nodes, output, param_names


def export(model, inputs):
    import torch

    ep = torch.export.export(model, tuple(inputs), strict=False)
    return normalise_graph(ep)


def owner(model, pname: str):
    path, _, leaf = pname.rpartition(".")
    mod = model.get_submodule(path) if path else model
    return path, leaf, mod


def module_ctor(mod) -> dict | None:
    kind = type(mod).__name__
    if kind not in KNOWN_MODULES or type(mod).__module__.split(".")[0] != "torch":
        return None
    out = {}
    for attr in KNOWN_MODULES[kind]:
        v = getattr(mod, attr, None)
        if attr == "bias" and kind in ("Linear", "LayerNorm"):
            v = v is not None
        if isinstance(v, tuple):
            v = list(v)
        out[attr] = v
    return out


def replay_step(step, torch):
    """Recreate what one init step creates, consuming the RNG exactly as the reference did."""
    if "module" in step:
        cls = getattr(torch.nn, step["module"])
        mod = cls(**step["ctor"])
        return [t.detach() for t in mod.parameters()]
    shape = step["shape"]
    kind, scale = step["init"], step.get("scale")
    t = {"zeros": torch.zeros, "ones": torch.ones, "randn": torch.randn, "rand": torch.rand}[kind](*shape)
    if scale is not None:
        t = t * scale
    return [t]


def infer_recipe(model, torch, seed: int):
    """Guess how each parameter was initialised, then prove it by replaying from the seed."""
    params = list(model.named_parameters())
    steps, seen_modules = [], set()
    torch.manual_seed(seed)
    for pname, p in params:
        path, leaf, mod = owner(model, pname)
        ctor = module_ctor(mod) if path else None
        if ctor is not None:
            if path in seen_modules:
                continue
            seen_modules.add(path)
            names = [f"{path}.{n}" for n, _ in mod.named_parameters(recurse=False)]
            step = {"module": type(mod).__name__, "path": path, "ctor": ctor, "params": names}
            made = replay_step(step, torch)
            if len(made) != len(names) or not all(
                torch.equal(a, dict(params)[n].detach()) for a, n in zip(made, names, strict=False)
            ):
                return steps, False
            steps.append(step)
            continue
        state = torch.get_rng_state()
        for kind in ("zeros", "ones", "randn", "rand"):
            torch.set_rng_state(state)
            step = {"param": pname, "shape": list(p.shape), "init": kind}
            t = replay_step(step, torch)[0]
            if torch.equal(t, p.detach()):
                steps.append(step)
                break
            if kind in ("randn", "rand"):
                scale = scale_of(t, p.detach(), torch)
                if scale is not None:
                    steps.append({**step, "scale": scale})
                    break
        else:
            return steps, False
    return steps, True


def scale_of(base, target, torch):
    """The shortest decimal k with base * k == target bit for bit, if any."""
    flat_b, flat_t = base.flatten(), target.flatten()
    idx = int(flat_b.abs().argmax())
    if flat_b[idx] == 0:
        return None
    ratio = float(flat_t[idx] / flat_b[idx])
    for digits in range(1, 10):
        k = float(f"{ratio:.{digits}g}")
        if torch.equal(base * k, target):
            return k
    return None


def symbolise(task, init, steps, torch, seed):
    """Which constructor argument each size in the recipe comes from (perturb one, see what moves)."""
    symbols = {}
    for i, v in enumerate(init):
        if isinstance(v, bool) or not isinstance(v, (int, tuple, list)):
            continue
        bumped = list(init)
        if isinstance(v, int):
            bumped[i] = v + 3
        else:
            bumped[i] = type(v)(e + 3 if isinstance(e, int) else e for e in v)
        try:
            torch.manual_seed(seed)
            other = task.Model(*bumped)
            other_steps, ok = infer_recipe(other, torch, seed)
        except Exception:
            continue
        if not ok or len(other_steps) != len(steps):
            continue
        for s, (a, b) in enumerate(zip(steps, other_steps, strict=False)):
            if "shape" in a:
                if isinstance(v, (tuple, list)) and list(a["shape"]) == list(v) and list(b["shape"]) == list(bumped[i]):
                    symbols[f"{s}.shape"] = i
                    continue
                for d, (x, y) in enumerate(zip(a["shape"], b["shape"], strict=False)):
                    if isinstance(v, int) and x == v and y == v + 3:
                        symbols[f"{s}.shape.{d}"] = i
            else:
                for key, x in a["ctor"].items():
                    y = b["ctor"].get(key)
                    if (
                        isinstance(v, int)
                        and x == v
                        and y == v + 3
                        or isinstance(x, list)
                        and isinstance(v, int)
                        and x == [v]
                        and y == [v + 3]
                    ):
                        symbols[f"{s}.ctor.{key}"] = i
                    elif isinstance(x, list) and isinstance(v, (tuple, list)) and x == list(v) and y == list(bumped[i]):
                        # The whole argument (LayerNorm's normalized_shape given as a tuple).
                        symbols[f"{s}.ctor.{key}.all"] = i
    return symbols


def scalar_paths(nodes):
    """Every float argument in the graph, addressed as node.arg[.index]."""
    out = {}
    for k, n in enumerate(nodes):
        for name, v in n["args"].items():
            if isinstance(v, float):
                out[f"{k}.{name}"] = v
            elif isinstance(v, list):
                for j, e in enumerate(v):
                    if isinstance(e, float):
                        out[f"{k}.{name}.{j}"] = e
    return out


def constants_from_init(task, init, nodes, inputs, torch, seed):
    """Which float constants in the graph are constructor arguments (perturb one, re-export)."""
    mapping = {}
    base = scalar_paths(nodes)
    for i, v in enumerate(init):
        if isinstance(v, bool) or not isinstance(v, float):
            continue
        bumped = list(init)
        bumped[i] = v * 1.37 + 0.11
        try:
            torch.manual_seed(seed)
            other_nodes, _, _ = export(task.Model(*bumped).eval(), inputs)
        except Exception:
            continue
        if [n["op"] for n in other_nodes] != [n["op"] for n in nodes]:
            continue
        for path, x in scalar_paths(other_nodes).items():
            if path in base and base[path] == v and x != v:
                mapping[path] = i
    return mapping


# Annotations a candidate can repeat as written: builtins, which need no import there.
PLAIN_TYPES = {"int", "float", "bool", "str"}


def describe_param(p: inspect.Parameter) -> dict:
    """A constructor parameter as the candidate can repeat it: its name, whether it is keyword
    only, its default as a Python literal (None when it has none a literal can write), and its
    annotation where that is a builtin type."""
    out: dict = {"name": p.name, "keyword_only": p.kind == p.KEYWORD_ONLY, "default": None}
    if p.default is not p.empty:
        text = repr(p.default)
        try:
            same = type(ast.literal_eval(text)) is type(p.default) and ast.literal_eval(text) == p.default
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            same = False
        if same and len(text) <= 200:
            out["default"] = text
    ann = p.annotation
    name = ann if isinstance(ann, str) else getattr(ann, "__name__", None) if isinstance(ann, type) else None
    out["annotation"] = name if name in PLAIN_TYPES else None
    return out


def main() -> None:
    _common.setup_threads()
    for task_path in sys.argv[1:]:
        try:
            inspect_one(task_path)
        except Exception as exc:  # one line per task, always: the host pairs them up by position
            _common.fail("inspect", exc)


def inspect_one(task_path: str) -> None:
    import torch

    seed = 0
    try:
        task = _common.load_module(task_path, "assay_task")
        init, inputs = _common.make_case(task, seed)
        torch.manual_seed(seed)
        model = task.Model(*init).eval()
    except Exception as exc:  # the task itself is broken: say so, do not guess
        _common.fail("task_import", exc)
        return
    try:
        sig = inspect.signature(task.Model.__init__)
        ctor_names = [p.name for p in list(sig.parameters.values())[1:]]
        ctor_params = [describe_param(p) for p in list(sig.parameters.values())[1:]]
        variadic = any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in sig.parameters.values())
    except (TypeError, ValueError):
        ctor_names, ctor_params, variadic = [], [], True
    try:
        fsig = inspect.signature(task.Model.forward)
        forward_names = [p.name for p in list(fsig.parameters.values())[1:]]
        if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in fsig.parameters.values()):
            forward_names = None
    except (TypeError, ValueError):
        forward_names = None
    try:
        nodes, output, param_targets = export(model, inputs)
        exporter = "torch.export"
    except Exception as exc:
        _common.fail("trace", exc)
        return
    named = dict(model.named_parameters())
    params = []
    for target in param_targets:
        p = named.get(target)
        params.append(
            {
                "name": target,
                "shape": list(p.shape) if p is not None else None,
                "dtype": dtype_name(p.dtype) if p is not None else None,
                "parameter": p is not None,
            }
        )
    steps, replay_ok = infer_recipe(model, torch, seed)
    symbols = symbolise(task, init, steps, torch, seed) if replay_ok else {}
    consts = constants_from_init(task, init, nodes, inputs, torch, seed)
    _common.emit(
        {
            "ok": True,
            "exporter": exporter,
            "torch": torch.__version__,
            "device": _common.device(),
            "init_inputs": [describe_value(v) for v in init],
            "init_signature": None if variadic else ctor_names,
            "init_params": None if variadic else ctor_params,
            "inputs": [describe_value(v) for v in inputs],
            "forward_signature": forward_names,
            "params": params,
            "graph": {"nodes": nodes, "output": output},
            "init_recipe": {"steps": steps, "replays": replay_ok, "symbols": symbols, "constants": consts},
            "own_init": own_init(Path(task_path).read_text(encoding="utf-8")),
        }
    )


if __name__ == "__main__":
    main()
