"""What a candidate's own shared libraries import, judged from `nm -D --undefined-only -C`.

Every ATen op called from C++ goes through an `at::_ops::<op>::call` symbol that the library
must import from libtorch, however the source spelled it (macros, templates, a std::thread or
an OpenMP region): so the binary, not the text, says which torch ops the kernel can call.
Direct kernels (at::native::..., at::cpu::...) skip the dispatcher and the op recorder, so
they are refused outright, as are the dispatcher and recorder themselves, dynamic symbol
lookup, and threads, processes, signals, exits and sockets.
"""

from __future__ import annotations

import re
from functools import lru_cache

from assay.verifiers.criteria import Criteria

OPS = re.compile(r"\bat::_ops::(\w+)::(call|redispatch)\b")
DIRECT = re.compile(r"\bat::(native|cpu|compositeexplicitautograd|compositeimplicitautograd|"
                    r"compositeexplicitautogradnonfunctional|meta|_ops::\w+::redispatch)\b")
RECORDER = re.compile(r"\b(at::(addGlobalCallback|addThreadLocalCallback|removeCallback|clearCallbacks|"
                      r"clearGlobalCallbacks|clearThreadLocalCallbacks|enableRecordFunction|RecordFunctionGuard|"
                      r"DisableRecordFunctionGuard)|c10::impl::tls_set_dispatch_key_\w+|"
                      r"c10::impl::ExcludeDispatchKeyGuard|c10::Dispatcher\b|torch::jit::)")
LIBC = {
    "dlopen": "loads libraries at run time", "dlmopen": "loads libraries at run time",
    "dlsym": "looks symbols up at run time", "dlvsym": "looks symbols up at run time",
    "pthread_create": "starts threads", "fork": "starts processes", "vfork": "starts processes",
    "clone": "starts processes", "system": "runs commands", "popen": "runs commands",
    "execv": "runs programs", "execve": "runs programs", "execvp": "runs programs", "execl": "runs programs",
    "execlp": "runs programs", "posix_spawn": "starts processes", "posix_spawnp": "starts processes",
    "kill": "sends signals", "raise": "raises signals", "signal": "installs signal handlers",
    "sigaction": "installs signal handlers", "_exit": "ends the process", "_Exit": "ends the process",
    "exit": "ends the process", "quick_exit": "ends the process", "socket": "opens sockets",
    "connect": "opens connections", "syscall": "makes raw system calls", "ptrace": "traces processes",
    "process_vm_readv": "reads other processes' memory", "process_vm_writev": "writes other processes' memory",
}


@lru_cache(maxsize=8)
def allowed_structs(allowed_ops: tuple[str, ...]) -> frozenset[str]:
    """at::_ops struct names (op, or op_overload) of the allowed aten ops, from torch's schemas."""
    import torch

    names = set()
    wanted = set(allowed_ops)
    for schema in torch._C._jit_get_all_schemas():
        if schema.name in wanted:
            base = schema.name.split("::", 1)[1]
            names.add(f"{base}_{schema.overload_name}" if schema.overload_name else base)
    return frozenset(names)


def judge_symbols(nm_output: str, criteria: Criteria) -> list[str]:
    """Problems found in the undefined symbols nm lists; [] when the libraries are clean."""
    ok = allowed_structs(tuple(criteria.ops.allowed))
    problems: list[str] = []
    seen: set[str] = set()

    def add(message: str) -> None:
        if message not in seen:
            seen.add(message)
            problems.append(message)

    for raw in nm_output.splitlines():
        line = raw.strip()
        if not line.startswith("U "):
            continue
        symbol = line[2:].strip()
        bare = symbol.split("@", 1)[0]
        for m in OPS.finditer(symbol):
            if m.group(2) == "redispatch":
                add(f"imports at::_ops::{m.group(1)}::redispatch (skips the dispatcher's recording)")
            elif m.group(1) not in ok:
                add(f"imports the torch op at::_ops::{m.group(1)} (not allocation)")
        d = DIRECT.search(symbol)
        if d:
            add(f"imports a torch kernel directly ({symbol[:120]})")
        r = RECORDER.search(symbol)
        if r:
            add(f"imports {r.group(0)} (the dispatcher or op recording)")
        if bare in LIBC:
            add(f"imports {bare} ({LIBC[bare]})")
        if bare.startswith("std::thread") or "std::thread::_M_start_thread" in symbol:
            add("imports std::thread (starts threads)")
    return problems
