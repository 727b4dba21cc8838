"""The task's own `Model.__init__`, as a candidate can repeat it.

A KernelBench candidate keeps the reference's constructor (the same submodules and parameters
made in the same order, so the same seed gives the same weights) and replaces `forward`. The
playbook does the same where replaying the parameters' initialisation from the graph fails
(a Parameter made after a Linear, a Conv2d, any module the recipe does not know). This reads
the constructor's source, the one place the playbook reads the task's text: patterns still come
from the traced graph only.

The body is repeated as written (through ast.unparse, so comments go), with `super(Model, self)`
made `super()`, and the module-level names it reads carried along where they are literal
constants or imports of torch, torch.nn, torch.nn.functional or math. Anything else it reads (a
helper class, a function of the task's) and the constructor is not repeated: `why` says which.
"""

from __future__ import annotations

import ast
import builtins

# What a candidate may import (the verifier's scan allows these), by the module's name.
IMPORTABLE = {"torch", "torch.nn", "torch.nn.functional", "math"}
MAX_LINES = 200


def own_init(source: str) -> dict:
    """{"body": [lines], "preamble": [lines]} or {"why": reason}."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return {"why": f"the task does not parse: {exc.msg}"}
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    if cls is None:
        return {"why": "the task defines no class Model at its top level"}
    if cls.bases and not all(ast.unparse(b) in ("nn.Module", "torch.nn.Module", "Module") for b in cls.bases):
        return {"why": f"Model derives from {', '.join(ast.unparse(b) for b in cls.bases)}, not nn.Module"}
    fn = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if fn is None:
        return {"body": ["super().__init__()"], "preamble": []}
    if fn.decorator_list:
        return {"why": "Model.__init__ is decorated"}
    body = [_plain_super(stmt) for stmt in fn.body]
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    lines = [line for stmt in body for line in ast.unparse(stmt).splitlines()]
    if len(lines) > MAX_LINES:
        return {"why": f"Model.__init__ runs to {len(lines)} lines"}

    args = fn.args
    own = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    own |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    local = {n.id for stmt in body for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    read = {n.id for stmt in body for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    free = sorted(read - own - local - set(dir(builtins)))

    constants, imports = _module_names(tree)
    preamble = []
    for name in free:
        if name in imports:
            module = imports[name]
            if module not in IMPORTABLE:
                return {"why": f"Model.__init__ uses {name}, an import of {module}, which a candidate may not import"}
            preamble.append(f"import {module} as {name}" if name != module else f"import {module}")
        elif name in constants:
            preamble.append(f"{name} = {constants[name]}")
        else:
            return {"why": f"Model.__init__ reads {name}, which is not a constant or an import of the task"}
    return {"body": lines, "preamble": preamble}


def _plain_super(stmt: ast.stmt) -> ast.stmt:
    """`super(Model, self)` as `super()`: the candidate's class is ModelNew."""
    for node in ast.walk(stmt):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "super"
            and len(node.args) == 2
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id == "Model"
        ):
            node.args = []
    return stmt


def _module_names(tree: ast.Module) -> tuple[dict[str, str], dict[str, str]]:
    """The task's top-level literal constants (name -> source) and imports (alias -> module)."""
    constants: dict[str, str] = {}
    imports: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                ast.literal_eval(node.value)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                constants.pop(node.targets[0].id, None)
                continue
            constants[node.targets[0].id] = ast.unparse(node.value)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                imports[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                imports[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return constants, imports
