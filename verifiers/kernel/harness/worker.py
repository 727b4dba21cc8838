"""assay kernel verifier: the worker, one process inside a verification sandbox.

Standalone on purpose: it imports torch, numpy, safetensors and the standard library, never
assay (assay's source is not bound into sandboxes). The verifier runs it as

    python -I -B worker.py PLAN_FD EVENT_FD      (under supervisor.py: plan and commands on
                                                  stdin, events as JSON lines on EVENT_FD)
    python -I -B worker.py --plain               (reference roles: plan on stdin, report on stdout)

Roles:
  reference  the task's Model on every run the verifier planned: inputs and expected outputs
  warm       torch.compile of the task's Model once, so the inductor cache is filled
  check      the candidate on every run, gathering the evidence the verifier judges
  time-ref   trusted timing subjects: eager Model, compiled Model, a plain copy of the task's bytes
  time-cand  the candidate as a timing subject

Nothing this process says about a candidate is trusted by itself when the candidate runs in it:
outputs are compared in the verifier's own process, clocks are read by the supervisor, and
the checks made here (integrity, aliasing, threads) are a second line behind those.
"""

from __future__ import annotations

import _thread
import bisect
import builtins
import contextlib
import hashlib
import json
import os
import sys
import threading
import time
import traceback
import types

# The shared harness (verifiers/common/harness, bound at /assay/common/harness): how every kind's
# judge loads a submitted file. Same relative place in the checkout and in the sandbox.
_COMMON = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "common", "harness"
)
sys.path.insert(0, _COMMON)
from assay_harness import load_entry as load_module  # noqa: E402

sys.path.remove(_COMMON)

# Bound before any task or candidate code runs.
_write = os.write
_read = os.read
_exit = os._exit
_dumps = json.dumps
# CPU time of every thread this process ran, the ones that have ended too (per-thread files
# vanish with their thread).
_process_cpu_ns = time.clock_gettime_ns
_PROCESS_CPU = time.CLOCK_PROCESS_CPUTIME_ID

# dtype -> (int dtype of the same width, 3 in the exponent field): adding it multiplies a value
# by 8 and keeps its sign, so the input stays in the task's domain but the output moves.
EXPONENT_STEP = {
    "float32": ("int32", 3 << 23),
    "float64": ("int64", 3 << 52),
    "float16": ("int16", 3 << 10),
    "bfloat16": ("int16", 3 << 7),
}
FLOATS = tuple(EXPONENT_STEP)
MAX_FRESH = 8192  # fresh inputs a round may hold (FreshInputs.SPREAD offsets tell them apart)
FRESH_SLOTS = 1 << 16  # a fresh round's answers: the next input's index + its salt * FRESH_SLOTS
POISON = {
    "float32": ("int32", 0x7FC0FFEE),
    "float64": ("int64", 0x7FF8DEADBEEFF00D),
    "float16": ("int16", 0x7E5A),
    "bfloat16": ("int16", 0x7FDA),
}


def _nondumpable() -> None:
    """A trusted worker cannot be ptraced or have its /proc/PID/mem opened by the candidate."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
    except Exception:
        pass


class Channel:
    def __init__(self, event_fd: int | None):
        self.fd = event_fd
        self.stdin = sys.stdin.buffer

    def event(self, name: str, **fields) -> None:
        line = _dumps({**fields, "ev": name}, separators=(",", ":"), default=str) + "\n"
        data = line.encode()
        if self.fd is None:
            return
        while data:
            n = _write(self.fd, data)
            data = data[n:]

    def command(self) -> dict:
        line = self.stdin.readline()
        if not line:
            _exit(0)  # the supervisor is gone
        return json.loads(line)


# ---------------------------------------------------------------------------------- tasks


def jsonable(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    raise TypeError(f"{type(value).__name__} is not a plain value")


def dtype_name(t) -> str:
    return str(t.dtype).removeprefix("torch.")


def save_tensors(path: str, tensors: dict) -> None:
    from safetensors.torch import save_file

    tmp = path + ".part"
    save_file({k: v.detach().contiguous() for k, v in tensors.items()}, tmp)
    os.replace(tmp, path)


def load_inputs(path: str, specs: list[dict]) -> list:
    from safetensors.torch import load_file

    tensors = load_file(path)
    args = []
    for spec in specs:
        args.append(tensors[spec["key"]] if spec["kind"] == "tensor" else spec["value"])
    return args


def describe_inputs(inputs) -> tuple[list[dict], dict]:
    import torch

    specs, tensors = [], {}
    for i, value in enumerate(inputs):
        if isinstance(value, torch.Tensor):
            key = f"in_{i}"
            tensors[key] = value
            specs.append({"kind": "tensor", "key": key, "dtype": dtype_name(value), "shape": list(value.shape)})
        else:
            specs.append({"kind": "value", "value": jsonable(value)})
    return specs, tensors


def outputs_of(out):
    """The output as a list of tensors, or None when it is not a tensor or a plain tuple/list of them."""
    import torch

    if type(out) is torch.Tensor:
        return [out]
    if type(out) in (tuple, list) and all(type(o) is torch.Tensor for o in out):
        return list(out)
    return None


def nbytes(t) -> int:
    return t.numel() * t.element_size()


# ------------------------------------------------------------------------- reference roles


def role_reference(plan: dict) -> dict:
    """Every planned run: seeded inputs from get_inputs(), the Model's outputs, both saved."""
    import torch

    torch.set_grad_enabled(False)
    report = {"runs": []}
    tasks: dict = {}
    for run in plan["runs"]:
        entry = {"id": run["id"], "ok": False}
        report["runs"].append(entry)
        try:
            key = _dumps(run["overrides"], sort_keys=True)
            if key not in tasks:
                tasks[key] = load_module(plan["task"], f"assay_task_{len(tasks)}", run["overrides"])
            task = tasks[key]
            init_args = jsonable(list(task.get_init_inputs()))
            torch.manual_seed(run["seed"])
            inputs = list(task.get_inputs())
            torch.manual_seed(plan["init_seed"])
            model = task.Model(*init_args)
            out = model(*inputs)
            outs = outputs_of(out)
            if outs is None:
                raise TypeError(f"the task's Model returned {type(out).__name__}, not a tensor or tuple of tensors")
            specs, tensors = describe_inputs(inputs)
            save_tensors(os.path.join(plan["inputs_dir"], f"run_{run['id']}.safetensors"), tensors)
            save_tensors(
                os.path.join(plan["expected_dir"], f"run_{run['id']}.safetensors"),
                {f"out_{j}": o for j, o in enumerate(outs)},
            )
            params = sum(nbytes(p) for p in list(model.parameters()) + list(model.buffers()))
            entry.update(
                ok=True,
                init_args=init_args,
                inputs=specs,
                outputs=[
                    {"key": f"out_{j}", "dtype": dtype_name(o), "shape": list(o.shape)} for j, o in enumerate(outs)
                ],
                output_kind="tensor" if type(out) is torch.Tensor else "tuple",
                min_bytes=sum(nbytes(t) for t in tensors.values()) + sum(nbytes(o) for o in outs) + params,
            )
        except Exception as exc:
            entry["error"] = "".join(traceback.format_exception_only(type(exc), exc)).strip()[-2000:]
    return report


def role_warm(plan: dict) -> dict:
    """torch.compile the task's Model on the first run's inputs, so later runs find the cache."""
    import torch

    torch.set_grad_enabled(False)
    task = load_module(plan["task"], "assay_task", {})
    torch.manual_seed(plan["init_seed"])
    if plan.get("inputs_file"):
        model = task.Model(*plan["init_args"])
        args = load_inputs(plan["inputs_file"], plan["inputs"])
    else:
        # The warm-up beside the agent has no reference run: the task's own inputs have the
        # shapes and dtypes the verification's first run will have, which is what the cache keys on.
        model = task.Model(*task.get_init_inputs())
        args = list(task.get_inputs())
    started = time.monotonic()
    compiled, out = compile_model(torch, model, args)
    ref = model(*args)
    outs, refs = outputs_of(out), outputs_of(ref)
    # As many outputs as eager's, each close: a compiled Model that drops an output does not match.
    same = (
        outs is not None
        and refs is not None
        and len(outs) == len(refs)
        and all(torch.allclose(a, b, atol=1e-3, rtol=1e-3, equal_nan=True) for a, b in zip(outs, refs, strict=True))
    )
    return {"ok": True, "seconds": time.monotonic() - started, "matches_eager": bool(same)}


def compile_model(torch, model, args):
    """torch.compile of MODEL, run once on ARGS (which compiles it, or loads it from the cache).
    Inductor is told the CPU's own list of vector ISAs is good when the compiler accepts each
    one's flags (trust_cpu_vec_isas); if a compile fails that way, it is compiled again with
    inductor's own probes."""
    trust_cpu_vec_isas()
    compiled = torch.compile(model)
    try:
        return compiled, compiled(*args)
    except Exception:
        from torch._inductor import config, cpu_vec_isa

        if config.cpp.vec_isa_ok is not True:
            raise
        config.cpp.vec_isa_ok = None
        cpu_vec_isa.valid_vec_isa_list.cache_clear()
        torch._dynamo.reset()
    compiled = torch.compile(model)
    return compiled, compiled(*args)


def trust_cpu_vec_isas() -> None:
    """A machine's first inductor compile builds and loads a test library of ATen's vector
    headers for every vector ISA the CPU lists (three g++ runs here, 8-10 s of a 17 s compile) to
    learn which ones the compiler can target. Asking the compiler whether it accepts each ISA's
    flags takes milliseconds; when it accepts all, inductor is told the CPU's list is good
    (config.cpp.vec_isa_ok), picks the same ISA and generates the same kernels. Any doubt (a
    flag refused, an inductor without these internals) leaves inductor's own probes in place."""
    try:
        import platform
        import subprocess

        from torch._inductor import config, cpu_vec_isa
        from torch._inductor.cpp_builder import get_cpp_compiler

        if config.cpp.vec_isa_ok is not None or platform.machine() not in ("x86_64", "AMD64"):
            return
        listed = cpu_vec_isa.x86_isa_checker()
        isas = [isa for isa in cpu_vec_isa.supported_vec_isa_list if all(f in listed for f in str(isa).split())]
        cxx = get_cpp_compiler()
        for isa in isas:
            probe = subprocess.run(
                [cxx, *isa.build_arch_flags().split(), "-x", "c++", "-c", "-o", os.devnull, "-"],
                input=b"int main() { return 0; }\n",
                capture_output=True,
                timeout=60,
            )
            if probe.returncode != 0:
                return
        config.cpp.vec_isa_ok = True
    except Exception:
        return


# ------------------------------------------------------------------------ candidate loading


class OpWatch:
    """The op recorder (harness/opwatch.cpp) through its C functions. It counts its own arm and
    disarm calls; a count that differs from the harness's means something else switched it."""

    def __init__(self, path: str):
        import ctypes

        lib = ctypes.CDLL(path)
        self._arm, self._disarm = lib.assay_opwatch_arm, lib.assay_opwatch_disarm
        self._take = lib.assay_opwatch_take
        self._take.argtypes, self._take.restype = [ctypes.c_char_p, ctypes.c_longlong], ctypes.c_longlong
        self._switches = lib.assay_opwatch_switches
        self._switches.restype = ctypes.c_longlong
        self._installed = lib.assay_opwatch_installed
        self._record_off = lib.assay_opwatch_record_off
        self._record_off.restype = ctypes.c_longlong
        self._scopes = lib.assay_opwatch_scopes
        self._scopes.argtypes = [ctypes.c_char_p]
        self.contracted: dict = {"roots": {}, "inside": {}}
        self._buffer = ctypes.create_string_buffer(1 << 16)
        self._create = ctypes.create_string_buffer
        self.switched = 0
        self.record_switched_off = 0
        lib.assay_opwatch_install()
        self._guard_record_switch()

    def _guard_record_switch(self) -> None:
        """Count calls that switch RecordFunction off through Python (the recorder's callback
        then never runs on that thread). The arm/disarm probe misses a candidate that switches
        it off and on again inside forward; this sees it. The harness itself never calls it."""
        import torch

        original = torch._C._autograd._enable_record_function  # pyright: ignore[reportAttributeAccessIssue]  # the private switch the recorder guards

        def switch(enable: bool) -> None:
            if not enable:
                self.record_switched_off += 1
            return original(enable)

        torch._C._autograd._enable_record_function = switch  # pyright: ignore[reportAttributeAccessIssue]  # the private switch the recorder guards
        torch.autograd._enable_record_function = switch  # pyright: ignore[reportPrivateImportUsage]  # torch re-exports it, unlisted

    def arm(self) -> None:
        self.switched += 1
        self._arm()

    def disarm(self) -> None:
        self.switched += 1
        self._disarm()

    def installed(self) -> bool:
        return bool(self._installed())

    def tampered(self) -> bool:
        return self._switches() != self.switched

    def record_was_off(self) -> bool:
        """RecordFunction was off on the forward thread at an arm or disarm."""
        return self._record_off() > 0

    def scopes(self, names: list[str]) -> None:
        """The contractions' op names: ops inside them are recorded apart (see opwatch.cpp)."""
        self._scopes("\n".join(names).encode())

    def take(self) -> tuple[dict, dict]:
        """(ops on the arming thread while armed, outside contractions, ops on other threads)
        since the last take; the contractions opened from outside one, and the ops that ran inside
        them, as {"roots": {"name(sizes)": n}, "inside": {"name": n}}, go to self.contracted."""
        n = self._take(self._buffer, len(self._buffer))
        while n < 0:
            self._buffer = self._create(-n * 2)
            n = self._take(self._buffer, len(self._buffer))
        mine: dict = {}
        other: dict = {}
        self.contracted = {"roots": {}, "inside": {}}
        for line in self._buffer.raw[:n].decode("utf-8", "replace").splitlines():
            key, _, count = line[1:].rpartition("\t")
            if line[0] in "rn":
                part = self.contracted["roots" if line[0] == "r" else "inside"]
                part[key] = part.get(key, 0) + int(count)
                continue
            into = mine if line[0] == "w" else other
            into[key] = into.get(key, 0) + int(count)
        return mine, other


def load_opwatch(path: str) -> OpWatch:
    return OpWatch(path)


class CtypesWatch:
    """Every function the candidate takes through ctypes, with the file its code lies in.

    torch's own libraries export kernels as plain C functions (the AOTInductor shim's
    aoti_torch_cpu_*, BLAS): called through ctypes they run with no dispatcher, so the op
    recorder sees nothing, and the candidate's own library, whose imports are judged, is not
    involved. The verifier refuses any function from a library the candidate did not build,
    and any such library opened at all (an opened library also gives up its symbols' addresses
    through c_void_p.in_dll, which makes no function object). CDLL.__init__ and __getitem__
    (attribute access too) are hooked before the candidate is imported, and each library's
    _FuncPtr class is wrapped, so a function made and dropped inside forward is seen; function
    objects made another way (a prototype) are found alive at take(). An opened library is
    reported as function ""."""

    def __init__(self):
        import ctypes

        self._ctypes = ctypes
        self._seen: dict[tuple[str, str], int] = {}
        dlinfo = ctypes.CDLL(None).dlinfo
        dlinfo.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
        self._dlinfo = dlinfo
        # Function objects already judged, held so that their ids are not reused; those alive
        # before the candidate (the harness's own, torch's, dlinfo above) are not the candidate's.
        self._counted: dict[int, object] = {id(f): f for f in self._alive()}
        original_init, original_getitem = ctypes.CDLL.__init__, ctypes.CDLL.__getitem__
        watch = self

        def __init__(dll, *args, **kwargs):
            original_init(dll, *args, **kwargs)
            watch._opened(dll)

            base = dll._FuncPtr

            class _FuncPtr(base):  # every function made from this library, dropped or not
                _flags_, _restype_ = base._flags_, base._restype_

                def __init__(func, *args):  # noqa: N805  # pyright: ignore[reportSelfClsParameterName]  # `func`: the function pointer being made (the enclosing method names its own self `watch`)
                    what = args[0] if args else None
                    watch._saw(func, what[0] if isinstance(what, tuple) and what else "?")

            dll._FuncPtr = _FuncPtr

        def __getitem__(dll, name_or_ordinal):
            func = original_getitem(dll, name_or_ordinal)
            watch._saw(func, name_or_ordinal)
            return func

        ctypes.CDLL.__init__, ctypes.CDLL.__getitem__ = __init__, __getitem__  # pyright: ignore[reportAttributeAccessIssue]  # the watch wraps ctypes' loader on purpose

    def _opened(self, dll) -> None:
        """The file dlopen gave this CDLL, from the dynamic linker's own record (a name like
        "libtorch_cpu.so" finds the copy torch already loaded)."""
        ctypes = self._ctypes
        link_map = (ctypes.c_void_p * 2)()  # struct link_map *: l_addr, then l_name
        pointer = (ctypes.c_void_p * 1)()
        path = "?"
        if self._dlinfo(dll._handle, 2, pointer) == 0 and pointer[0]:  # RTLD_DI_LINKMAP
            ctypes.memmove(link_map, pointer[0], ctypes.sizeof(link_map))
            name = ctypes.string_at(link_map[1]) if link_map[1] else b""
            path = os.path.realpath(name.decode("utf-8", "replace")) if name else "?"
        self._note(path, "")

    def _note(self, path: str, name: str) -> None:
        self._seen[(path, name)] = self._seen.get((path, name), 0) + 1

    def _address(self, func) -> int:
        return self._ctypes.cast(func, self._ctypes.c_void_p).value or 0

    def _alive(self) -> list:
        import gc

        # type(), not isinstance: isinstance reads __class__, which a candidate's object may compute.
        kind = self._ctypes._CFuncPtr  # pyright: ignore[reportAttributeAccessIssue]  # ctypes' function-pointer base, private but stable since 2.5
        return [obj for obj in gc.get_objects() if issubclass(type(obj), kind)]

    def _saw(self, func, name) -> None:
        if self._counted.get(id(func)) is func:
            return  # made through the library's _FuncPtr and handed out by __getitem__: once
        self._counted[id(func)] = func
        self._note(_file_at(self._address(func)), str(name))

    def take(self) -> list[list]:
        """[file, function, count] since the last take (function "" for a library opened), with
        function objects alive now that no hook saw made (a prototype applied to a library)."""
        for obj in self._alive():
            self._saw(obj, getattr(obj, "__name__", "?"))
        seen, self._seen = self._seen, {}
        return [[f, n, c] for (f, n), c in sorted(seen.items())]


def _thread_cpu_ns() -> dict[int, int]:
    """CPU time of each thread of this process so far, in ns (schedstat; stat's ticks if absent)."""
    out = {}
    for name in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{name}/schedstat", "rb") as f:
                out[int(name)] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            try:
                with open(f"/proc/self/task/{name}/stat", "rb") as f:
                    fields = f.read().rpartition(b")")[2].split()
                out[int(name)] = (int(fields[11]) + int(fields[12])) * 10**9 // os.sysconf("SC_CLK_TCK")
            except (OSError, ValueError, IndexError):
                continue
    return out


class Sampler:
    """Where the candidate's CPU time goes (harness/sampler.cpp): each thread's program counter
    every `interval_us` of its own CPU time, only inside the candidate's rounds (every thread
    alive when a round starts gets a timer). Each round's CPU time per thread is read too, so a
    thread that ran unsampled (it blocked SIGPROF, or started inside the round) or a stopped
    timer shows against the time it used; and the whole process's, so a thread that started and
    ended inside a round, whose own record is gone by the round's end, shows too."""

    def __init__(self, path: str, interval_us: int):
        import ctypes

        self._ctypes = ctypes
        lib = ctypes.CDLL(path)
        self._arm, self._disarm = lib.assay_sampler_arm, lib.assay_sampler_disarm
        self._intact, self._take = lib.assay_sampler_intact, lib.assay_sampler_take
        self._take.restype = ctypes.c_long
        self._take.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
        self._arm.argtypes = [ctypes.c_void_p, ctypes.c_int]
        self.interval_ns = interval_us * 1000
        self.started = lib.assay_sampler_start(ctypes.c_long(interval_us)) == 0
        self.cpu_ns: dict[int, int] = {}  # per thread, inside the armed windows
        self.process_ns = 0  # all threads, ended ones too, inside the windows
        self._process_before = 0
        self.stopped = 0  # timers found stopped at a window's end
        self.calls = 0  # forward calls inside the windows
        self._before: dict[int, int] = {}

    def arm(self, calls: int) -> None:
        self.calls += calls
        self._before = _thread_cpu_ns()
        threads = list(self._before)
        self._process_before = _process_cpu_ns(_PROCESS_CPU)
        self._arm((self._ctypes.c_int * len(threads))(*threads), len(threads))

    def disarm(self) -> None:
        self.stopped += self._disarm()
        self.process_ns += _process_cpu_ns(_PROCESS_CPU) - self._process_before
        after = _thread_cpu_ns()
        for tid, ns in after.items():
            self.cpu_ns[tid] = self.cpu_ns.get(tid, 0) + ns - self._before.get(tid, 0)

    def report(self) -> dict:
        """{"samples": [[file, offset in the file's mapping or -1, intervals of CPU time, 1 if
        taken inside one of the reference's contractions]],
        "problems": [...], "interval_us", "calls", "cpu_ms", "sampled_ms", "ended_ms", "count"};
        offsets only for torch's files, the rest by file. ended_ms: what the process's CPU clock
        counted inside the windows beyond the threads alive at their ends (each read just outside
        the process's reads, so the live threads' sum is the larger one unless threads ended)."""
        c = self._ctypes
        cap = 1 << 17
        pcs, tids, weights = (c.c_ulonglong * cap)(), (c.c_int * cap)(), (c.c_int * cap)()
        scoped = (c.c_ubyte * cap)()
        n = self._take(pcs, tids, weights, scoped, cap) if self.started else 0
        maps, base = _mapped_files()
        starts = [m[0] for m in maps]
        counts: dict[tuple[str, int, int], int] = {}
        per_thread: dict[int, int] = {}
        for i in range(min(n, cap)):
            pc = pcs[i]
            name = _file_in(maps, starts, pc)
            where = (name, pc - base[name], scoped[i]) if "/torch/" in name else (name, -1, scoped[i])
            counts[where] = counts.get(where, 0) + weights[i]
            per_thread[tids[i]] = per_thread.get(tids[i], 0) + weights[i]
        alive_ns = sum(v for v in self.cpu_ns.values() if v > 0)
        ended_ns = max(0, self.process_ns - alive_ns)
        cpu_ns = alive_ns + ended_ns
        sampled_ns = sum(per_thread.values()) * self.interval_ns
        return {
            "samples": [[f, off, k, sc] for (f, off, sc), k in sorted(counts.items())],
            "problems": self._problems(n, cap, cpu_ns, sampled_ns, per_thread),
            "interval_us": self.interval_ns // 1000,
            "calls": self.calls,
            "cpu_ms": round(cpu_ns / 1e6, 1),
            "sampled_ms": round(sampled_ns / 1e6, 1),
            "ended_ms": round(ended_ns / 1e6, 1),
            "count": n,
        }

    def _problems(self, n: int, cap: int, cpu_ns: int, sampled_ns: int, per_thread: dict[int, int]) -> list[str]:
        if not self.started:
            return ["the CPU sampler could not start (its SIGPROF handler was refused)"]
        found = []
        if not self._intact():
            found.append("the CPU sampler's SIGPROF handler was replaced")
        if self.stopped:
            found.append(f"the CPU sampler's timers were found stopped {self.stopped} time(s) at a round's end")
        if n > cap:
            found.append(f"the CPU sampler took {n} samples, more than its {cap} slots")
        if cpu_ns >= 200 * 10**6 and sampled_ns < cpu_ns // 2:
            found.append(
                f"the CPU sampler saw {sampled_ns / 1e6:.0f} ms of the {cpu_ns / 1e6:.0f} ms the candidate's "
                "threads ran (SIGPROF blocked, or its timer tampered with)"
            )
        for tid, ns in self.cpu_ns.items():
            seen = per_thread.get(tid, 0) * self.interval_ns
            if ns >= 100 * 10**6 and seen < ns // 4:
                found.append(
                    f"thread {tid} ran {ns / 1e6:.0f} ms of CPU and was sampled for {seen / 1e6:.0f} ms "
                    "(it blocked SIGPROF, or started inside a round)"
                )
        return found


def _mapped_files() -> tuple[list[tuple[int, int, str]], dict[str, int]]:
    """This process's mappings as sorted (start, end, file or "?"), and each file's lowest
    address (where its offsets count from, as nm's addresses of a shared library do)."""
    maps = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            lo, _, hi = parts[0].partition("-")
            name = parts[5].strip() if len(parts) > 5 and parts[5].startswith("/") else "?"
            maps.append((int(lo, 16), int(hi, 16), name))
    maps.sort()
    base: dict[str, int] = {}
    for lo, _, name in maps:
        base.setdefault(name, lo)
    return maps, base


def _file_at(address: int) -> str:
    """The file mapped at `address` in this process, or "?" (anonymous memory, or none)."""
    try:
        maps, _ = _mapped_files()
    except (OSError, ValueError):
        return "?"
    return _file_in(maps, [m[0] for m in maps], address)


def _file_in(maps: list[tuple[int, int, str]], starts: list[int], address: int) -> str:
    """The file of `maps` (sorted, with their `starts`) that holds `address`, or "?"."""
    j = bisect.bisect_right(starts, address) - 1
    return maps[j][2] if j >= 0 and address < maps[j][1] else "?"


def import_candidate(plan: dict, chan: Channel):
    """Import the candidate and find ModelNew; any failure is reported and ends the process."""
    import torch

    chan.event("importing")
    try:
        module = load_module(plan["candidate"], "candidate")
    except SystemExit as exc:
        chan.event("error", phase="import", kind="exit", detail=f"SystemExit({exc.code!r}) during import")
        _exit(4)
    except BaseException as exc:
        chan.event("error", phase="import", kind="exception", detail=_format(exc))
        _exit(3)
    cls = module.__dict__.get("ModelNew")
    if cls is None:
        chan.event("error", phase="import", kind="model_new", detail="the candidate defines no ModelNew")
        _exit(3)
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        chan.event("error", phase="import", kind="model_new", detail="ModelNew is not an nn.Module subclass")
        _exit(3)
    return cls


def construct(cls, init_args: list, seed: int, chan: Channel):
    import torch

    try:
        torch.manual_seed(seed)
        return cls(*init_args)
    except SystemExit as exc:
        chan.event("error", phase="construct", kind="exit", detail=f"SystemExit({exc.code!r}) in ModelNew()")
        _exit(4)
    except BaseException as exc:
        chan.event("error", phase="construct", kind="model_new", detail="ModelNew(*init_inputs) raised " + _format(exc))
        _exit(3)


def _format(exc: BaseException) -> str:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return text[-3000:]


# ----------------------------------------------------------------------- harness integrity


class Integrity:
    """Identities of what a candidate would patch to fool an in-process harness.

    The decisive comparisons and clocks live outside this process; this check exists so that
    an attempt is reported as what it is, with its own reason."""

    def __init__(self):
        import torch

        self.watch = {}
        for name in (
            "perf_counter",
            "perf_counter_ns",
            "monotonic",
            "monotonic_ns",
            "time",
            "time_ns",
            "process_time",
            "sleep",
        ):
            self.watch[f"time.{name}"] = (time, name)
        for name in ("allclose", "equal", "isclose", "manual_seed", "empty", "empty_like"):
            self.watch[f"torch.{name}"] = (torch, name)
        self.watch["torch.testing.assert_close"] = (torch.testing, "assert_close")
        for name in (
            "__eq__",
            "clone",
            "copy_",
            "data_ptr",
            "untyped_storage",
            "contiguous",
            "view",
            "numpy",
            "detach",
            "__torch_function__",
        ):
            self.watch[f"torch.Tensor.{name}"] = (torch.Tensor, name)
        for name in ("__call__", "_call_impl"):
            self.watch[f"torch.nn.Module.{name}"] = (torch.nn.Module, name)
        # OpWatch's counting wrapper of RecordFunction's switch (put back would count no more).
        self.watch["torch.autograd._enable_record_function"] = (torch.autograd, "_enable_record_function")
        self.watch["torch._C._autograd._enable_record_function"] = (torch._C._autograd, "_enable_record_function")  # pyright: ignore[reportAttributeAccessIssue]  # watched for tampering
        for name in ("write", "read", "_exit", "replace"):
            self.watch[f"os.{name}"] = (os, name)
        self.watch["json.dumps"] = (json, "dumps")
        import ctypes

        for name in ("__init__", "__getitem__"):  # CtypesWatch's hooks
            self.watch[f"ctypes.CDLL.{name}"] = (ctypes.CDLL, name)
        self.watch["hashlib.sha256"] = (hashlib, "sha256")
        self.saved = {
            k: obj.__dict__.get(attr) if isinstance(obj, type) else getattr(obj, attr, None)
            for k, (obj, attr) in self.watch.items()
        }
        self.builtins = dict(vars(builtins))
        self.modules = {n: sys.modules.get(n) for n in ("time", "torch", "os", "json", "builtins", "__main__")}
        main = sys.modules[__name__]
        self.code = {n: f.__code__ for n, f in vars(main).items() if isinstance(f, types.FunctionType)}
        self.funcs = {n: f for n, f in vars(main).items() if isinstance(f, (types.FunctionType, type))}
        self.methods = {}
        for cname, cls in self.funcs.items():
            if isinstance(cls, type) and cls.__module__ == main.__name__:
                for m, f in vars(cls).items():
                    if isinstance(f, types.FunctionType):
                        self.methods[f"{cname}.{m}"] = (cls, m, f, f.__code__)

    def problems(self, opwatch=None) -> list[str]:
        found = []
        for key, (obj, attr) in self.watch.items():
            now = obj.__dict__.get(attr) if isinstance(obj, type) else getattr(obj, attr, None)
            if now is not self.saved[key]:
                found.append(f"{key} was replaced")
        current = vars(builtins)
        for name in set(self.builtins) | set(current):
            if current.get(name, None) is not self.builtins.get(name, None):
                found.append(f"builtins.{name} was changed")
        for name, module in self.modules.items():
            if sys.modules.get(name) is not module:
                found.append(f"sys.modules[{name!r}] was replaced")
        main = sys.modules[__name__]
        for name, func in self.funcs.items():
            if vars(main).get(name) is not func:
                found.append(f"harness function {name} was replaced")
        for name, code in self.code.items():
            if self.funcs[name].__code__ is not code:
                found.append(f"harness function {name}.__code__ was rewritten")
        for name, (cls, attr, func, code) in self.methods.items():
            if vars(cls).get(attr) is not func:
                found.append(f"harness method {name} was replaced")
            elif func.__code__ is not code:
                found.append(f"harness method {name}.__code__ was rewritten")
        if sys.gettrace() is not None or sys.getprofile() is not None:
            found.append("a trace or profile hook is set")
        if getattr(threading, "_trace_hook", None) or getattr(threading, "_profile_hook", None):
            found.append("a threading trace or profile hook is set")
        if opwatch is not None and not opwatch.installed():
            found.append("the op recorder's global callback was removed")
        if opwatch is not None and opwatch.tampered():
            found.append("the op recorder was armed or disarmed from outside the harness")
        if opwatch is not None and opwatch.record_was_off():
            found.append("RecordFunction was switched off on the forward thread (the op recorder saw none of its ops)")
        if opwatch is not None and opwatch.record_switched_off:
            found.append(
                f"the candidate switched RecordFunction off {opwatch.record_switched_off} time(s) "
                "(torch.autograd._enable_record_function(False)): its ops went unrecorded"
            )
        return sorted(set(found))


# ----------------------------------------------------------------------------- check role


def storage_span(t) -> tuple[int, int]:
    st = t.untyped_storage()
    return st.data_ptr(), st.nbytes()


def overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[1] > 0 and b[1] > 0 and a[0] < b[0] + b[1] and b[0] < a[0] + a[1]


def digest(t) -> str:
    import torch

    flat = t.detach().contiguous().view(-1)
    return hashlib.sha256(flat.view(torch.uint8).numpy().tobytes()).hexdigest()


def poison(spec: dict) -> None:
    """Fill and free a block the size of the expected output, so an output whose memory the
    candidate never writes carries a pattern the verifier recognises (the allocator tends to
    hand the same block back)."""
    import torch

    dtype = spec["dtype"]
    if dtype not in POISON:
        return
    int_name, pattern = POISON[dtype]
    block = torch.empty(spec["shape"], dtype=getattr(torch, dtype))
    block.view(getattr(torch, int_name)).fill_(
        pattern if pattern < (1 << (8 * block.element_size() - 1)) else pattern - (1 << (8 * block.element_size()))
    )
    del block


def reference_contractions(plan: dict, opwatch: OpWatch, chan: Channel) -> None:
    """The reference's own contractions (and what runs inside them) on each run's inputs,
    recorded by the same op recorder before the candidate is imported, and sent to the
    supervisor at once: what the candidate's forward may dispatch beyond allocation."""
    import torch

    opwatch.scopes(plan.get("contractions") or [])
    if not plan.get("contractions") or not plan.get("task_source"):
        return
    try:
        made = _reference_records(plan, opwatch, torch)
    except Exception as exc:
        # Recorded nowhere, allowed nowhere: every contraction of the candidate's is then refused.
        chan.event("reference_contractions", runs={}, error=_format(exc))
        return
    chan.event("reference_contractions", runs=made)


def _reference_records(plan: dict, opwatch: OpWatch, torch) -> dict:
    seen: dict = {}
    tasks: dict = {}
    made: dict = {}
    for run in plan["runs"]:
        key = _dumps([run.get("overrides") or {}, run["init_args"], run["inputs"]], sort_keys=True)
        if key not in seen:
            mod_key = _dumps(run.get("overrides") or {}, sort_keys=True)
            if mod_key not in tasks:
                # From the plan's text: no file of the task is where the candidate could read it.
                name = f"assay_ref_task_{len(tasks)}"
                tasks[mod_key] = load_module("task.py", name, run.get("overrides") or {}, plan["task_source"])
                sys.modules.pop(name, None)
            torch.manual_seed(plan["init_seed"])
            model = tasks[mod_key].Model(*run["init_args"])
            args = load_inputs(run["inputs_file"], run["inputs"])
            opwatch.take()
            opwatch.arm()
            try:
                model(*args)
            finally:
                opwatch.disarm()
            opwatch.take()
            seen[key] = opwatch.contracted
            del model, args
        made[str(run["id"])] = seen[key]
    return made


def role_check(plan: dict, chan: Channel) -> None:
    import torch

    torch.set_grad_enabled(False)
    baseline_threads = _thread._count()
    opwatch = load_opwatch(plan["opwatch"])
    reference_contractions(plan, opwatch, chan)
    foreign = CtypesWatch()
    integrity = Integrity()
    cls = import_candidate(plan, chan)
    models: dict = {}
    held_inputs: dict = {}
    held_outputs: list = []
    runs = []
    chan.event("loaded")
    for run in plan["runs"]:
        key = _dumps(run["init_args"])
        if key not in models:
            models[key] = construct(cls, run["init_args"], plan["init_seed"], chan)
        model = models[key]
        fresh = load_inputs(run["inputs_file"], run["inputs"])
        if run.get("reuse_buffers_of") is not None:
            # Same tensors, new values: an output cached by data_ptr or shape shows up as a replay.
            args = held_inputs[run["reuse_buffers_of"]]
            for old, new in zip(args, fresh, strict=True):
                if isinstance(old, torch.Tensor):
                    old.copy_(new)
        else:
            args = fresh
        held_inputs[run["id"]] = args
        tensors_in = [a for a in args if isinstance(a, torch.Tensor)]
        before = [digest(t) for t in tensors_in]
        spans_in = [storage_span(t) for t in tensors_in]
        for spec in run.get("poison", []):
            poison(spec)
        opwatch.take()
        record = {"id": run["id"]}
        runs.append(record)
        chan.event("calling", run=run["id"])
        opwatch.arm()
        try:
            out = model(*args)
        except SystemExit as exc:
            opwatch.disarm()
            chan.event(
                "error",
                phase=f"forward (run {run['id']})",
                kind="exit",
                detail=f"SystemExit({exc.code!r}) raised in forward",
            )
            _exit(4)
        except BaseException as exc:
            opwatch.disarm()
            chan.event("error", phase=f"forward (run {run['id']})", kind="exception", detail=_format(exc))
            _exit(3)
        opwatch.disarm()
        outs = outputs_of(out)
        if outs is None:
            record["output_type"] = _type_name(out)
            if isinstance(out, torch.Tensor) or (type(out) in (tuple, list)):
                record["not_plain"] = True
            chan.event("returned", run=run["id"], py_threads=_thread._count() - baseline_threads)
            chan.command()
            record["ops"], record["foreign_ops"] = opwatch.take()
            record["contracted_ops"] = opwatch.contracted
            continue
        bad_device = [str(o.device) for o in outs if o.device.type != "cpu" or o.layout != torch.strided]
        if bad_device:
            record["bad_device"] = bad_device
            chan.event("returned", run=run["id"], py_threads=_thread._count() - baseline_threads)
            chan.command()
            record["ops"], record["foreign_ops"] = opwatch.take()
            record["contracted_ops"] = opwatch.contracted
            continue
        snaps = [o.detach().clone().contiguous() for o in outs]  # taken the moment forward returns
        record["shapes"] = [list(o.shape) for o in outs]
        record["dtypes"] = [dtype_name(o) for o in outs]
        chan.event("returned", run=run["id"], py_threads=_thread._count() - baseline_threads)
        chan.command()  # the supervisor watched the idle window; now look again
        record["py_threads_after"] = _thread._count() - baseline_threads
        record["changed_after_return"] = any(
            not torch.equal(s.view(-1).view(torch.uint8), o.detach().contiguous().view(-1).view(torch.uint8))
            for s, o in zip(snaps, outs, strict=True)
        )
        spans_out = [storage_span(o) for o in outs]
        record["aliases_input"] = any(overlaps(a, b) for a in spans_out for b in spans_in)
        record["aliases_earlier_output"] = any(overlaps(a, b) for a in spans_out for b in held_outputs)
        record["aliases_other_output"] = any(
            overlaps(spans_out[i], spans_out[j]) for i in range(len(outs)) for j in range(i + 1, len(outs))
        )
        held_outputs.extend(spans_out)
        record["inputs_changed"] = [
            i for i, (t, h) in enumerate(zip(tensors_in, before, strict=True)) if digest(t) != h
        ]
        record["ops"], record["foreign_ops"] = opwatch.take()
        record["contracted_ops"] = opwatch.contracted
        save_tensors(run["out_file"], {f"out_{j}": s for j, s in enumerate(snaps)})
        record["saved"] = True
        # Keep the outputs alive so a later run cannot be handed the same memory unnoticed.
        held_inputs[("out", run["id"])] = outs
    chan.event(
        "finished",
        report={
            "runs": runs,
            "integrity": integrity.problems(opwatch),
            "compilers": compilers(),
            "ctypes_functions": foreign.take(),
        },
    )
    _exit(0)


def compilers() -> list[str]:
    """torch's compilers are not imported by `import torch`; if they are loaded now, the
    candidate had torch write its kernel (torch.compile in __init__ leaves no op to record)."""
    return [m for m in ("torch._dynamo", "torch._inductor") if m in sys.modules]


def _type_name(obj) -> str:
    cls = type(obj)
    return f"{type.__getattribute__(cls, '__module__')}.{type.__getattribute__(cls, '__qualname__')}"


# ---------------------------------------------------------------------------- timing roles


class Perturb:
    """Change one element in every row of the task's largest float input around each timed
    iteration (scaled by 8, the exact bits put back after), so no two iterations see the same
    input: an output cached from an earlier call is wrong, and the supervisor audits one
    iteration's output per round against the eager Model's. Every row, not a few elements: a
    candidate that kept the last input and output and recomputed only the rows that changed
    (tests/verifiers/cheats/input_memo.py, a memcmp per row) was timed doing a compare while
    four elements changed per call (3.1x eager on the warm rounds). A row is the input's last
    dimension, or a block of numel / max_count elements where rows are shorter."""

    def __init__(self, args, max_count: int):
        import numpy as np
        import torch

        self.view = None
        floats = [
            a
            for a in args
            if isinstance(a, torch.Tensor) and dtype_name(a) in EXPONENT_STEP and a.is_contiguous() and a.numel() > 0
        ]
        if not floats:
            return
        target = max(floats, key=lambda t: t.numel())
        int_name, step = EXPONENT_STEP[dtype_name(target)]
        self.bits_dtype = getattr(torch, int_name)
        self.view = self.bits_of(target)
        # Written once now, every page: inputs read from a file may still share its pages, and
        # the first round's changes would take a copy-on-write fault per row (4096 of them).
        np.add(self.view, 0, out=self.view)
        self.step = self.view.dtype.type(step)
        numel = self.view.size
        last = target.shape[-1] if target.dim() >= 2 else 1  # a vector has no rows, only blocks
        block = max(last, -(-numel // max(1, max_count)))
        self.starts = np.arange(0, numel, block, dtype=np.int64)
        self.width = np.minimum(block, numel - self.starts).astype(np.uint64)
        # Each row's position is its own hash of (seed, iteration, row): one row's changed element
        # tells nothing of the others', so finding them all means reading the whole input (a
        # shared offset, found in one row, gave every row's and made updating in place cheap).
        self.rowkey = np.arange(self.starts.size, dtype=np.uint64) * np.uint64(0xD1B54A32D192ED03)
        self._x = np.empty(self.starts.size, dtype=np.uint64)
        self._s = np.empty(self.starts.size, dtype=np.uint64)

    def indices(self, seed: int, i: int):
        """The flat positions iteration i of the round with this seed changes, one per row."""
        if self.view is None:
            return None
        import numpy as np

        h = (i * 0x9E3779B97F4A7C15 + seed) & 0xFFFFFFFFFFFFFFFF
        h = ((h ^ (h >> 31)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        x, t = self._x, self._s
        np.add(self.rowkey, np.uint64(h), out=x)  # wraps modulo 2**64, as meant
        np.right_shift(x, np.uint64(30), out=t)
        np.bitwise_xor(x, t, out=x)
        np.multiply(x, np.uint64(0xBF58476D1CE4E5B9), out=x)
        np.right_shift(x, np.uint64(27), out=t)
        np.bitwise_xor(x, t, out=x)
        np.multiply(x, np.uint64(0x94D049BB133111EB), out=x)
        np.right_shift(x, np.uint64(31), out=t)
        np.bitwise_xor(x, t, out=x)
        np.remainder(x, self.width, out=x)
        return self.starts + x.view(np.int64)

    def bits_of(self, t):
        """A tensor shaped like the target, as the flat integers `apply` changes."""
        return t.view(self.bits_dtype).numpy().reshape(-1)

    def apply(self, idx, view=None):
        """Change the elements at `idx` of the target (or of `view`, another's bits_of)."""
        view = self.view if view is None else view
        assert view is not None  # set whenever a target was chosen; no target, no perturbation
        saved = view[idx]
        view[idx] = saved + self.step
        return saved

    def restore(self, idx, saved, view=None) -> None:
        view = self.view if view is None else view
        assert view is not None  # as in apply
        view[idx] = saved

    def around(self, fn, args, idx, view=None):
        """fn(*args) with the elements at `idx` changed for the call and put back after it: a
        timed call and its replay by the reference change the same places the same way."""
        if idx is None:
            return fn(*args)
        saved = self.apply(idx, view)
        try:  # a call that raises must not leave the next one (or the reference's replay) a changed input
            return fn(*args)
        finally:
            self.restore(idx, saved, view)


def timed_round(fn, args, perturb: Perturb | None, n: int, seed: int, after) -> None:
    """n calls on the task's own inputs, one element of every row changed around each (the
    warm rounds). The changed positions are worked out inside the clock, the same for all.
    `after(out)` follows each call and gives the salt of the next call's changed positions (the
    first call's is the round's seed): in a timed round the supervisor's answer to the report,
    which may read the output first (AuditLine.report); in the warm-up 0 (AuditLine.rehearse)."""
    salt = seed
    for i in range(n):
        out = fn(*args) if perturb is None else perturb.around(fn, args, perturb.indices(salt, i))
        salt = after(out)


ANSWER_BYTES = 8  # the supervisor's answer to a report: a little-endian unsigned integer


class AuditLine:
    """After each timed call, where its output lies: the supervisor may read it from this
    process's memory before it answers.

    The candidate's native code can read and change anything in this process: a Python frame's
    locals through the C API (tests/verifiers/cheats/audit_peek.py read the timing loop's
    `audit` and computed only that call), a copy kept here (and rewrite it), the harness's own
    methods (patch this one), descriptors (swap, reopen). So nothing here decides or knows which
    call is audited, and nothing here copies it: the worker reports each output's address,
    layout and size on `line` and waits; for the audited call the supervisor stops the
    candidate's processes and reads those bytes through /proc/<pid>/mem (opened before the
    candidate ran) before it answers. The report commits the output before anything could tell
    the candidate whether it mattered. The answer, drawn by the supervisor whether or not the
    call was read, says what the next call's input is (the salt of its changed elements, or
    which of a fresh round's inputs comes next): a worker made to go on without waiting for it
    (tests/verifiers/cheats/audit_nowait.py) calls on inputs the verifier never gave. A report
    that lies (another address) only moves what is read: those bytes must still be the right
    output for this call's input. Every subject pays the same: a report and an answer per call,
    and one output read by the supervisor per round on average."""

    # No instance dictionary: a report of the candidate's set on this object would shadow the
    # class's unseen (Integrity watches the class). Native code can still go around this; the
    # answers are what hold.
    __slots__ = ("line",)

    def __init__(self, line: int):
        self.line = line

    def report(self, out) -> int:
        """Report `out`, wait for the answer, and return it (what the next call needs)."""
        data = self.describe(out)
        while data:
            data = data[_write(self.line, data) :]
        answer = b""
        while len(answer) < ANSWER_BYTES:
            got = _read(self.line, ANSWER_BYTES - len(answer))
            if not got:
                _exit(5)  # the supervisor answers every report: the line closed or was replaced
            answer += got
        return int.from_bytes(answer, "little")

    def rehearse(self, out) -> int:
        """The warm-up's report: made as a round's is, not sent; each warm-up call's salt is 0."""
        self.describe(out)
        return 0

    @staticmethod
    def describe(out) -> bytes:
        outs = outputs_of(out)
        if outs is None:
            desc = {"error": "not a plain tensor" if out is not None else "no output"}
        elif any(o.device.type != "cpu" for o in outs):
            desc = {"error": "not a CPU tensor"}
        else:
            desc = {
                "outs": [
                    [
                        o.data_ptr(),
                        extent(o) * o.element_size(),
                        dtype_name(o),
                        o.element_size(),
                        list(o.shape),
                        list(o.stride()),
                    ]
                    for o in outs
                ]
            }
        return (_dumps(desc, separators=(",", ":")) + "\n").encode()


def extent(t) -> int:
    """Elements from a tensor's first to its last, in memory (its strides are never negative)."""
    if t.numel() == 0:
        return 0
    return 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride(), strict=True))


class FreshInputs:
    """A fresh input for every iteration of a fresh round, made before the round's clock starts.

    The task's largest float input is scaled per element by factors in [0.5, 2), read from a
    different offset of one random table for each iteration of a round. So every element of
    every timed input is new: a candidate that keeps earlier inputs and outputs and recomputes
    only what changed (a red-team candidate did, per 1024-element block, against inputs that
    differed from the last in four elements) must compute all of it, and a cached output is
    wrong everywhere. The audited iterations' inputs are made again by the trusted reference.

    A fresh round's inputs are written by the trusted reference into shared memory (a memfd both
    workers map), as many as `budget_bytes` holds, before the round's clock starts; the
    candidate's while every candidate process is stopped, so nothing of it runs between their
    making and its clock's start (made in its own process, they would exist untimed while its
    threads run). The candidate's side only reads them (`fill=False`), but for each call's change:
    with all of a round's inputs there from its start, a candidate could work out every output at
    its first call, in threads, and each next one would only be picked. So each call changes one
    element of every row of its input first (as a warm call does: `Perturb`, `perturb_max`
    elements at most), at places salted by the supervisor's answer to the call before, and puts
    them back after; `one` makes an audited call's input again with its salt."""

    SPREAD = 8192  # offsets into the factor table: more than any round's iterations

    def __init__(self, args, budget_bytes: int, shared: int | None = None, fill: bool = True, perturb_max: int = 0):
        import numpy as np
        import torch

        self.args = list(args)
        self.target = None
        self.change, self.bits = None, []  # each call's change (none without a float input)
        self.fill = fill
        floats = [
            i
            for i, a in enumerate(self.args)
            if isinstance(a, torch.Tensor) and dtype_name(a) in FLOATS and a.is_contiguous() and a.numel() > 0
        ]
        self.capacity = MAX_FRESH
        if not floats:
            return
        self.target = max(floats, key=lambda i: self.args[i].numel())
        base = self.args[self.target]
        size = max(1, nbytes(base))
        self.capacity = max(1, min(MAX_FRESH, budget_bytes // size))
        if shared is None:
            shared = os.memfd_create("assay-fresh", os.MFD_CLOEXEC)
        self.pool = self._shared(shared, base, size)
        self.capacity = len(self.pool)
        if perturb_max and self.pool:
            change = Perturb([self.pool[0]], perturb_max)
            if change.view is not None:  # else a dtype with no exponent step: as in the warm rounds
                self.change, self.bits = change, [change.bits_of(slot) for slot in self.pool]
        if fill:
            # A table drawn afresh in the reference for each verification: the candidate cannot
            # make it again (a fixed seed let it), so a slot's values say nothing of the next.
            rng = np.random.default_rng(int.from_bytes(os.urandom(16), "little"))
            table = rng.uniform(0.5, 2.0, base.numel() + self.SPREAD).astype(np.float32)
            self.factors = torch.from_numpy(table).to(base.dtype)

    def _shared(self, fd: int, base, size: int) -> list:
        """The capacity's slots in the memfd, as tensors shaped like the base. The filling side
        sizes the memfd; the reading side maps what it finds."""
        import mmap

        import torch

        if self.fill and os.fstat(fd).st_size < self.capacity * size:
            os.ftruncate(fd, self.capacity * size)
        total = os.fstat(fd).st_size
        if total < size:
            return []
        # Populated now, so no timed read takes a page fault the first time it meets a slot; and
        # on the reading side written now (adding 0 keeps every byte), so no call's change takes
        # one either (17-19 ms for 512 MB). The filling side writes a round's slots before it.
        self._map = mmap.mmap(fd, total, mmap.MAP_SHARED | mmap.MAP_POPULATE, mmap.PROT_READ | mmap.PROT_WRITE)
        if not self.fill:
            torch.frombuffer(self._map, dtype=torch.uint8).add_(0)
        return [
            torch.frombuffer(self._map, dtype=base.dtype, count=base.numel(), offset=j * size).view(base.shape)
            for j in range(min(self.capacity, total // size))
        ]

    def _offset(self, seed: int, j: int) -> int:
        return ((seed * 0x9E3779B97F4A7C15) % self.SPREAD + j * 1_000_003) % self.SPREAD

    def _fill(self, out, seed: int, j: int):
        import torch

        assert self.target is not None  # fresh inputs are made only for a task with a float input
        base = self.args[self.target]
        at = self._offset(seed, j)
        return torch.mul(base, self.factors[at : at + base.numel()].view(base.shape), out=out)

    def prepare(self, seed: int, n: int) -> list[list]:
        """The argument lists of the n iterations of the round with this seed, in the pool's
        first n slots (filled here unless this is the reading side)."""
        if self.target is None:
            return [self.args] * n
        if n > self.capacity:
            raise ValueError(f"{n} fresh inputs asked for, {self.capacity} allowed")
        sets = []
        for j in range(n):
            args = list(self.args)
            args[self.target] = self._fill(self.pool[j], seed, j) if self.fill else self.pool[j]
            sets.append(args)
        return sets

    def one(self, seed: int, j: int, salt: int | None = None) -> list:
        """Iteration j's arguments in the round with this seed, made on their own (the audit),
        with the change its call made at the places `salt` gives."""
        import torch

        if self.target is None:
            return self.args
        args = list(self.args)
        args[self.target] = self._fill(torch.empty_like(self.args[self.target]), seed, j)
        if salt is not None and self.change is not None:
            self.change.apply(self.change.indices(int(salt), j), self.change.bits_of(args[self.target]))
        return args


def timed_fresh_round(fn, sets: list[list], first: int, line: AuditLine, fresh: FreshInputs | None = None) -> None:
    """One call on each of a fresh round's inputs, in the order the supervisor gives: the first
    in the round's command, each next one in its answer to the last report, as j + salt *
    FRESH_SLOTS. All of them are in memory before the clock starts; which comes next, and the
    salt of the elements its call changes (FreshInputs), are known only once the last call's
    output was reported."""
    change = fresh.change if fresh is not None else None
    answer = first
    for _ in range(len(sets)):
        j, salt = answer % FRESH_SLOTS, answer // FRESH_SLOTS
        if not j < len(sets):
            _exit(5)
        out = (
            fn(*sets[j])
            if change is None or fresh is None
            else change.around(fn, sets[j], change.indices(salt, j), fresh.bits[j])
        )
        answer = line.report(out)


class Flusher:
    def __init__(self, megabytes: int):
        import torch

        self.buf = torch.zeros(max(1, megabytes) << 18)  # float32: 4 bytes each

    def __call__(self):
        self.buf.add_(1.0)


def role_time_ref(plan: dict, chan: Channel) -> None:
    import torch

    torch.set_grad_enabled(False)
    task = load_module(plan["task"], "assay_task", {})
    torch.manual_seed(plan["init_seed"])
    model = task.Model(*plan["init_args"])
    args = load_inputs(plan["inputs_file"], plan["inputs"])
    compiled, _ = compile_model(torch, model, args)  # from the cache the warm sandbox filled
    # The compiled kernels are loaded now; take them off the disk before the candidate starts,
    # so it cannot load torch.compile's kernel and pass it off as its own.
    import shutil

    for var in ("TORCHINDUCTOR_CACHE_DIR", "TMPDIR"):
        folder = os.environ.get(var)
        if folder and folder.startswith("/workspace/"):
            shutil.rmtree(folder, ignore_errors=True)
    half = max(1, plan["copy_bytes"] // 8)  # float32 elements in each of src and dst
    src, dst = torch.randn(half), torch.empty(half)
    subjects = {"eager": model, "compiled": compiled, "copy": lambda *a: dst.copy_(src)}
    # One memfd holds the fresh rounds' inputs, whoever's round it is (rounds run one at a
    # time); the candidate's worker maps it too (see FreshInputs). Only eager and the
    # candidate run fresh rounds.
    fresh = FreshInputs(
        args, plan["fresh_input_mb"] << 20, shared=plan["fresh_fd"], perturb_max=plan["perturb_max_elements"]
    )
    inputs = {"eager": fresh, "compiled": fresh, "copy": fresh, "for_candidate": fresh}
    perturb = Perturb(args, plan["perturb_max_elements"])
    flush = Flusher(plan["flush_mb"])
    chan.event("loaded", copy_bytes=2 * nbytes(src), threads=torch.get_num_threads(), fresh_capacity=fresh.capacity)
    serve(chan, subjects, inputs, perturb, flush, AuditLine(plan["line_fd"]))


def role_time_cand(plan: dict, chan: Channel) -> None:
    import torch

    torch.set_grad_enabled(False)
    opwatch = load_opwatch(plan["opwatch"])
    opwatch.scopes(plan.get("contractions") or [])
    # Started before the candidate's code runs, so a handler it installs shows as a replacement.
    sampler = Sampler(plan["opwatch"], int(plan["sample_us"]))
    foreign = CtypesWatch()
    integrity = Integrity()
    cls = import_candidate(plan, chan)
    model = construct(cls, plan["init_args"], plan["init_seed"], chan)
    args = load_inputs(plan["inputs_file"], plan["inputs"])
    fresh = FreshInputs(
        args,
        plan["fresh_input_mb"] << 20,
        shared=plan["fresh_fd"],
        fill=False,
        perturb_max=plan["perturb_max_elements"],
    )
    perturb = Perturb(args, plan["perturb_max_elements"])
    flush = Flusher(plan["flush_mb"])
    opwatch.take()
    chan.event("loaded")
    serve(
        chan,
        {"candidate": model},
        {"candidate": fresh},
        perturb,
        flush,
        AuditLine(plan["line_fd"]),
        opwatch,
        integrity,
        foreign,
        sampler,
    )


@contextlib.contextmanager
def _watching(opwatch: OpWatch | None, sampler: Sampler | None, calls: int):
    """The op recorder and the CPU sampler armed around `calls` calls of a subject (either may
    be absent: the reference's process has neither)."""
    if opwatch is not None:
        opwatch.arm()
    if sampler is not None:
        sampler.arm(calls)
    yield
    if sampler is not None:
        sampler.disarm()
    if opwatch is not None:
        opwatch.disarm()


def serve(
    chan,
    subjects,
    inputs,
    perturb,
    flush,
    line: AuditLine,
    opwatch=None,
    integrity=None,
    foreign=None,
    sampler: Sampler | None = None,
) -> None:
    ready: list[list] = []
    while True:
        cmd = chan.command()
        op = cmd.get("cmd")
        if op == "warm":
            fn = subjects[cmd["subject"]]
            args = inputs[cmd["subject"]].args
            # As the timed rounds call it (the last output alive during the next call, the input
            # changed around each, the report made), so memory settles as they will use it: a
            # warm-up that dropped each output at once left the first timed rounds 4000-8000 page
            # faults to take (70 ms for a 1.4 ms call), and the calibration sized rounds on them.
            use = perturb if cmd["subject"] != "copy" else None
            with _watching(opwatch, sampler, int(cmd["n"])):
                timed_round(fn, args, use, int(cmd["n"]), 0, line.rehearse)
            chan.event("warmed")
        elif op == "flush":
            flush()
            chan.event("flushed")
        elif op == "prepare":
            # Trusted reference only: a fresh round's inputs; the candidate's while every
            # candidate process is stopped.
            subject = cmd["subject"]
            made = inputs["for_candidate" if subject == "candidate" else subject].prepare(
                int(cmd["seed"]), int(cmd["n"])
            )
            if subject != "candidate":
                ready = made
            chan.event("prepared")
        elif op == "round":
            # A warm round on the task's own inputs, or a fresh round on what "prepare" made.
            # The supervisor's clock starts when it sends this and stops when "done" arrives.
            fn = subjects[cmd["subject"]]
            n = int(cmd["n"])
            if cmd.get("fresh"):
                source = inputs[cmd["subject"]]
                if not source.fill:
                    ready = source.prepare(int(cmd["seed"]), n)  # views of what the reference wrote
                if len(ready) != n:
                    _exit(5)
            with _watching(opwatch, sampler, n):
                if cmd.get("fresh"):
                    timed_fresh_round(fn, ready, int(cmd.get("first", 0)), line, inputs[cmd["subject"]])
                else:
                    use = perturb if cmd["subject"] != "copy" else None
                    timed_round(fn, inputs[cmd["subject"]].args, use, n, int(cmd["seed"]), line.report)
            ready = []
            chan.event("done")
        elif op == "replay":
            # Trusted reference only: the outputs the audited iterations must have produced.
            fn = subjects[cmd["subject"]]
            outs = []
            for kind, seed, k, salt in cmd["audits"]:
                if kind == "fresh":
                    outs.append(fn(*inputs[cmd["subject"]].one(int(seed), int(k), salt)))
                    continue
                outs.append(perturb.around(fn, inputs[cmd["subject"]].args, perturb.indices(int(seed), int(k))))
            _save_audits(cmd["path"], outs)
            chan.event("replayed")
        elif op == "finish":
            report = {}
            if opwatch is not None:
                report["ops"], report["foreign_ops"] = opwatch.take()
                report["contracted_ops"] = opwatch.contracted
            if integrity is not None:
                report["integrity"] = integrity.problems(opwatch)
                report["compilers"] = compilers()
            if foreign is not None:
                report["ctypes_functions"] = foreign.take()
            if sampler is not None:
                report["cpu_sampling"] = sampler.report()
            chan.event("finished", report=report)
            _exit(0)
        else:
            _exit(5)


def _audit_tensors(out, prefix: str):
    """The trusted reference's output for an audited call, under `prefix`, or why there is none."""
    outs = outputs_of(out)
    if outs is None:
        return "not a plain tensor" if out is not None else "no output kept"
    if any(o.device.type != "cpu" for o in outs):
        return "not a CPU tensor"
    return {f"{prefix}out_{j}": o.detach().clone() for j, o in enumerate(outs)}


def _save_audits(path: str, outs: list) -> str:
    """Every audited output in one file, the i-th under "a{i}_"."""
    if not outs:
        return "no output kept"
    tensors = {}
    for i, out in enumerate(outs):
        found = _audit_tensors(out, f"a{i}_")
        if isinstance(found, str):
            return f"{found} (audited round {i})"
        tensors.update(found)
    save_tensors(path, tensors)
    return "saved"


# ----------------------------------------------------------------------------------- main


def main() -> None:
    if sys.argv[1:] == ["--plain"]:
        plan = json.loads(sys.stdin.buffer.readline())
        _nondumpable()
        role = {"reference": role_reference, "warm": role_warm}[plan["role"]]
        try:
            report = role(plan)
        except BaseException as exc:
            report = {"ok": False, "error": _format(exc)}
        sys.stdout.write("@@ASSAY " + _dumps(report) + "\n")
        sys.stdout.flush()
        return
    chan = Channel(int(sys.argv[1]))
    plan = chan.command()
    role = plan["role"]
    if role == "time-ref":
        _nondumpable()
        role_time_ref(plan, chan)
    elif role == "time-cand":
        role_time_cand(plan, chan)
    elif role == "check":
        role_check(plan, chan)
    else:
        _exit(5)


if __name__ == "__main__":
    main()
