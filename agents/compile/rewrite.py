"""Source rewrites for the common families of torch.compile trouble, on the task's syntax tree:

    fixed, notes = rewrite(task_source)

- `Model` becomes `ModelNew` (same constructor, same parameters: its state_dict loads strictly);
- print and logging calls in methods are dropped (they break the graph);
- a branch on a value read to Python (`if t.item() > 0: h = a else: h = b`, or its ternary)
  becomes `h = torch.where(t > 0, a, b)`: both sides computed, the data picks;
- `v = t.tolist()` used only by max/min/sum becomes the tensor reduction;
- `v = float(t.norm())` (a tensor method's value read to Python) keeps the 0-d tensor;
- `t[mask].sum()` (a data-dependent shape) becomes `torch.where(mask, t, 0).sum()`;
- an int attribute that forward bumps (`self.calls += 1`) becomes a non-persistent buffer, so
  dynamo stops guarding on (and recompiling for) its value;
- `for _ in range(n): h = c * h + e` (e free of h) becomes its closed form, so no loop is
  unrolled per value of n.

Each rewrite says what it did in `notes` (the diagnosis); a family with no rewrite here is left
as it was, and the verifier's figures say so. Comments do not survive (ast.unparse).
"""

from __future__ import annotations

import ast
import copy

HELPERS = ("get_inputs", "get_init_inputs", "get_input_sequence")
LOGGERS = ("logging", "logger", "log", "warnings")


def rewrite(source: str) -> tuple[str, list[str]]:
    tree = ast.parse(source)
    notes: list[str] = []
    body = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in HELPERS:
            continue  # the task's own; the verifier calls the task file's
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            node = _fix_class(node, notes)
        body.append(node)
    tree.body = body
    for node in ast.walk(tree):  # super(Model, self) in the renamed class
        if isinstance(node, ast.Name) and node.id == "Model":
            node.id = "ModelNew"
    ast.fix_missing_locations(tree)
    return ast.unparse(tree) + "\n", notes


def _fix_class(cls: ast.ClassDef, notes: list[str]) -> ast.ClassDef:
    cls = copy.deepcopy(cls)
    cls.name = "ModelNew"
    methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}
    for fn in methods.values():
        if fn.name != "__init__":
            fn.body = _block(fn.body, notes)
    if "__init__" in methods and "forward" in methods:
        _counters(methods["__init__"], methods["forward"], notes)
    return cls


def _block(stmts: list[ast.stmt], notes: list[str]) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for st in stmts:
        for field in ("body", "orelse"):
            if isinstance(st, (ast.For, ast.While, ast.With)) and getattr(st, field, None):
                setattr(st, field, _block(getattr(st, field), notes))
        if _is_log(st):
            notes.append(f"line {st.lineno}: removed `{ast.unparse(st)}` (print/logging breaks the graph)")
            continue
        fixed = _item_branch(st, notes) or _closed_form(st, notes) or _host_scalar(st, notes)
        _masked_sums(st, notes)
        out.extend(fixed if fixed is not None else [st])
    _tolist(out, notes)
    return out or [ast.Pass()]


def _is_log(st: ast.stmt) -> bool:
    if not isinstance(st, ast.Expr) or not isinstance(st.value, ast.Call):
        return False
    f = st.value.func
    if isinstance(f, ast.Name):
        return f.id == "print"
    return isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in LOGGERS


def _has_host_read(expr: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "item" and not n.args
        for n in ast.walk(expr)
    )


class _StripItem(ast.NodeTransformer):
    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "item" and not node.args:
            return node.func.value
        return node


def _where(cond: ast.expr, a: ast.expr, b: ast.expr) -> ast.expr:
    return ast.Call(
        func=ast.Attribute(value=ast.Name("torch", ast.Load()), attr="where", ctx=ast.Load()),
        args=[cond, a, b],
        keywords=[],
    )


def _single_target(stmts: list[ast.stmt]) -> tuple[str, ast.expr] | None:
    if len(stmts) == 1 and isinstance(stmts[0], ast.Assign) and len(stmts[0].targets) == 1:
        t = stmts[0].targets[0]
        if isinstance(t, ast.Name):
            return t.id, stmts[0].value
    return None


def _item_branch(st: ast.stmt, notes: list[str]) -> list[ast.stmt] | None:
    if isinstance(st, ast.If) and _has_host_read(st.test):
        then = _single_target(st.body)
        other = _single_target(st.orelse) if st.orelse else (then[0], ast.Name(then[0], ast.Load())) if then else None
        if then is None or other is None or then[0] != other[0]:
            return None
        cond = _StripItem().visit(copy.deepcopy(st.test))
        new = ast.Assign(targets=[ast.Name(then[0], ast.Store())], value=_where(cond, then[1], other[1]))
        notes.append(
            f"line {st.lineno}: `if {ast.unparse(st.test)}` reads a tensor into Python and branches on it; "
            f"both sides are now computed and torch.where picks per call"
        )
        return [new]
    if isinstance(st, ast.Assign) and isinstance(st.value, ast.IfExp) and _has_host_read(st.value.test):
        e = st.value
        cond = _StripItem().visit(copy.deepcopy(e.test))
        notes.append(f"line {st.lineno}: the conditional expression on `{ast.unparse(e.test)}` is now torch.where")
        return [ast.Assign(targets=st.targets, value=_where(cond, e.body, e.orelse))]
    return None


def _tolist(stmts: list[ast.stmt], notes: list[str]) -> None:
    """`v = t.tolist()` whose every use is max(v) / min(v) / sum(v): the reduction on t."""
    reductions = {"max": "max", "min": "min", "sum": "sum"}
    for i, st in enumerate(list(stmts)):
        if not (
            isinstance(st, ast.Assign)
            and len(st.targets) == 1
            and isinstance(st.targets[0], ast.Name)
            and isinstance(st.value, ast.Call)
            and isinstance(st.value.func, ast.Attribute)
            and st.value.func.attr == "tolist"
        ):
            continue
        name, tensor = st.targets[0].id, st.value.func.value
        rest = stmts[i + 1 :]
        uses = [n for s in rest for n in ast.walk(s) if isinstance(n, ast.Name) and n.id == name]
        calls = [
            n
            for s in rest
            for n in ast.walk(s)
            if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and n.func.id in reductions
            and len(n.args) == 1
            and isinstance(n.args[0], ast.Name)
            and n.args[0].id == name
        ]
        if not uses or len(uses) != len(calls):
            continue
        op = "max"
        for c in calls:
            op = reductions[c.func.id if isinstance(c.func, ast.Name) else "max"]
            c.func = ast.Attribute(value=copy.deepcopy(tensor), attr=op, ctx=ast.Load())
            c.args = []
        stmts.remove(st)
        notes.append(
            f"line {st.lineno}: `{ast.unparse(st)}` copied the tensor to a Python list for a {op}; now the tensor's own {op}"
        )


def _counters(init: ast.FunctionDef, forward: ast.FunctionDef, notes: list[str]) -> None:
    """int attributes bumped in forward (self.n += k) -> non-persistent long buffers."""
    bumped = {
        n.target.attr
        for n in ast.walk(forward)
        if isinstance(n, ast.AugAssign)
        and isinstance(n.target, ast.Attribute)
        and isinstance(n.target.value, ast.Name)
        and n.target.value.id == "self"
    }
    for i, st in enumerate(init.body):
        if (
            isinstance(st, ast.Assign)
            and len(st.targets) == 1
            and isinstance(st.targets[0], ast.Attribute)
            and st.targets[0].attr in bumped
            and isinstance(st.value, ast.Constant)
            and type(st.value.value) is int
        ):
            attr = st.targets[0].attr
            init.body[i] = ast.parse(
                f"self.register_buffer({attr!r}, torch.tensor({st.value.value}, dtype=torch.long), persistent=False)"
            ).body[0]
            for n in ast.walk(forward):
                for _field, value in ast.iter_fields(n):
                    if isinstance(value, list):
                        for j, s in enumerate(value):
                            if (
                                isinstance(s, ast.AugAssign)
                                and isinstance(s.target, ast.Attribute)
                                and s.target.attr == attr
                            ):
                                method = {ast.Add: "add_", ast.Sub: "sub_"}.get(type(s.op))
                                if method:
                                    value[j] = ast.parse(f"self.{attr}.{method}({ast.unparse(s.value)})").body[0]
            notes.append(
                f"self.{attr} was a Python int that forward changes on every call, so dynamo guarded on its value and "
                f"recompiled; it is now a non-persistent buffer updated in the graph (the state_dict is unchanged)"
            )


def _closed_form(st: ast.stmt, notes: list[str]) -> list[ast.stmt] | None:
    """for _ in range(n): h = c * h + e  (c a number, e free of h and of the loop variable)."""
    if not (
        isinstance(st, ast.For)
        and not st.orelse
        and isinstance(st.iter, ast.Call)
        and isinstance(st.iter.func, ast.Name)
        and st.iter.func.id == "range"
        and len(st.iter.args) == 1
        and isinstance(st.target, ast.Name)
    ):
        return None
    one = _single_target(st.body)
    if one is None:
        return None
    h, value = one
    if not (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add)):
        return None
    scaled, extra = value.left, value.right
    if not (
        isinstance(scaled, ast.BinOp)
        and isinstance(scaled.op, ast.Mult)
        and isinstance(scaled.left, ast.Constant)
        and isinstance(scaled.left.value, float)
        and isinstance(scaled.right, ast.Name)
        and scaled.right.id == h
    ):
        return None
    c = scaled.left.value
    names = {n.id for n in ast.walk(extra) if isinstance(n, ast.Name)}
    if h in names or st.target.id in names or c == 1.0:
        return None
    n = ast.unparse(st.iter.args[0])
    e = ast.unparse(extra)
    notes.append(
        f"line {st.lineno}: `for {st.target.id} in range({n})` was unrolled and guarded on {n}, so each new value "
        f"recompiled; the recurrence {h} = {c} * {h} + ({e}) is now its closed form"
    )
    return ast.parse(f"_decay = {c!r} ** {n}\n{h} = _decay * {h} + ({e}) * ((1.0 - _decay) / {1.0 - c!r})").body


def _host_scalar(st: ast.stmt, notes: list[str]) -> list[ast.stmt] | None:
    """v = float(t.m(...)) / int(...) of a tensor method call: v stays the 0-d tensor."""
    if not (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.value, ast.Call)):
        return None
    call = st.value
    if not (
        isinstance(call.func, ast.Name)
        and call.func.id in ("float", "int")
        and len(call.args) == 1
        and not call.keywords
        and isinstance(call.args[0], ast.Call)
        and isinstance(call.args[0].func, ast.Attribute)
    ):
        return None
    inner = call.args[0]
    if call.func.id == "int":
        inner = ast.Call(func=ast.Attribute(value=inner, attr="long", ctx=ast.Load()), args=[], keywords=[])
    notes.append(
        f"line {st.lineno}: `{ast.unparse(call)}` read the value to Python (a graph break, and a guard on the "
        "value); it now stays a 0-d tensor"
    )
    return [ast.Assign(targets=st.targets, value=inner)]


def _masked_sums(st: ast.stmt, notes: list[str]) -> None:
    """t[mask].sum() -> torch.where(mask, t, 0).sum(), in place: the same sum, no data-dependent shape."""
    for node in ast.walk(st):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "sum"
            and not node.args
            and not node.keywords
            and isinstance(node.func.value, ast.Subscript)
            and isinstance(node.func.value.slice, ast.Compare)
        ):
            continue
        sub = node.func.value
        before = ast.unparse(node)
        zero = ast.Call(
            func=ast.Attribute(value=ast.Name("torch", ast.Load()), attr="zeros_like", ctx=ast.Load()),
            args=[copy.deepcopy(sub.value)],
            keywords=[],
        )
        node.func.value = _where(sub.slice, sub.value, zero)
        notes.append(
            f"line {st.lineno}: `{before}` selects a data-dependent number of entries (dynamo breaks there); "
            "the masked-out entries are now zeros in a sum of the same size"
        )
