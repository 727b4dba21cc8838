"""assay kernel verifier: the supervisor, the trusted parent inside a verification sandbox.

Standard library only; it never imports torch, the task or the candidate. The verifier execs

    python -I -B supervisor.py            (a JSON plan on stdin, one JSON result on stdout)

and the supervisor starts the workers (worker.py) as its children, talks to each over a pipe,
and takes every measurement the verifier relies on itself, from outside the candidate's
process: the wall clock of each timed round (time.monotonic here, which the candidate cannot
patch: it is another process, made non-dumpable so it cannot be ptraced or have its memory
written), CPU time and memory from /proc, the processes alive after a forward returns, and
the deadlines and caps that stop a hung, exploding or chattering candidate.

In timing mode it also owns the CPU: while a trusted reference subject runs, every process
of the candidate is stopped (SIGSTOP), so the candidate can neither slow the reference down
nor compute anything in the background between its own rounds.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import time
from typing import Any

TICK = os.sysconf("SC_CLK_TCK")
POLL_S = 0.02
MAX_EVENT_LINE = 4 << 20


def nondumpable() -> None:
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0
    except Exception:
        pass


# ----------------------------------------------------------------------------------- /proc


def pids() -> set[int]:
    out = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            out.add(int(name))
    return out


def busy_seconds(cpus: set[int]) -> float | None:
    """Seconds the machine's CPUs in `cpus` have spent busy, whoever ran on them. /proc/stat is
    not namespaced, so this counts every process on the host; steal (a hypervisor giving the
    vCPU to another guest) counts as busy. Clock ticks: coarse, so judged summed over rounds."""
    try:
        with open("/proc/stat") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    total, found = 0, 0
    for line in lines:
        name, _, rest = line.partition(" ")
        if name[3:].isdigit() and name.startswith("cpu") and int(name[3:]) in cpus:
            v = [int(x) for x in rest.split()[:8]]
            if len(v) == 8:  # user nice system idle iowait irq softirq steal
                total += sum(v) - v[3] - v[4]
                found += 1
    return total / TICK if found else None


def sandbox_cpu_seconds() -> float:
    """CPU time of every process in this sandbox (its own pid namespace): the supervisor, the
    workers and whatever the candidate started."""
    return sum(cpu_ns(p) for p in pids()) / 1e9


def stat_fields(pid: int, task: int | None = None) -> list[str] | None:
    """The fields after comm of a process's stat (or of one of its threads', `task`)."""
    path = f"/proc/{pid}/stat" if task is None else f"/proc/{pid}/task/{task}/stat"
    try:
        with open(path, "rb") as f:
            raw = f.read().decode(errors="replace")
    except OSError:
        return None
    # comm may hold spaces and parentheses; the fields after the last ')' are fixed.
    return raw[raw.rfind(")") + 2 :].split()


def cpu_seconds(pid: int) -> float:
    f = stat_fields(pid)
    if not f:
        return 0.0
    return (int(f[11]) + int(f[12])) / TICK  # utime + stime, all threads, kernel-accounted


def minor_faults(pid: int) -> int:
    f = stat_fields(pid)
    return int(f[7]) if f else 0


def cpu_ns(pid: int) -> int:
    """Nanoseconds on a CPU, summed over the process's live threads (schedstat: kernel-kept, fine-
    grained, and blind to how long the process waited for a CPU on a busy machine); falls back
    to utime + stime in clock ticks where schedstat is missing."""
    total, found = 0, False
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
                found = True
        except (OSError, ValueError, IndexError):
            continue
    return total if found else int(cpu_seconds(pid) * 1e9)


def state(pid: int) -> str:
    f = stat_fields(pid)
    return f[0] if f else "gone"


def stop_and_wait(pids: set[int]) -> bool:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
    return wait_stopped(pids)


def wait_stopped(pids: set[int], limit_s: float = 0.2) -> bool:
    """Whether every thread of these (SIGSTOPped) processes is stopped within `limit_s`: the
    signal is taken when each is next scheduled."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        running = False
        for pid in pids:
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tids:
                f = stat_fields(pid, int(tid))
                if f and f[0] not in ("T", "t", "Z", "X"):
                    running = True
        if not running:
            return True
        time.sleep(0.0002)
    return False


def resume(pids: set[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def nice(pid: int) -> int | None:
    f = stat_fields(pid)
    return int(f[16]) if f else None


def threads(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


def _under(path: str, roots: list[str] | tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def mapped_files(pid: int, roots: list[str], trusted: list[str] | tuple[str, ...] = ()) -> list[str] | None:
    """Executable file mappings of a process that lie under `roots` (what the candidate built
    or brought) or whose file is gone; None when the maps cannot be read (a process that made
    itself non-dumpable hides them). Files under `trusted` are the host's read-only toolchain
    binds, which may sit under a root (a venv in /tmp is bound over the sandbox's private /tmp)."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    found = set()
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) < 6 or "x" not in parts[1]:
            continue
        path = parts[5].strip()
        if not path.startswith("/"):
            continue
        if path.endswith(" (deleted)") or (_under(path, roots) and not _under(path, trusted)):
            found.add(path)
    return sorted(found)


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return 0.0


# ----------------------------------------------------------------------------------- timing


def warm_up(run, min_calls: int, min_s: float, max_calls: int) -> int:
    """Call a subject until it is past its first-call costs: at least `min_calls` calls and `min_s`
    seconds of them, in chunks sized to the time left (at most doubling). `run(n)` makes n calls
    and returns their wall seconds. A few calls are not enough: a candidate fresh from its import
    was seen taking 6-12 ms per call for its first ten or so calls and 1.1 ms after, so the
    calibration below, and every round it sized, measured the start-up. Returns the calls made."""
    calls, spent, n = 0, 0.0, max(1, min_calls)
    while True:
        wall = run(n)
        spent += wall
        calls += n
        if (calls >= min_calls and spent >= min_s) or calls >= max_calls:
            return calls
        # Enough calls to fill the time left at the pace just seen, but no more than twice the
        # last chunk (the pace may still be the start-up's).
        left = math.ceil((min_s - spent) / max(wall / n, 1e-9)) if spent < min_s else min_calls - calls
        n = max(1, min(2 * n, left, max_calls - calls))


def pick_audits(rng, n: int) -> list[int]:
    """Which calls of a round of n have their output read: each on its own, with chance 1/n (one
    a round on average, the same for every subject). Not one per round: a candidate can tell
    after the fact that a call was read (its answer came late), and one read per round told it
    the rest of the round was free; here a read says nothing of the calls after it. A candidate
    wrong on a share q of its calls goes unseen with about exp(-q * rounds)."""
    return [k for k in range(n) if rng.random() * n < 1.0]


# A calibration round with this many page faults or more was paying for new memory, not the calls.
FAULTED_ROUND = 256


def calibrate(timed, target_s: float, max_iters: int, max_rounds: int = 8, faults=None) -> float:
    """Seconds per iteration, for sizing the timed rounds: rounds of 1, 2, 4, ... iterations until
    one fills a quarter of `target_s` (at least two rounds), and the least time per iteration among
    them. A shared machine only ever adds time, and one call it slows (a timeslice, a page fault
    burst) weighs on a single-call round in full, but on a long round only a little: two
    single-call rounds once sized a 1.2 ms candidate's rounds for 50 ms calls (2 iterations).
    It also goes on while the pace is unsettled: better than the best so far by more than a
    fifth, or worse than it by half. A subject's first rounds after its warm-up were seen taking
    4000-8000 page faults (73 ms for one 1.4 ms call, 27 ms for two; or 2.3 ms for one, then 26
    ms for two), which ended the search after two rounds and sized every round at 3 to 44 calls
    where 70 fit, so a round's fixed costs (the cache flush's aftermath, reading the audited
    output) weighed more. Page faults can also last for every call of the first rounds at one
    pace (24.7 ms for one 1.3 ms call with 4096 faults, 47.7 ms for two with 8192: settled, and
    rounds of 4 calls where 70 fit, whose fixed costs then failed the 3n/n check), so a round
    that faulted (`faults()`: the last round's count) counts as settled only if it fills the
    whole target: a subject that faults on every call is still sized in a few rounds."""
    best, n = float("inf"), 1
    for k in range(max_rounds):
        wall = timed(n)
        faulted = faults is not None and faults() >= FAULTED_ROUND and wall < target_s
        settled = 0.8 * best <= wall / n <= 1.5 * best and not faulted
        best = min(best, wall / n)
        if n >= max_iters or (k >= 1 and wall >= target_s / 4 and settled):
            break
        n = min(max_iters, 2 * n)
    return best


# --------------------------------------------------------------------------------- workers


class Stop(Exception):
    """Ends supervision: why (timeout, memory, pids, output, exit, protocol) and in which phase."""

    def __init__(self, why: str, detail: str = "", who: str = "candidate"):
        super().__init__(why)
        self.why = why
        self.detail = detail
        self.who = who


# ------------------------------------------------------------------------- audit line

MAX_REPORT = 1 << 16
ANSWER_BYTES = 8  # worker.ANSWER_BYTES
FRESH_SLOTS = 1 << 16  # worker.FRESH_SLOTS
DTYPE_NAME = set("abcdefghijklmnopqrstuvwxyz0123456789_")


class AuditLine:
    """The supervisor's end of a worker's audit line (worker.AuditLine): after each call of a
    timed round the worker reports where its output lies and waits; for each audited call
    the supervisor stops the worker's processes and reads those bytes from /proc/<pid>/mem (opened
    when the worker started, before any candidate code ran) before it answers. A socket, not a
    pipe: a pipe can be read without taking (tee) and opened again through /proc; a socket can be
    neither. Each answer says what the worker's next call takes as input (`start_round`'s
    answers, drawn whether or not the call was read), so a worker cannot go on before it."""

    def __init__(self, cap: int, who: str):
        import socket

        self.who = who
        line, self._child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.line = line.detach()
        os.set_blocking(self.line, False)
        self.cap = cap
        self.mem: int | None = None
        self.buf = bytearray()
        self.audited: frozenset[int] = frozenset()  # this round's audited calls, while it runs
        self.answers: list[int] = []
        self.calls: int | None = None
        self.reported = 0
        self.read_outs: dict[int, tuple[list, Any] | str] = {}  # call -> what its report led to
        self.read_ms: list[list[float]] = []
        self.held_s = 0.0
        self.scratch = [bytearray(cap)]  # zero-filled: every page written now (one per read of a round)

    def child_end(self) -> int:
        return self._child.fileno()

    def attach(self, pid: int) -> None:
        """Open the worker's memory now, while it is still only the harness (it waits for its
        plan). Right after exec the new process is briefly not dumpable (its memory inherits
        this nondumpable supervisor's flag until exec sets its own), so the open is retried."""
        end = time.monotonic() + 5.0
        while True:
            try:
                self.mem = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
                break
            except PermissionError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.001)
        self._child.close()

    def start_round(self, n: int, audited, answers: list[int] | None = None) -> None:
        """A round of n calls begins; `answers[i]` goes back after call i's report (0s if none)."""
        self.answers = list(answers) if answers is not None else [0] * n
        if len(self.answers) != n:
            raise ValueError(f"{len(self.answers)} answers for a round of {n} calls")
        self.calls, self.audited, self.reported, self.read_outs = n, frozenset(audited), 0, {}
        self.buf.clear()
        self.held_s = 0.0  # how long this round's subject was held still for the read

    def end_round(self) -> int:
        """The reports the round made (one per call)."""
        self.calls = None
        return self.reported

    def answer(self, stop_all, resume_all) -> bool:
        """Take every report waiting on the line; read the audited call's output (with the
        worker's processes stopped by `stop_all`), then answer. False once the line is closed."""
        try:
            data = os.read(self.line, MAX_REPORT)
        except BlockingIOError:
            return True
        except OSError as exc:
            raise Stop("protocol", f"the audit line failed: {exc.strerror}", self.who) from None
        if not data:
            return False
        if self.calls is None:
            raise Stop("protocol", "something came on the audit line outside a timed round", self.who)
        self.buf += data
        if len(self.buf) > MAX_REPORT:
            raise Stop("protocol", "an oversized report on the audit line", self.who)
        if not self.buf.startswith(b"{"):
            raise Stop("protocol", "something other than reports came on the audit line", self.who)
        while b"\n" in self.buf:
            line, _, rest = bytes(self.buf).partition(b"\n")
            self.buf = bytearray(rest)
            if self.reported >= self.calls:
                raise Stop(
                    "protocol",
                    f"{self.reported + 1} reports on the audit line in a round of {self.calls} calls",
                    self.who,
                )
            if self.reported in self.audited:
                t0 = time.monotonic()
                stopped = stop_all()
                t1 = time.monotonic()
                try:
                    self.read_outs[self.reported] = self._read(line, len(self.read_outs))
                finally:
                    t2 = time.monotonic()
                    resume_all()
                    t3 = time.monotonic()
                    # Only from when every thread was seen stopped: before that they still ran.
                    self.held_s += (t3 - t1) if stopped else 0.0
                    # [stopping, reading, resuming] in ms, for whoever audits the timing.
                    self.read_ms.append(
                        [round(1e3 * (t1 - t0), 3), round(1e3 * (t2 - t1), 3), round(1e3 * (t3 - t2), 3)]
                    )
            reply = self.answers[self.reported].to_bytes(ANSWER_BYTES, "little")
            self.reported += 1
            try:
                os.write(self.line, reply)
            except OSError as exc:
                raise Stop("protocol", f"the audit line failed: {exc.strerror}", self.who) from None
        return True

    def _read(self, line: bytes, slot: int):
        """The outputs a report names, read from the worker's memory: (layouts, bytes), or why not."""
        try:
            desc = json.loads(line)
        except (ValueError, RecursionError):
            raise Stop("protocol", "a malformed report on the audit line", self.who) from None
        if isinstance(desc, dict) and set(desc) == {"error"} and isinstance(desc["error"], str):
            return desc["error"][:200]
        layouts = report_layouts(desc, self.cap)
        if layouts is None:
            raise Stop("protocol", "a malformed report on the audit line", self.who)
        if self.mem is None:
            raise Stop("harness", "the worker's memory was not opened", "verifier")
        # Into memory made and written before the rounds (new memory is a page fault per 4 KiB,
        # 12-17 us each on this VM: 49 ms for a 16 MB output where the read itself takes 5);
        # the bytes are kept after the round, outside its clock (keep()).
        while len(self.scratch) <= slot:
            self.scratch.append(bytearray(self.cap))  # a second read in one round (rare)
        scratch = self.scratch[slot]
        spans, at = [], 0
        for ptr, size, *_ in desc["outs"]:
            view = memoryview(scratch)[at : at + size]
            try:
                got = os.preadv(self.mem, [view], ptr) if size else 0
            except OSError as exc:
                return f"its memory could not be read at the address reported ({exc.strerror})"
            if got != size:
                return "its memory could not be read at the address reported (short read)"
            spans.append((at, size))
            at += size
        return layouts, (slot, spans)

    def keep(self) -> list:
        """The audited calls' outputs, in call order, as bytes of their own (the scratch is
        reused next round)."""
        kept = []
        for call in sorted(self.read_outs):
            got = self.read_outs[call]
            if isinstance(got, tuple):
                layouts, (slot, spans) = got
                got = layouts, [bytes(memoryview(self.scratch[slot])[at : at + size]) for at, size in spans]
            kept.append(got)
        return kept


def report_layouts(desc, cap: int) -> list | None:
    """[dtype, shape, strides] of each output a well-formed report names; None for anything else."""
    outs = desc.get("outs") if isinstance(desc, dict) and set(desc) == {"outs"} else None
    if not isinstance(outs, list) or not 0 < len(outs) <= 256:
        return None
    total, layouts = 0, []
    for o in outs:
        if not (isinstance(o, list) and len(o) == 6):
            return None
        ptr, size, dtype, item, shape, strides = o
        ints = [
            ptr,
            size,
            item,
            *(shape if isinstance(shape, list) else [None]),
            *(strides if isinstance(strides, list) else [None]),
        ]
        if not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < (1 << 62) for v in ints):
            return None
        if not (
            isinstance(dtype, str)
            and 0 < len(dtype) <= 32
            and set(dtype) <= DTYPE_NAME
            and 1 <= item <= 16
            and len(shape) == len(strides) <= 64
        ):
            return None
        numel = math.prod(shape)
        span = 0 if numel == 0 else 1 + sum((n - 1) * st for n, st in zip(shape, strides, strict=True))
        total += size
        if size != span * item or total > cap:
            return None
        layouts.append([dtype, shape, strides])
    return layouts


def write_safetensors(path: str, tensors: list[tuple[str, str, list, bytes]]) -> None:
    """A safetensors file (8-byte header length, JSON header, data) in a folder made afresh: the
    candidate could have put a link where it was."""
    folder = os.path.dirname(path)
    with contextlib.suppress(FileNotFoundError):
        # Whatever is there (a link, a FIFO, a folder it cannot be emptied of) is moved aside;
        # renaming a link moves the link, not what it points at.
        os.rename(folder, f"{folder}.replaced-{os.getpid()}-{time.monotonic_ns()}")
    os.mkdir(folder, 0o755)
    header, offset = {}, 0
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(len(head).to_bytes(8, "little") + head)
        for *_, data in tensors:
            f.write(data)


class Worker:
    """One child process: its command pipe (stdin), event pipe, and capped stdout/stderr."""

    def __init__(
        self,
        name: str,
        spec: dict,
        trusted: bool,
        output_cap: int,
        fds: tuple[int, ...] = (),
        audit: AuditLine | None = None,
    ):
        self.name, self.trusted, self.output_cap = name, trusted, output_cap
        self.audit = audit
        if audit is not None:
            spec["plan"]["line_fd"] = audit.child_end()
            fds = (*fds, audit.child_end())
        # The event pipe's write end is handed to the worker; its number goes last on argv.
        self.events, write_fd = os.pipe()
        self.proc = subprocess.Popen(
            list(spec["argv"]) + [str(write_fd)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **spec["env"]},
            cwd=spec.get("cwd") or "/",
            pass_fds=(write_fd, *fds),
            close_fds=True,
        )
        os.close(write_fd)
        assert self.proc.stdin and self.proc.stdout and self.proc.stderr  # all three are pipes
        self.stdin, self.stdout, self.stderr = self.proc.stdin, self.proc.stdout, self.proc.stderr
        self.pid = self.proc.pid
        if audit is not None:
            audit.attach(self.pid)
        # How this worker's processes are held still while its audited output is read.
        self.stop_all = lambda: stop_and_wait({self.pid})
        self.resume_all = lambda: resume({self.pid})
        self.buf = b""
        self.out = {self.stdout.fileno(): bytearray(), self.stderr.fileno(): bytearray()}
        self.open = set(self.out) | {self.events}
        self.output_total = 0
        self.audit_closed = False
        self.exit: dict | None = None

    def send(self, obj: dict) -> None:
        try:
            self.stdin.write((json.dumps(obj) + "\n").encode())
            self.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    def tail(self, which: str, n: int = 4000) -> str:
        fd = (self.stdout if which == "stdout" else self.stderr).fileno()
        return bytes(self.out[fd][-n:]).decode(errors="replace")

    def status(self) -> dict | None:
        if self.exit is None:
            code = self.proc.poll()
            if code is None:
                return None
            self.exit = {"code": code} if code >= 0 else {"signal": signal.Signals(-code).name}
        return self.exit


class Supervisor:
    def __init__(self, plan: dict):
        self.plan = plan
        self.limits = plan["limits"]
        self.trusted = {1, os.getpid(), os.getppid()}
        self.workers: dict[str, Worker] = {}
        self.phase_s: dict[str, float] = {}  # seconds spent per phase, for whoever audits the run
        self._phase, self._phase_t = "start", time.monotonic()
        self.log: list[dict] = []
        self.peak_rss_mb = 0.0
        self.peak_procs = 0
        self.stopped = False
        self.gate_open = False
        self._watched = 0.0

    @property
    def phase(self) -> str:
        return self._phase

    @phase.setter
    def phase(self, name: str) -> None:
        now = time.monotonic()
        self.phase_s[self._phase] = round(self.phase_s.get(self._phase, 0.0) + now - self._phase_t, 3)
        self._phase, self._phase_t = name, now

    # -- processes --------------------------------------------------------------------
    def untrusted(self) -> set[int]:
        return pids() - self.trusted

    def spawn(
        self, name: str, spec: dict, trusted: bool, fds: tuple[int, ...] = (), audit: AuditLine | None = None
    ) -> Worker:
        cap = (1 << 20) if trusted else self.limits["output_bytes"]
        w = Worker(name, spec, trusted, cap, fds, audit)
        if trusted:
            self.trusted.add(w.pid)
        self.workers[name] = w
        w.send(spec["plan"])
        return w

    def freeze_untrusted(self) -> None:
        """SIGSTOP every candidate process, until no new one appears (a fork in flight)."""
        for _ in range(50):
            found = self.untrusted()
            for pid in found:
                try:
                    os.kill(pid, signal.SIGSTOP)
                except ProcessLookupError:
                    pass
            if self.untrusted() <= found:
                break
        self.stopped = True

    def thaw_untrusted(self) -> None:
        resume(self.untrusted())
        self.stopped = False

    def kill_untrusted(self) -> None:
        for _ in range(100):
            found = self.untrusted()
            if not found:
                break
            for pid in found:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for w in self.workers.values():
                if not w.trusted:
                    try:
                        w.proc.wait(timeout=0.05)
                    except subprocess.TimeoutExpired:
                        pass
            time.sleep(0.01)

    def watch_limits(self) -> None:
        procs = self.untrusted()
        self.peak_procs = max(self.peak_procs, len(procs))
        # Importing may run a compiler (ninja, cc1plus, as, ld); a forward may not.
        cap = self.limits["build_max_processes"] if self.phase == "import" else self.limits["max_processes"]
        if len(procs) > cap:
            raise Stop("pids", f"{len(procs)} candidate processes (limit {cap})")
        total = sum(rss_mb(p) for p in procs)
        self.peak_rss_mb = max(self.peak_rss_mb, total)
        mem = self.limits["build_memory_mb"] if self.phase == "import" else self.limits["memory_mb"]
        if total > mem:
            raise Stop("memory", f"{total:.0f} MB resident (limit {mem} MB)")

    # -- events -----------------------------------------------------------------------
    def pump(self, w: Worker, timeout: float) -> None:
        """Read what the worker wrote (events, stdout, stderr) and answer its audit reports, for up
        to `timeout` seconds."""
        audit = [w.audit.line] if w.audit is not None and not w.audit_closed else []
        ready, _, _ = select.select(list(w.open) + audit, [], [], max(0.0, timeout))
        for fd in ready:
            if audit and fd == audit[0] and w.audit is not None:
                if not w.audit.answer(w.stop_all, w.resume_all):
                    w.audit_closed = True
                continue
            try:
                data = os.read(fd, 1 << 16)
            except OSError:
                data = b""
            if not data:
                w.open.discard(fd)
                continue
            if fd == w.events:
                w.buf += data
                if len(w.buf) > MAX_EVENT_LINE:
                    raise Stop("protocol", f"{w.name} sent an oversized event", w.name)
            else:
                room = w.output_cap - w.output_total
                w.out[fd] += data[: max(room, 0)]
                w.output_total += len(data)
                if w.output_total > w.output_cap:
                    raise Stop("output", f"{w.name} printed more than {w.output_cap} bytes", w.name)

    def next_event(self, w: Worker, deadline: float, what: str) -> dict:
        while True:
            if b"\n" in w.buf:
                line, w.buf = w.buf.split(b"\n", 1)
                try:
                    ev = json.loads(line)
                except ValueError:
                    raise Stop("protocol", f"{w.name} wrote something that is not an event", w.name) from None
                if not isinstance(ev, dict) or not isinstance(ev.get("ev"), str):
                    raise Stop("protocol", f"{w.name} wrote a malformed event", w.name)
                if ev["ev"] == "importing":  # progress only: the candidate's import starts now
                    self.log.append({"worker": w.name, "importing_at": time.monotonic()})
                    continue
                return ev
            if w.events not in w.open:
                # The event pipe closed: the worker is gone (or closed it). Collect its status.
                try:
                    w.proc.wait(timeout=2.0)
                except subprocess.TimeoutExpired:
                    raise Stop("protocol", f"{w.name} closed its event pipe while {what}", w.name) from None
                self.drain(w)
                raise Stop("exit", f"{w.name} ended while {what}", w.name)
            now = time.monotonic()
            if now >= deadline:
                raise Stop("timeout", f"{w.name} did not finish {what} in time", w.name)
            # At most every POLL_S, not at every wake: in a timed round the worker wakes this loop
            # once per call (its audit report), and the watchers read /proc.
            if now - self._watched >= POLL_S:
                self._watched = now
                if not w.trusted:
                    self.watch_limits()
                self.gate_word()
            self.pump(w, min(POLL_S, deadline - now))

    def expect(self, w: Worker, kind: str, deadline: float, what: str) -> dict:
        ev = self.next_event(w, deadline, what)
        if ev["ev"] == "error":
            raise Stop("error", json.dumps(ev), w.name)
        if ev["ev"] != kind:
            raise Stop("protocol", f"{w.name} sent {ev['ev']!r} while {what}", w.name)
        return ev

    def drain(self, w: Worker) -> None:
        end = time.monotonic() + 0.5
        while w.open and time.monotonic() < end:
            try:
                self.pump(w, 0.05)
            except Stop:
                break

    def sleep_watching(self, w: Worker, seconds: float) -> None:
        end = time.monotonic() + seconds
        while (now := time.monotonic()) < end:
            self.watch_limits()
            self.pump(w, min(POLL_S, end - now))

    # -- modes ------------------------------------------------------------------------
    def run(self) -> dict:
        result: dict = {"mode": self.plan["mode"]}
        try:
            if self.plan["mode"] == "check":
                self.check(result)
            else:
                self.time(result)
            result["stop"] = None
        except Stop as stop:
            result["stop"] = {"why": stop.why, "detail": stop.detail, "phase": self.phase, "who": stop.who}
            if stop.why == "error":
                try:
                    result["error"] = json.loads(stop.detail)
                except ValueError:
                    pass
        except Exception as exc:  # a fault of the supervisor itself, or of a sandbox tampered with
            import traceback

            result["stop"] = {
                "why": "harness",
                "detail": traceback.format_exc()[-3000:],
                "phase": self.phase,
                "who": "supervisor",
            }
            del exc
        finally:
            self.phase = "end"
            result["phase_s"] = self.phase_s
            self.kill_untrusted()
            for w in self.workers.values():
                if w.proc.poll() is None and w.trusted:
                    w.proc.kill()
                w.proc.wait()
                self.drain(w)
                result.setdefault("workers", {})[w.name] = {
                    "exit": w.status(),
                    "stderr_tail": w.tail("stderr"),
                    "stdout_tail": w.tail("stdout", 1000),
                    "output_bytes": w.output_total,
                }
        result["peak_rss_mb"] = round(self.peak_rss_mb, 1)
        result["peak_processes"] = self.peak_procs
        result["log"] = self.log
        return result

    def check(self, result: dict) -> None:
        lim = self.limits
        self.phase = "import"
        w = self.spawn("candidate", self.plan["candidate"], trusted=False)
        deadline = time.monotonic() + lim["import_timeout_s"]
        if self.plan["candidate"]["plan"].get("contractions"):
            # Sent before the candidate is imported, so nothing of it has run yet: kept here,
            # out of its process's reach, as what its contractions are judged against.
            ev = self.expect(w, "reference_contractions", deadline, "recording the reference's contractions")
            result["reference_contractions"] = {"runs": ev.get("runs"), "error": ev.get("error")}
        self.expect(w, "loaded", deadline, "importing the candidate")
        settle = self.plan["settle_s"]
        # The runs the worker was given, in order: events must follow them exactly.
        planned = [r["id"] for r in self.plan["candidate"]["plan"]["runs"]]
        while True:
            self.phase = "construct or load inputs"
            ev = self.next_event(w, time.monotonic() + lim["import_timeout_s"], "preparing the next run")
            if ev["ev"] == "finished" and planned:
                raise Stop("protocol", f"'finished' arrived with runs {planned} still to go")
            if ev["ev"] == "finished":
                result["report"] = ev.get("report")
                self.phase = "exit"
                try:
                    w.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    raise Stop("timeout", "the candidate did not exit after finishing") from None
                return
            if ev["ev"] == "error":
                raise Stop("error", json.dumps(ev))
            if ev["ev"] != "calling":
                raise Stop("protocol", f"candidate sent {ev['ev']!r} between runs")
            run = ev.get("run")
            if not planned or run != planned[0]:
                raise Stop("protocol", f"'calling' for run {run!r}, expected {planned[:1]}")
            planned.pop(0)
            self.phase = f"forward (run {run})"
            started = time.monotonic()
            ev = self.expect(w, "returned", started + lim["forward_timeout_s"], f"forward of run {run}")
            returned = time.monotonic()
            # The forward has returned: nothing of the candidate should run any more.
            self.phase = f"after forward returned (run {run})"
            procs0 = self.untrusted() - {w.pid}
            cpu0 = sum(cpu_seconds(p) for p in self.untrusted())
            self.sleep_watching(w, settle)
            cpu1 = sum(cpu_seconds(p) for p in self.untrusted())
            procs1 = self.untrusted() - {w.pid}
            maps = mapped_files(w.pid, self.plan["candidate_roots"], self.plan.get("trusted_roots", []))
            self.log.append(
                {
                    "run": run,
                    "mapped": maps,
                    "forward_s": returned - started,
                    "settle_s": settle,
                    "settle_cpu_s": max(0.0, cpu1 - cpu0),
                    "extra_processes": sorted(procs0 | procs1),
                    "threads": threads(w.pid),
                    "py_threads": ev.get("py_threads"),
                }
            )
            w.send({"cmd": "continue"})

    # The verifier may start a timing sandbox while it still checks the candidate elsewhere, so
    # the reference's load overlaps the checks. The candidate is not started until the verifier
    # writes "go" into the gate file; "stop" (the checks failed) ends the exec at once, even
    # while the reference still loads.
    def gate_word(self) -> str:
        gate = self.plan.get("gate")
        if not gate or self.gate_open:
            return "go"
        try:
            with open(gate, encoding="ascii", errors="replace") as f:
                word = f.read(16).strip()
        except OSError:
            word = ""
        if word == "stop":
            raise Stop("gate", "the verifier's checks failed; nothing was timed", "verifier")
        self.gate_open = word == "go"
        return word

    def wait_gate(self, ref: Worker, limit: float) -> None:
        self.phase = "waiting for the checks"
        deadline = time.monotonic() + limit
        while self.gate_word() != "go":
            if time.monotonic() > deadline:
                raise Stop("timeout", f"no word from the verifier's checks in {limit:.0f} s", "verifier")
            self.pump(ref, POLL_S)

    def time(self, result: dict) -> None:
        lim, plan = self.limits, self.plan
        rng = random.SystemRandom()
        self.phase = "reference warm-up"
        # The candidate's fresh inputs: written by the reference, read by the candidate.
        fresh_fd = os.memfd_create("assay-fresh-inputs", os.MFD_CLOEXEC)
        for spec in (plan["reference"], plan["candidate"]):
            spec["plan"]["fresh_fd"] = fresh_fd
        # Each worker's audit line (worker.AuditLine). The reference's audited outputs are read
        # and dropped: the same cost as the candidate's, which are kept here, out of its reach.
        ref = self.spawn(
            "reference",
            plan["reference"],
            trusted=True,
            fds=(fresh_fd,),
            audit=AuditLine(reference_cap(plan), "verifier"),
        )
        loaded = self.expect(ref, "loaded", time.monotonic() + lim["import_timeout_s"], "loading the reference")
        result["copy_bytes"] = loaded.get("copy_bytes")
        result["reference_threads"] = loaded.get("threads")
        # A fresh round's inputs are written by the reference before it (worker.FreshInputs):
        # at most this many, the memory set aside for them.
        fresh_capacity = int(loaded.get("fresh_capacity") or 0)
        if fresh_capacity < 1:
            raise Stop("protocol", f"the reference offered {fresh_capacity} fresh inputs per round", "verifier")
        result["fresh_capacity"] = fresh_capacity
        # Everything alive now is ours (the reference may have spawned compiler processes).
        self.trusted |= pids()
        ref_nice = nice(ref.pid)
        ref_affinity = os.sched_getaffinity(ref.pid)
        our_cpus = os.sched_getaffinity(0)
        result["sandbox_cpus"] = len(our_cpus)
        if plan.get("gate"):
            self.wait_gate(ref, plan["gate_timeout_s"])
            # What the verifier put in after this sandbox started belongs to the host's uid:
            # copied, it is the candidate's to write (torch's build lock).
            if os.path.isdir(plan["ext_seed"]):
                shutil.copytree(plan["ext_seed"], plan["ext_dir"], symlinks=True, dirs_exist_ok=True)
        self.phase = "import"
        cand = self.spawn(
            "candidate",
            plan["candidate"],
            trusted=False,
            fds=(fresh_fd,),
            audit=AuditLine(int(plan["audit_max_bytes"]), "candidate"),
        )
        os.close(fresh_fd)
        self.expect(cand, "loaded", time.monotonic() + lim["import_timeout_s"], "importing the candidate")

        subjects = plan["subjects"]  # e.g. ["eager", "compiled", "copy", "candidate"]
        integrity: list[str] = []

        def worker_for(subject: str) -> Worker:
            if subject == "candidate":
                # Each subject runs alone: the reference's OpenMP threads, still spinning after
                # its last round, would otherwise share the sandbox's CPUs with the candidate.
                with contextlib.suppress(ProcessLookupError):
                    os.kill(ref.pid, signal.SIGSTOP)
                if self.stopped:
                    self.thaw_untrusted()
                return cand
            if not self.stopped:
                self.freeze_untrusted()
            # The candidate may have signalled, reniced or pinned the reference between rounds.
            try:
                os.kill(ref.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            if nice(ref.pid) != ref_nice:
                integrity.append(f"the reference worker's priority was changed to {nice(ref.pid)}")
            try:
                if os.sched_getaffinity(ref.pid) != ref_affinity:
                    integrity.append("the reference worker's CPU affinity was changed")
                    os.sched_setaffinity(ref.pid, ref_affinity)
            except OSError:
                pass
            return ref

        def cpu_of(subject: str) -> float:
            if subject == "candidate":
                return sum(cpu_ns(p) for p in self.untrusted()) / 1e9
            return cpu_ns(ref.pid) / 1e9

        calls = {"candidate": 0}  # forward calls the candidate's worker was told to make, watched

        def call(subject: str, cmd: dict, reply: str, limit: float) -> tuple[float, float]:
            if subject == "candidate" and cmd["cmd"] == "warm":
                calls["candidate"] += int(cmd["n"])
            w = worker_for(subject)
            w.send(cmd)
            # Only the trusted worker's rounds are read without watching candidate limits.
            cpu0 = cpu_of(subject)
            t0 = time.monotonic()
            self.expect(w, reply, t0 + limit, f"{cmd['cmd']} {subject}")
            t1 = time.monotonic()
            return t1 - t0, cpu_of(subject) - cpu0

        # Seconds per call each subject has shown so far: later deadlines allow 20 times that.
        calibrated: dict[str, float] = {}

        def deadline(s: str, n: int) -> float:
            pace = calibrated.get(s)
            return lim["forward_timeout_s"] * (n + 1) if pace is None else lim["forward_timeout_s"] + 20 * n * pace

        def warm(s: str, n: int) -> float:
            wall, _ = call(s, {"cmd": "warm", "subject": s, "n": n}, "warmed", deadline(s, n))
            calibrated[s] = min(calibrated.get(s, float("inf")), wall / n)
            return wall

        self.phase = "warm-up"
        for s in subjects:
            warm_up(
                lambda n, s=s: warm(s, n), plan["warmup_iters"], float(plan.get("warmup_s", 0.0)), plan["max_iters"]
            )

        def faults_of(subject: str) -> int:
            if subject == "candidate":
                return sum(minor_faults(p) for p in self.untrusted())
            return minor_faults(ref.pid)

        reads: list = []  # what each of the candidate's audited calls led to, in order
        cand.stop_all = lambda: (self.freeze_untrusted(), wait_stopped(self.untrusted()))[1]
        cand.resume_all = self.thaw_untrusted

        def timed(s: str, n: int, seed: int, audited: list[int], fresh: bool = False) -> tuple[dict, list]:
            # Each answer to a report says what the next call takes: the salt of the elements a
            # warm call changes, or which fresh input comes next. So the worker waits for it.
            # Drawn first: between the flush and the clock's start the candidate may be running.
            if fresh:
                order = list(range(n))
                rng.shuffle(order)
                salts = [rng.getrandbits(46) for _ in range(n)]
                code = [order[k] + salts[k] * FRESH_SLOTS for k in range(n)]
                first, answers = code[0], code[1:] + [0]
                # replay: input order[k] of the round's, changed at the places salts[k] gives
                keys = [[seed, order[k], k, salts[k]] for k in audited]
            else:
                salts = [seed] + [rng.getrandbits(62) for _ in range(n - 1)]
                first, answers = 0, salts[1:] + [rng.getrandbits(62)]
                keys = [[salts[k], k, k, None] for k in audited]  # replay: call k with its salt
            # The flush is untimed, so what a subject burns during it is recorded: a candidate
            # finishing deferred work there would show far more than the reference does.
            flush_wall, flush_cpu = call(s, {"cmd": "flush"}, "flushed", lim["forward_timeout_s"])
            if fresh:
                # A fresh round: every call on an input no call saw before, written by the
                # reference after the flush (the candidate's while it is stopped).
                call(
                    "eager",
                    {"cmd": "prepare", "subject": s, "seed": seed, "n": n},
                    "prepared",
                    lim["forward_timeout_s"],
                )
            w = worker_for(s)
            assert w.audit is not None  # timing workers are made with their audit line
            # The worker reports each call's output; the audited ones' are read from its memory.
            w.audit.start_round(n, audited, answers)
            faults0, cpu0 = faults_of(s), cpu_of(s)
            busy0, own0 = busy_seconds(our_cpus), sandbox_cpu_seconds()
            t0 = time.monotonic()
            # A fresh round's seed stays with the reference: the candidate reads what was written.
            if s == "candidate":
                calls["candidate"] += n
            w.send({"cmd": "round", "subject": s, "n": n, "seed": 0 if fresh else seed, "fresh": fresh, "first": first})
            self.expect(w, "done", t0 + deadline(s, n), f"a {'fresh' if fresh else 'timed'} round of {s}")
            t1 = time.monotonic()
            busy1, own1 = busy_seconds(our_cpus), sandbox_cpu_seconds()
            reported = w.audit.end_round()
            if reported != n:
                raise Stop(
                    "protocol",
                    f"{s} reported {reported} outputs on the audit line in a round of {n} calls",
                    "verifier" if w.trusted else "candidate",
                )
            if s == "candidate":
                reads.extend(w.audit.keep())
            # The time the subject was held still while its audited output was read is the
            # supervisor's, not the subject's (5-8 ms for a 16 MB output, once a round: a cost
            # that did not follow the calls, and let a candidate whose rounds were sized while it
            # was slow hide a 0.06 ms call under the roofline).
            held = w.audit.held_s
            return {
                "subject": s,
                "n": n,
                "wall_s": t1 - t0 - held,
                "held_s": held,
                "cpu_s": cpu_of(s) - cpu0,
                "audits": audited,
                "faults": faults_of(s) - faults0,
                "flush_cpu_s": flush_cpu,
                "flush_wall_s": flush_wall,
                # What ran on the sandbox's CPUs during the round that was not the sandbox's:
                # the neighbours' share of the machine, which the subject cannot lower.
                "others_cpu_s": None if busy0 is None or busy1 is None else max(0.0, busy1 - busy0 - (own1 - own0)),
            }, keys

        self.phase = "calibration"
        base_n: dict[str, int] = {}
        audits: list[dict] = []

        def note_audits(keys: list, kind: str, n: int, label) -> None:
            # What the replay needs to make each audited call's input again, and where it was.
            audits.extend(
                {
                    "kind": kind,
                    "seed": sd,
                    "n": n,
                    "index": j,
                    "call": k,
                    **({"salt": salt} if salt is not None else {}),
                    "round": label,
                }
                for sd, j, k, salt in keys
            )

        def calibration_round(s: str, n: int) -> float:
            # The candidate's are audited as the timed rounds are: one that knew these rounds
            # (their sizes double from 1) could otherwise skip its work in them and have its
            # rounds sized long (tests/verifiers/cheats/calibration_skip.py). The others' are not
            # read: a read's hold comes out of the round's time, so sizing is the same either way.
            rec, keys = timed(s, n, rng.getrandbits(62), pick_audits(rng, n) if s == "candidate" else [])
            self.log.append(rec)
            if s == "candidate":
                note_audits(keys, "warm", n, f"calibration ({n} call{'' if n == 1 else 's'})")
            return rec["wall_s"]

        for s in subjects:
            # faults: the round just logged by calibration_round
            calibrated[s] = calibrate(
                lambda n, s=s: calibration_round(s, n),
                plan["target_round_s"],
                plan["max_iters"],
                faults=lambda: int(self.log[-1]["faults"]),
            )
            base_n[s] = max(2, min(plan["max_iters"], int(plan["target_round_s"] / max(calibrated[s], 1e-6))))
        rounds = plan["rounds"]
        self.phase = "timed rounds"
        for r in range(rounds):
            order = subjects[r % len(subjects) :] + subjects[: r % len(subjects)]
            for s in order:
                # Odd rounds run three times the iterations: the time must follow (timing_integrity).
                n = base_n[s] * (1 if r % 2 == 0 else 3)
                seed = rng.getrandbits(62)
                picked = pick_audits(rng, n)
                rec, keys = timed(s, n, seed, picked)
                rec["round"] = r
                self.log.append(rec)
                if s == "candidate":
                    note_audits(keys, "warm", n, r)
        # Fresh rounds, eager's and the candidate's, interleaved: the speed the candidate is
        # credited with may exceed what it shows on inputs no call saw before only by a little
        # (the verifier's fresh_slack), so keeping what it saw earns it little.
        self.phase = "fresh rounds"
        pair = [s for s in ("eager", "candidate") if s in subjects]
        for r in range(int(plan.get("fresh_rounds", 0))):
            for s in pair if r % 2 == 0 else pair[::-1]:
                n = max(1, min(fresh_capacity, base_n[s]))
                seed = rng.getrandbits(62)
                picked = pick_audits(rng, n)
                rec, keys = timed(s, n, seed, picked, fresh=True)
                rec["fresh_round"] = r
                self.log.append(rec)
                if s == "candidate":
                    note_audits(keys, "fresh", n, f"fresh {r}")
        result["audits"] = audits
        self.phase = "audit"
        # The candidate reports, then all of it dies; only then are the outputs read from it
        # written out, and the trusted reference writes what those calls should have given.
        self.thaw_untrusted()
        cand.send({"cmd": "finish"})
        fin = self.expect(cand, "finished", time.monotonic() + lim["forward_timeout_s"] * 4, "reporting")
        result["report"] = fin.get("report")
        result["candidate_calls"] = calls["candidate"]
        self.kill_untrusted()
        result["audit_saved"], result["audit_layout"] = save_audits(plan["audit_candidate"], reads)
        assert ref.audit is not None and cand.audit is not None  # timing workers have audit lines
        result["audit_read_ms"] = {"reference": ref.audit.read_ms, "candidate": cand.audit.read_ms}
        worker_for("eager")
        ref.send(
            {
                "cmd": "replay",
                "subject": "eager",
                "audits": [[a["kind"], a["seed"], a["index"], a.get("salt")] for a in audits],
                "path": plan["audit_reference"],
            }
        )
        self.expect(
            ref, "replayed", time.monotonic() + lim["forward_timeout_s"] * (4 + len(audits)), "replaying the audit"
        )
        ref.send({"cmd": "finish"})
        self.expect(ref, "finished", time.monotonic() + 60, "finishing the reference")
        result["integrity"] = sorted(set(integrity))


def reference_cap(plan: dict) -> int:
    """The most the reference's reports may name: the task's outputs, or the copy subject's
    destination (half the task's bytes, which exceeds the outputs where inputs are large)."""
    copy_bytes = int(plan["reference"]["plan"].get("copy_bytes") or 0)
    return max(int(plan["audit_max_bytes"]), copy_bytes // 2 + (1 << 20))


def save_audits(path: str, reads: list) -> tuple[str, list]:
    """The bytes read at the candidate's audited calls, the i-th call's outputs under "a{i}_out_{j}"
    (raw bytes, as U8) in one safetensors file, with each output's [dtype, shape, strides]; or why
    there are none."""
    tensors, layouts = [], []
    for i, got in enumerate(reads):
        if got is None:
            return f"no output was read (the run's audited call {i})", []
        if isinstance(got, str):
            return f"{got} (the run's audited call {i})", []
        layout, chunks = got
        layouts.append(layout)
        tensors += [(f"a{i}_out_{j}", "U8", [len(data)], data) for j, data in enumerate(chunks)]
    if not reads:
        return "no output kept", []
    write_safetensors(path, tensors)
    return "saved", layouts


def main() -> None:
    nondumpable()
    plan = json.loads(sys.stdin.buffer.read())
    result = Supervisor(plan).run()
    sys.stdout.write("@@ASSAY " + json.dumps(result) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
