"""What a candidate's own shared libraries import, judged from `nm -D --undefined-only -C`.

Every ATen op called from C++ goes through an `at::_ops::<op>::call` symbol that the library
must import from libtorch, however the source spelled it (macros, templates, a std::thread or
an OpenMP region): so the binary, not the text, says which torch ops the kernel can call.
Direct kernels (at::native::..., at::cpu::...) skip the dispatcher and the op recorder, so
they are refused outright, as are the dispatcher and recorder themselves, dynamic symbol
lookup, and threads, processes, signals, exits and sockets.

That rule only covers what goes through at::_ops. torch's libraries export much more that runs
a kernel with no dispatcher (so no op is recorded): the AOTInductor C shim (aoti_torch_cpu_*,
about 170 ATen kernels as plain C functions), MKL's BLAS (sgemm_), oneDNN, fbgemm. So a symbol
the candidate takes from torch's own libraries must also be on a short list of what a kernel
needs: C++ in the at/c10/torch/caffe2 namespaces (tensor metadata, checks, allocation through
at::_ops), the pybind11 glue, libstdc++ bits torch re-exports, and Sleef's vector math (what
at::vec's inline code calls). Anything else from torch is refused.
"""

from __future__ import annotations

import re
import subprocess
from functools import lru_cache
from pathlib import Path

from assay.verifiers.kernel.criteria import Criteria

OPS = re.compile(r"\bat::_ops::(\w+)::(call|redispatch)\b")
DIRECT = re.compile(
    r"\bat::(native|cpu|compositeexplicitautograd|compositeimplicitautograd|"
    r"compositeexplicitautogradnonfunctional|meta|_ops::\w+::redispatch)\b"
)
RECORDER = re.compile(
    r"\b(at::(addGlobalCallback|addThreadLocalCallback|removeCallback|clearCallbacks|"
    r"clearGlobalCallbacks|clearThreadLocalCallbacks|enableRecordFunction|RecordFunctionGuard|"
    r"DisableRecordFunctionGuard)|c10::impl::tls_set_dispatch_key_\w+|c10::impl::_force_tls\w*|"
    r"c10::impl::IncludeDispatchKeyGuard|c10::impl::ExcludeDispatchKeyGuard::(?!~?ExcludeDispatchKeyGuard\()|"
    r"c10::Dispatcher\b|torch::jit::)"
)
# ExcludeDispatchKeyGuard's constructor and destructor are allowed: torch::empty, torch::zeros
# and the other C++ frontend factories take that guard (AutoDispatchBelowADInplaceOrView) inline,
# so an honest load_inline candidate imports it without naming it. It only narrows which kernel
# an op dispatches to, and every op the library can call is on the allocation list (at::_ops
# above), so it reaches no compute. Naming it, or any dispatch key, in the source is still refused
# (scan.CPP_DYNAMIC); including keys (the Python key, say) or setting the key sets by hand is not.
LIBC = {
    "dlopen": "loads libraries at run time",
    "dlmopen": "loads libraries at run time",
    "dlsym": "looks symbols up at run time",
    "dlvsym": "looks symbols up at run time",
    # The loaded libraries' headers and symbol tables, walked without dlsym: torch's C kernels
    # (aoti_torch_cpu_*) found that way run with no dispatcher and no op record.
    "dl_iterate_phdr": "walks the loaded libraries",
    "dladdr": "maps addresses to libraries",
    "dladdr1": "maps addresses to libraries",
    "dlinfo": "reads the loaded libraries' tables",
    "getauxval": "reads the process's auxiliary vector (its program headers)",
    "_r_debug": "reads the dynamic linker's list of loaded libraries",
    "_dl_debug_state": "reads the dynamic linker's state",
    # Signal masks and CPU timers: the verifier samples the timed candidate's threads on SIGPROF.
    "sigprocmask": "masks signals",
    "pthread_sigmask": "masks signals",
    "sigsuspend": "waits for signals",
    "sigwait": "waits for signals",
    "sigwaitinfo": "waits for signals",
    "sigtimedwait": "waits for signals",
    "signalfd": "reads signals",
    "setitimer": "sets timers",
    "alarm": "sets timers",
    "timer_settime": "sets timers",
    "timer_delete": "deletes timers",
    "pthread_kill": "sends signals",
    "tgkill": "sends signals",
    "sigqueue": "sends signals",
    "pthread_create": "starts threads",
    "fork": "starts processes",
    "vfork": "starts processes",
    "clone": "starts processes",
    "system": "runs commands",
    "popen": "runs commands",
    "execv": "runs programs",
    "execve": "runs programs",
    "execvp": "runs programs",
    "execl": "runs programs",
    "execlp": "runs programs",
    "posix_spawn": "starts processes",
    "posix_spawnp": "starts processes",
    "kill": "sends signals",
    "raise": "raises signals",
    "signal": "installs signal handlers",
    "sigaction": "installs signal handlers",
    "_exit": "ends the process",
    "_Exit": "ends the process",
    "exit": "ends the process",
    "quick_exit": "ends the process",
    "socket": "opens sockets",
    "connect": "opens connections",
    "syscall": "makes raw system calls",
    "ptrace": "traces processes",
    "process_vm_readv": "reads other processes' memory",
    "process_vm_writev": "writes other processes' memory",
    # Descriptors and threads of libc's own: the harness's channels share the process (see
    # worker.AuditLine), so a kernel has no business reading a pipe without taking (tee), moving
    # data between descriptors, copying or replacing one, opening one again through /proc, or
    # having libc call it back on a thread (timers, asynchronous I/O) after it returned.
    "tee": "reads pipes without taking",
    "splice": "moves data between descriptors",
    "vmsplice": "moves data into pipes",
    "dup": "copies file descriptors",
    "dup2": "replaces file descriptors",
    "dup3": "replaces file descriptors",
    "open": "opens files",
    "open64": "opens files",
    "openat": "opens files",
    "openat64": "opens files",
    "__open_2": "opens files",
    "__open64_2": "opens files",
    "__openat_2": "opens files",
    "creat": "opens files",
    "creat64": "opens files",
    "fopen": "opens files",
    "fopen64": "opens files",
    "freopen": "opens files",
    "fdopen": "opens files",
    "socketpair": "opens sockets",
    "pipe": "opens pipes",
    "pipe2": "opens pipes",
    "timer_create": "runs code on a thread of its own",
    "mq_notify": "runs code on a thread of its own",
    "aio_read": "runs work after return",
    "aio_write": "runs work after return",
    "aio_read64": "runs work after return",
    "aio_write64": "runs work after return",
    "lio_listio": "runs work after return",
    "prctl": "changes the process's attributes",
}

# Namespaces of C++ symbols a candidate may take from torch's libraries (still judged by the
# rules above); the global namespace only for the Python wrappers pybind11's casters use.
TORCH_NAMESPACES = {"at", "c10", "torch", "caffe2", "pybind11", "std", "__gnu_cxx"}
TORCH_GLOBAL_CXX = {"THPVariable_Wrap", "THPVariable_Unpack", "THPVariable_Check"}
# ...but not these, which run kernels with no dispatcher (functionalization and functorch
# wrappers, BLAS, AOTInductor's and lazy tensors' runtimes), load libraries, or register ops.
TORCH_DENIED_CXX = re.compile(
    r"^(at::(functionalization|functorch|blas|mkldnn|compositeimplicitautogradnestedtensor|"
    r"DynamicLibrary)|torch::(aot_inductor|inductor|lazy|dynamo|profiler|Library|"
    r"CppFunction|class_))\b"
)
# Plain C symbols from torch's libraries: only Sleef's math (at::vec's exp, log... inline to it).
TORCH_C_ALLOWED = re.compile(r"^(Sleef_\w+|THPVariableClass)$")
TORCH_LIBS = ("libc10*.so*", "libtorch*.so*", "libshm*.so*")
SPECIAL = (
    "vtable for ",
    "typeinfo for ",
    "typeinfo name for ",
    "VTT for ",
    "guard variable for ",
    "construction vtable for ",
    "non-virtual thunk to ",
    "virtual thunk to ",
)


@lru_cache(maxsize=4)
def torch_exports(lib_dir: str | None = None) -> frozenset[str]:
    """Demangled names of what torch's shared libraries define (nm -D --defined-only -C)."""
    if lib_dir is None:
        import torch

        lib_dir = str(Path(torch.__file__).parent / "lib")
    files = sorted({str(f) for pattern in TORCH_LIBS for f in Path(lib_dir).glob(pattern) if f.is_file()})
    if not files:
        return frozenset()
    out = subprocess.run(["nm", "-D", "--defined-only", "-C", *files], capture_output=True, text=True, timeout=120)
    names = set()
    for line in out.stdout.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and len(parts[1]) == 1:
            names.add(parts[2].split("@", 1)[0])
    return frozenset(names)


def _qualified(symbol: str) -> str:
    """The qualified name of a demangled symbol, without its return type and parameters
    ("float* at::TensorBase::data_ptr<float>() const" -> "at::TensorBase::data_ptr<float>")."""
    for prefix in SPECIAL:
        if symbol.startswith(prefix):
            symbol = symbol[len(prefix) :]
    depth, space, end = 0, -1, len(symbol)
    for i, ch in enumerate(symbol):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0 and ch == " ":
            space = i
        elif depth == 0 and ch == "(":
            end = i
            break
    return symbol[space + 1 : end] if space < end else symbol[:end]


def judge_torch_symbol(symbol: str) -> str | None:
    """Why a symbol defined by torch's libraries may not be imported; None when it may."""
    bare = symbol.split("@", 1)[0]
    if bare.startswith("aoti_torch_"):
        return f"imports {bare} (the AOTInductor C shim: runs torch's kernels without the dispatcher)"
    name = _qualified(bare)
    if "::" not in name and "(" not in bare:
        if TORCH_C_ALLOWED.match(name):
            return None
        return f"imports {bare[:120]} from torch's libraries (a kernel or library outside the dispatcher)"
    ns = name.split("::", 1)[0] if "::" in name else ""
    if ns in TORCH_NAMESPACES and not TORCH_DENIED_CXX.match(name):
        return None
    if ns == "" and name in TORCH_GLOBAL_CXX:
        return None
    return f"imports {bare[:120]} from torch's libraries (outside the at/c10/torch API a kernel needs)"


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


def judge_symbols(nm_output: str, criteria: Criteria, torch_defined: frozenset[str] | None = None) -> list[str]:
    """Problems found in the undefined symbols nm lists; [] when the libraries are clean.
    torch_defined: what torch's libraries define (default: this process's torch)."""
    # The contractions too: which ones, on which sizes, is the op recorder's to judge
    # (contractions.py); the binary only says which ops it can call.
    ok = allowed_structs(tuple(criteria.ops.allowed) + tuple(criteria.ops.contractions))
    if torch_defined is None:
        torch_defined = torch_exports()
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
        # aoti_torch_* by name too, in case torch's own listing could not be read.
        if bare in torch_defined or bare.startswith("aoti_torch_"):
            why = judge_torch_symbol(bare)
            if why:
                add(why)
    return problems
