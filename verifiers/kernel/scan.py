"""The kernel verifier's source scan: what a candidate file may not even say.

Runs in the verifier's own process on the candidate's text (parsed, never executed). It is
the first of two lines: whatever it misses, the run-time checks (ops recorded on every thread,
the built extension's imported symbols, outputs compared outside the sandbox) still see. The
scan exists because it names a trick precisely, and because a candidate that fails it need
not be run at all.

Each finding belongs to one check:
  candidate_file            the file parses and defines ModelNew with Model's signature
  source_imports            every import is on the criteria's list (the task module is not)
  source_no_torch_compute   no torch compute reached by name, in Python or in inline C++
  source_no_dynamic_code    no eval/exec/__import__/computed getattr/introspection/raw ctypes
  source_no_system_access   no processes, threads, signals, exits, sockets, directory walks
  source_no_harness_tampering  no assignment into torch, os, math... (monkeypatching)
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from assay.verifiers.kernel.criteria import Criteria

SCAN_CHECKS = (
    "candidate_file",
    "source_imports",
    "source_no_torch_compute",
    "source_no_dynamic_code",
    "source_no_system_access",
    "source_no_harness_tampering",
)

DYNAMIC_CALLS = {
    "eval",
    "exec",
    "compile",
    "__import__",
    "globals",
    "locals",
    "vars",
    "breakpoint",
    "setattr",
    "delattr",
}
SYSTEM_CALLS = {"exit", "quit", "input", "help"}
# Paths a kernel has no business naming: other processes and file descriptors (the harness's
# pipes among them), the verifier's mounts and result files.
SENSITIVE_PATHS = re.compile(
    r"/proc\b|/dev/(fd|std|shm|tty|pts|mem|kmsg)|/sys/|^/assay|[\"' ]/assay/|/workspace/out|@@ASSAY"
)
# ctypes reaches raw memory and foreign libraries; a candidate needs only its own library.
CTYPES_DENIED = {
    "pythonapi",
    "PyDLL",
    "pydll",
    "memmove",
    "memset",
    "string_at",
    "wstring_at",
    "cast",
    "util",
    "CFUNCTYPE",
    "PYFUNCTYPE",
    "WINFUNCTYPE",
    "addressof",
    "pointer",
    "byref",
    "from_address",
    "from_buffer",
    "in_dll",
    "dlopen",
    "RTLD_GLOBAL",
    "_dlopen",
    "_SimpleCData",
}
CTYPES_LOADERS = {"CDLL", "cdll", "LoadLibrary"}
# torch entry points that make torch write or run the kernel (compilers, op registries, the
# C core): refused even in ModelNew.__init__, where building parameters is otherwise free.
NEVER_TORCH = {
    "compile",
    "jit",
    "fx",
    "export",
    "_dynamo",
    "_inductor",
    "library",
    "ops",
    "_C",
    "_ops",
    "autograd",
    "hub",
    "package",
    "_higher_order_ops",
    "_prims",
    "_refs",
    "_decomp",
    "backends",
}
# Other modules torch's own modules hold as attributes (torch.sys, torch.os,
# torch.utils.cpp_extension.subprocess, torch.nn.functional.np...): a way around the import
# list (torch.sys.modules reaches every module loaded), refused anywhere in a torch path.
TORCH_REEXPORTS = {
    "builtins",
    "ctypes",
    "functools",
    "glob",
    "importlib",
    "inspect",
    "math",
    "os",
    "platform",
    "sys",
    "textwrap",
    "threading",
    "warnings",
    "dataclasses",
    "np",
    "collections",
    "copy",
    "errno",
    "logging",
    "re",
    "setuptools",
    "shlex",
    "shutil",
    "subprocess",
    "sysconfig",
    "types",
    "copyreg",
    "weakref",
}

CPP_DYNAMIC = [
    (r"\bdl(open|sym|vsym|mopen|addr1?|info|_iterate_phdr)\b", "loads symbols at run time ({0})"),
    # The loaded libraries' ELF tables, walked by hand: how a shim function is found with no dl* call.
    (
        r"\b(_r_debug|r_debug|link_map|ElfW|Elf(32|64)_\w+|DT_(SYMTAB|STRTAB|GNU_HASH|HASH)|PT_DYNAMIC)\b|"
        r"#\s*include\s*<(link|elf)\.h>",
        "reads the loaded libraries' ELF tables ({0})",
    ),
    # torch's kernels as C functions (AOTInductor's shim): no dispatcher, so no op record.
    (r"\baoti_torch_\w*", "calls torch's C kernel shim ({0})"),
    (r"\bTORCH_LIBRARY(_IMPL|_FRAGMENT)?\b", "registers torch operators ({0})"),
    (r"RecordFunction|enableRecordFunction|\b(add|remove|clear)\w*Callbacks?\b", "touches torch's op recording ({0})"),
    (
        r"DispatchKey|ExcludeDispatchKeyGuard|AutoDispatch|\bredispatch\b|\bDispatcher\b",
        "steers torch's dispatcher ({0})",
    ),
    (
        r"\bnative\s*::|\b_ops\s*::|\b(cpu|compositeexplicitautograd|compositeimplicitautograd)\s*::",
        "calls a torch kernel directly ({0})",
    ),
    (r"##", "pastes tokens in a macro ({0}), which hides names from this scan"),
    (r"#\s*define\s+\w+(\([^)]*\))?[^\n]*::", "defines a macro over a namespace ({0})"),
    (r"\b(__asm__|asm)\s*(volatile\s*)?\(", "inline assembly ({0})"),
    (r"\bPy(Run|Eval|Import|Object_Call|Object_GetAttr)\w*", "calls back into Python ({0})"),
    # The harness's frames and locals are the interpreter's state (tests/verifiers/cheats/audit_peek.py).
    (
        r"\b_?Py(Frame|ThreadState|InterpreterState|Code|GC|Traceback|Sys|Gen|Dict_GetItem)\w*|\b_PyRuntime\b",
        "reads the interpreter's state ({0})",
    ),
]
CPP_SYSTEM = [
    (r"\bstd\s*::\s*(thread|jthread|async)\b|\bpthread_create\b|\bclone\s*\(", "starts a thread ({0})"),
    (
        r"\b(v?fork|system|popen|exec[lv]p?e?|posix_spawnp?|syscall|kill|raise|signal|sigaction|sigprocmask|"
        r"pthread_sigmask|pthread_kill|tgkill|sigqueue|setitimer|alarm|timer_settime|timer_delete)\s*\(",
        "process or signal control ({0})",
    ),
    (
        r"\b(_exit|_Exit|quick_exit|abort)\s*\(|\bstd\s*::\s*(exit|quick_exit|abort)\b|(?<![\w.:>])exit\s*\(",
        "ends the process ({0})",
    ),
    (r"\b(socket|connect|bind|listen|accept|getaddrinfo)\s*\(", "network access ({0})"),
    (
        r"\b(fopen|freopen|opendir|readdir|std\s*::\s*ifstream|std\s*::\s*ofstream|std\s*::\s*filesystem)\b",
        "file access ({0})",
    ),
    # The harness's channels share the process (worker.AuditLine).
    (
        r"\b(tee|splice|vmsplice|dup[23]?|open(at)?(64)?|creat|fdopen|socketpair|pipe2?|prctl|timer_create|mq_notify|"
        r"aio_\w+|lio_listio)\s*\(",
        "descriptor or thread control ({0})",
    ),
]


@dataclass(frozen=True)
class Finding:
    check: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


@lru_cache(maxsize=1)
def _plain_type_methods() -> frozenset[str]:
    names: set[str] = set()
    for t in (str, bytes, bytearray, list, dict, set, frozenset, tuple, int, float, complex):
        names.update(n for n in dir(t) if not n.startswith("__"))
    return frozenset(names)


def _names_file() -> tuple[str, Path]:
    from importlib.metadata import version

    from assay.verifiers.kernel.runtime import default_cache_dir

    return version("torch"), default_cache_dir() / "tensor-names.json"


def _saved_names(torch_version: str, path: Path) -> frozenset[str] | None:
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        if saved.get("torch") == torch_version and isinstance(saved.get("names"), list):
            return frozenset(str(n) for n in saved["names"])
    except (OSError, ValueError, AttributeError):
        pass
    return None


def _live_names() -> frozenset[str]:
    import torch

    return frozenset(n for n in dir(torch.Tensor) if not n.startswith("__"))


@lru_cache(maxsize=1)
def tensor_names() -> frozenset[str]:
    """dir(torch.Tensor). Importing torch into the verifier's own process takes 1.7 s here and
    the scan comes first in a verification, so the names are read from the verifier's cache when
    `save_tensor_names` put them there for this torch (the warm-up beside the agent does)."""
    saved = _saved_names(*_names_file())
    return saved if saved is not None else _live_names()


def save_tensor_names() -> None:
    """Keep dir(torch.Tensor) in the verifier's cache for later scans (imports torch here, unless
    this torch's names are there already)."""
    torch_version, path = _names_file()
    if _saved_names(torch_version, path) is not None:
        return
    names = sorted(_live_names())
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps({"torch": torch_version, "names": names}), encoding="utf-8")
        os.replace(tmp, path)


def _dotted(node: ast.AST) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                ids.add(id(body[0].value))
    return ids


def _params(fn: ast.FunctionDef) -> tuple[int, bool]:
    a = fn.args
    flexible = a.vararg is not None or a.kwarg is not None
    positional = [p.arg for p in a.posonlyargs + a.args][1:]  # drop self
    return len(positional), flexible


def _signatures(tree: ast.Module, cls_name: str) -> dict[str, tuple[int, bool]] | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls_name:
            out = {}
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name in ("__init__", "forward"):
                    out[item.name] = _params(item)
            return out
    return None


class Scanner(ast.NodeVisitor):
    def __init__(self, criteria: Criteria):
        self.c = criteria.scan
        self.findings: list[Finding] = []
        self.aliases: dict[str, str] = {}  # local name -> dotted module/object it was imported as
        self.exempt_depth = 0  # inside ModelNew.__init__: building parameters may use torch freely
        self.class_stack: list[str] = []
        self.func_depth = 0  # functions entered (a def inside a def is not a method)
        self.tree: ast.Module | None = None
        self.loader_funcs: set[int] = set()  # ctypes loaders being called (judged by _judge_loader)

    def visit_Module(self, node: ast.Module) -> None:
        self.tree = node
        self.generic_visit(node)

    def add(self, check: str, node: ast.AST, message: str) -> None:
        self.findings.append(Finding(check, getattr(node, "lineno", 0), message))

    # -- imports ------------------------------------------------------------------------
    def _allowed_import(self, module: str) -> bool:
        return module in self.c.allowed_imports

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if not self._allowed_import(alias.name):
                self.add("source_imports", node, f"imports {alias.name!r}, which is not on the allowed list")
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                self.aliases[alias.name.split(".")[0]] = alias.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            self.add("source_imports", node, "relative import (the candidate is a single file)")
            return
        for alias in node.names:
            full = f"{module}.{alias.name}"
            if alias.name == "*":
                self.add("source_imports", node, f"'from {module} import *' hides what it brings in")
                continue
            if self._allowed_import(full):
                pass
            elif not self._allowed_import(module):
                self.add("source_imports", node, f"imports from {module!r}, which is not on the allowed list")
                continue
            self.aliases[alias.asname or alias.name] = full
            self._judge_path(full.split("."), node)

    # -- names and attributes ------------------------------------------------------------
    def _resolve(self, parts: list[str]) -> list[str] | None:
        root = self.aliases.get(parts[0])
        if root is None:
            return None
        return root.split(".") + parts[1:]

    def _judge_path(self, full: list[str], node: ast.AST) -> None:
        """A dotted path into an imported module: torch, os and ctypes have their own rules."""
        dotted = ".".join(full)
        head = full[0]
        if head == "torch":
            self._judge_torch(full, node, dotted)
        elif head == "os" and len(full) > 1:
            if full[1] not in self.c.allowed_os:
                self.add("source_no_system_access", node, f"uses {dotted}")
        elif head == "ctypes" and len(full) > 1:
            if any(p in CTYPES_DENIED for p in full[1:]):
                self.add("source_no_dynamic_code", node, f"uses {dotted} (raw memory or foreign code)")
            elif (
                any(p in CTYPES_LOADERS for p in full[1:])
                and id(node) not in self.loader_funcs
                and not isinstance(node, ast.ImportFrom)
            ):
                # Held, subclassed, subscripted (ctypes.cdll["libtorch_cpu.so"]) or reached by
                # getattr, a loader opens a library the call rule below never sees.
                self.add("source_no_dynamic_code", node, f"uses {dotted} other than by calling it on load()'s result")
        for part in full[1:]:
            if part.startswith("_") and part not in ("__init__",):
                self.add("source_no_dynamic_code", node, f"reaches the private name {dotted}")
                break

    def _judge_torch(self, full: list[str], node: ast.AST, dotted: str) -> None:
        if len(full) < 2:
            return
        if "torch" in full[1:]:
            # torch's modules hold torch itself (torch.utils.cpp_extension.torch.softmax): what
            # follows is judged as the torch path it is.
            last = len(full) - 1 - full[::-1].index("torch")
            self._judge_torch(full[last:], node, dotted)
            return
        reexport = next((p for p in full[1:] if p in TORCH_REEXPORTS), None)
        if reexport is not None:
            self.add(
                "source_imports",
                node,
                f"uses {dotted}, torch's copy of the {reexport!r} module (an import around the allowed list)",
            )
            return
        second = full[1]
        if second in NEVER_TORCH:
            self.add("source_no_torch_compute", node, f"uses {dotted} (torch would write or run the kernel)")
            return
        if self.exempt_depth:
            return
        if second == "nn" and len(full) > 2:
            third = full[2]
            if third == "functional":
                if len(full) > 3 and full[3] not in self.c.allowed_contractions:
                    self.add("source_no_torch_compute", node, f"calls torch compute: {dotted}")
            elif third not in self.c.allowed_nn:
                self.add("source_no_torch_compute", node, f"uses {dotted} outside ModelNew.__init__")
            return
        if second == "utils" and len(full) > 2:
            if full[2] != "cpp_extension" or (len(full) > 3 and full[3] not in self.c.allowed_torch):
                self.add("source_no_torch_compute", node, f"uses {dotted}")
            return
        if second == "Tensor" and len(full) > 2:
            if full[2] not in self.c.allowed_tensor_methods:
                self.add("source_no_torch_compute", node, f"calls torch compute: {dotted}")
            return
        if second not in self.c.allowed_torch and second not in self.c.allowed_contractions:
            self.add("source_no_torch_compute", node, f"uses {dotted}, which is not allocation or a type")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        parts = _dotted(node)
        if isinstance(node.ctx, (ast.Store, ast.Del)) and parts:
            full = self._resolve(parts)
            if full is not None and len(parts) > 1:
                self.add("source_no_harness_tampering", node, f"assigns to {'.'.join(full)} (monkeypatching)")
        if node.attr.startswith("__") and node.attr.endswith("__") and node.attr not in ("__init__", "__name__"):
            self.add("source_no_dynamic_code", node, f"reaches the dunder attribute .{node.attr}")
        elif node.attr.startswith("_") and not node.attr.endswith("__") and parts is None:
            # A private name reached through a subscript or a call (sys.modules["x"]._f, f()._g)
            # never resolves to an import path, so _judge_path cannot see it.
            self.add("source_no_dynamic_code", node, f"reaches the private attribute .{node.attr} of an expression")
        if parts is not None:
            full = self._resolve(parts)
            if full is not None:
                self._judge_path(full, node)
                return  # the chain is judged whole; do not judge its prefixes again
        self.generic_visit(node)

    def _judge_method(self, node: ast.Attribute) -> None:
        """`<expr>.softmax(...)`-style calls on anything that may be a tensor. Only calls: an
        attribute merely read (`device.type`, `self.norm.weight`) shares a name, not a meaning."""
        name = node.attr
        if self.exempt_depth or name in self.c.allowed_tensor_methods or name.startswith("is_"):
            return
        if name in tensor_names() and name not in _plain_type_methods():
            self.add("source_no_torch_compute", node, f"calls the tensor method .{name}")

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in ("__builtins__", "__loader__", "__spec__", "__import__"):
            self.add("source_no_dynamic_code", node, f"reaches {node.id}")
        if isinstance(node.ctx, ast.Load) and node.id in self.aliases:
            full = self.aliases[node.id].split(".")
            if len(full) > 1:
                self._judge_path(full, node)

    # -- calls ----------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id not in self.aliases:
            if func.id in DYNAMIC_CALLS:
                self.add("source_no_dynamic_code", node, f"calls {func.id}()")
            if func.id in SYSTEM_CALLS:
                self.add("source_no_system_access", node, f"calls {func.id}()")
            if (
                func.id == "open"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, int)
            ):
                self.add("source_no_system_access", node, "opens a file descriptor by number")
            if func.id in ("getattr", "hasattr") and len(node.args) >= 2:
                name = node.args[1]
                if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                    self.add("source_no_dynamic_code", node, f"{func.id}() with a computed attribute name")
                else:
                    self._judge_getattr(node, name.value)
            if func.id in ("setattr", "delattr") and node.args:
                parts = _dotted(node.args[0])
                if parts and self._resolve(parts) is not None:
                    self.add("source_no_harness_tampering", node, f"{func.id}() on {'.'.join(parts)}")
        parts = _dotted(func)
        full = self._resolve(parts) if parts else None
        if full and full[0] == "ctypes" and full[-1] in CTYPES_LOADERS:
            self.loader_funcs.add(id(func))
            self._judge_loader(node, ".".join(full))
        if (
            isinstance(func, ast.Call)
            and isinstance(func.func, ast.Name)
            and func.func.id == "type"
            and func.func.id not in self.aliases
        ):
            self.add(
                "source_no_dynamic_code", node, "calls the class of an object (type(x)(...)), e.g. a ctypes loader"
            )
        if isinstance(func, ast.Attribute) and full is None:
            self._judge_method(func)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and (m := SENSITIVE_PATHS.search(node.value)):
            self.add(
                "source_no_system_access",
                node,
                f"names {m.group(0).strip()!r} (other processes, descriptors or the verifier's files)",
            )

    def _judge_getattr(self, node: ast.Call, attr: str) -> None:
        target = _dotted(node.args[0])
        full = self._resolve(target) if target else None
        if full is not None:
            self._judge_path(full + [attr], node)
        elif not self.exempt_depth and attr in tensor_names() and attr not in self.c.allowed_tensor_methods:
            self.add("source_no_torch_compute", node, f"getattr(..., {attr!r}) reaches a tensor method")
        if attr.startswith("__"):
            self.add("source_no_dynamic_code", node, f"getattr(..., {attr!r})")

    def _judge_loader(self, node: ast.Call, dotted: str) -> None:
        """ctypes may load the library the candidate just built: load()'s result, directly or
        through a name that is bound only to load() calls. Anything else may name another
        library (libtorch_cpu's C functions run torch's kernels with no dispatcher)."""
        if not node.args:
            self.add("source_no_dynamic_code", node, f"{dotted}() without a library")
            return
        arg = node.args[0]
        if isinstance(arg, ast.Call) and _is_load_call(arg, self):
            return
        if isinstance(arg, ast.Name) and self._bound_only_to_load(arg.id):
            return
        self.add(
            "source_no_dynamic_code",
            node,
            f"{dotted}() of a library that is not the candidate's own build (pass it load()'s result)",
        )

    def _bound_only_to_load(self, name: str) -> bool:
        """Every binding of `name` in the file is `name = load(...)` (one target, a
        torch.utils.cpp_extension call); a parameter, import, def, loop or tuple target is not."""
        if self.tree is None or name in self.aliases:
            return False
        nodes = list(ast.walk(self.tree))
        good = {
            id(a.targets[0])
            for a in nodes
            if isinstance(a, ast.Assign)
            and len(a.targets) == 1
            and isinstance(a.targets[0], ast.Name)
            and a.targets[0].id == name
            and isinstance(a.value, ast.Call)
            and _is_load_call(a.value, self)
        }
        stores = [n for n in nodes if isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load)]
        other = any(_binds(n) == name for n in nodes)
        return bool(stores) and not other and all(id(n) in good for n in stores)

    # -- scopes ---------------------------------------------------------------------------
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.class_stack.append(node.name)
        self.generic_visit(node)
        self.class_stack.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        # Only ModelNew's own method: not a def __init__ nested in it, nor one in a class inside it.
        exempt = node.name == "__init__" and self.class_stack == ["ModelNew"] and not self.func_depth
        for deco in node.decorator_list:
            self.visit(deco)
        self.visit(node.args)
        # The exemption is for __init__'s own body only: a function defined inside it (a
        # closure forward calls later) runs at forward time and is judged like forward.
        saved = self.exempt_depth
        self.exempt_depth = 1 if exempt else 0
        self.func_depth += 1
        for stmt in node.body:
            self.visit(stmt)
        self.func_depth -= 1
        self.exempt_depth = saved

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.visit(node.args)
        saved, self.exempt_depth = self.exempt_depth, 0  # as for a nested def: judged like forward
        self.visit(node.body)
        self.exempt_depth = saved

    def visit_Global(self, node: ast.Global) -> None:
        return None


def _binds(node: ast.AST) -> str | None:
    """The name a node binds other than as an assignment target (parameters, defs, imports,
    except and match captures)."""
    if isinstance(node, ast.arg):
        return node.arg
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name
    if isinstance(node, ast.alias):
        return node.asname or node.name.split(".")[0]
    if isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
        return node.name
    if isinstance(node, ast.MatchMapping):
        return node.rest
    return None


def _is_load_call(call: ast.Call, scanner: Scanner) -> bool:
    parts = _dotted(call.func)
    full = scanner._resolve(parts) if parts else None
    return bool(full) and full[:3] == ["torch", "utils", "cpp_extension"]


def _cpp_texts(tree: ast.Module) -> list[tuple[int, str]]:
    """String constants that are not docstrings: inline C++ lives in these."""
    skip = _docstrings(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            out.append((node.lineno, node.value))
    return out


def _strip_cpp_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def scan_cpp(texts: list[tuple[int, str]], criteria: Criteria) -> list[Finding]:
    findings: list[Finding] = []
    # at::conv2d and friends as in Python: the run-time record judges which and on what sizes.
    allowed = set(criteria.scan.allowed_cpp) | set(criteria.scan.allowed_contractions)
    methods = tensor_names() - set(criteria.scan.allowed_tensor_methods) - _plain_type_methods()
    for line, raw in texts:
        text = _strip_cpp_comments(raw)
        for m in re.finditer(r"\b(at|torch|c10)\s*::\s*(\w+)(?:\s*::\s*(\w+))?", text):
            ns, name = m.group(1), m.group(2)
            # A qualified entry ("detail::empty_cpu") allows that one name of a namespace, not the rest.
            if m.group(3) and f"{name}::{m.group(3)}" in allowed and not re.match(r"\s*::", text[m.end() :]):
                continue
            if name not in allowed and not (ns == "c10" and name in ("irange", "Half", "BFloat16", "ScalarType")):
                findings.append(Finding("source_no_torch_compute", line, f"C++ calls {ns}::{name}"))
        for m in re.finditer(r"[.>]\s*([a-z_][a-z0-9_]*)\s*\(", text):
            if m.group(1) in methods:
                findings.append(
                    Finding("source_no_torch_compute", line, f"C++ calls the tensor method .{m.group(1)}()")
                )
        for pattern, message in CPP_DYNAMIC:
            for m in re.finditer(pattern, text):
                findings.append(Finding("source_no_dynamic_code", line, "C++ " + message.format(m.group(0).strip())))
        for pattern, message in CPP_SYSTEM:
            for m in re.finditer(pattern, text):
                findings.append(Finding("source_no_system_access", line, "C++ " + message.format(m.group(0).strip())))
    return findings


def scan_candidate(source: str, criteria: Criteria, task_source: str | None = None) -> dict[str, list[Finding]]:
    """Findings per scan check (every check in SCAN_CHECKS is a key; empty list = passed)."""
    out: dict[str, list[Finding]] = {name: [] for name in SCAN_CHECKS}
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        out["candidate_file"].append(Finding("candidate_file", exc.lineno or 0, f"does not parse: {exc.msg}"))
        return out
    mine = _signatures(tree, "ModelNew")
    if mine is None:
        out["candidate_file"].append(Finding("candidate_file", 0, "defines no class ModelNew at module level"))
    elif "forward" not in mine:
        out["candidate_file"].append(Finding("candidate_file", 0, "ModelNew defines no forward method"))
    elif task_source is not None:
        try:
            theirs = _signatures(ast.parse(task_source), "Model") or {}
        except SyntaxError:
            theirs = {}
        for method in ("__init__", "forward"):
            a, b = mine.get(method, (0, False)), theirs.get(method, (0, False))
            if not a[1] and not b[1] and a[0] != b[0]:
                out["candidate_file"].append(
                    Finding(
                        "candidate_file", 0, f"ModelNew.{method} takes {a[0]} argument(s), Model.{method} takes {b[0]}"
                    )
                )
    scanner = Scanner(criteria)
    scanner.visit(tree)
    for f in scanner.findings + scan_cpp(_cpp_texts(tree), criteria):
        out[f.check].append(f)
    for name in out:
        seen, unique = set(), []
        for f in out[name]:
            if (f.line, f.message) not in seen:
                seen.add((f.line, f.message))
                unique.append(f)
        out[name] = unique
    return out
