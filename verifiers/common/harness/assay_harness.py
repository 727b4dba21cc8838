"""The shared judge-script harness: how every kind's judge, inside a verification sandbox, reads
its plan, loads a submitted file and says its result.

Standalone on purpose: the standard library only, never assay (assay's source is not bound into
sandboxes). A judge script finds it beside its own harness folder,

    sys.path.insert(0, os.path.join(<folder above the kind's harness folder's parent>, "common", "harness"))

which holds in the checkout (verifiers/<kind>/harness, verifiers/common/harness) and in the
sandbox (/assay/<kind>/harness, /assay/common/harness) alike.

Loading a submission: judge scripts run as `python -I -B script.py`, so no PYTHON* variable, no
user site and no script folder reaches sys.path; the submitted file is executed from its path
as a module of its own, with its folder never put on sys.path. So a sitecustomize.py,
usercustomize.py, a *.pth file or a torch.py / numpy.py beside it is never imported.
"""

from __future__ import annotations

import ast
import json
import os
import sys
import types

RESULT_MARK = "@@ASSAY "
_write = os.write
_dumps = json.dumps
# Modules load_entry executed on purpose (a submission's entry is meant to come from its folder).
_LOADED: set[str] = set()


def read_plan() -> dict:
    """The plan the verifier sent on stdin (one JSON object)."""
    plan = json.loads(sys.stdin.readline())
    if not isinstance(plan, dict):
        raise SystemExit("the plan is not a JSON object")
    return plan


def emit(result: dict) -> None:
    """The one result line the verifier reads (it takes the last one printed)."""
    sys.stdout.flush()
    _write(1, (RESULT_MARK + _dumps(result, default=str) + "\n").encode())


def load_entry(path: str, name: str, overrides: dict | None = None, source: str | None = None) -> types.ModuleType:
    """Execute a file as the module `name`, by path (or `source` given as text, named `path`);
    module-level int constants named in `overrides` are replaced in its syntax tree before it
    runs, so sizes derived from them follow. Its folder is not added to sys.path: nothing beside
    it can be imported by name."""
    if source is None:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    tree = ast.parse(source, filename=path)
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target = node.targets[0].id
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            target = node.target.id
        else:
            continue
        if overrides and target in overrides and node.value is not None:
            node.value = ast.copy_location(ast.Constant(int(overrides[target])), node.value)
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module
    _LOADED.add(name)
    exec(compile(tree, path, "exec"), module.__dict__)
    return module


def isolation_problems(submission_dir: str) -> list[str]:
    """What would let files of the submission change this interpreter: not isolated (-I), or a
    module imported from inside the submission's folder other than the entries load_entry ran
    (sitecustomize, a library look-alike). Empty when neither."""
    problems = []
    if not sys.flags.isolated:
        problems.append("the judge interpreter is not isolated (-I)")
    root = os.path.realpath(submission_dir) + os.sep
    for mod_name, mod in list(sys.modules.items()):
        where = getattr(mod, "__file__", None)
        # torch.ops and torch.classes carry a bare "_ops.py": relative, it would resolve against
        # the working folder, which may be the submission's
        if (
            mod_name not in _LOADED
            and isinstance(where, str)
            and os.path.isabs(where)
            and os.path.realpath(where).startswith(root)
        ):
            problems.append(f"module {mod_name} was imported from the submission ({os.path.basename(where)})")
    if any(
        os.path.realpath(p or ".") + os.sep == root or os.path.realpath(p or ".").startswith(root) for p in sys.path
    ):
        problems.append("the submission's folder is on sys.path")
    return problems
