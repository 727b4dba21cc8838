"""Kernel control groups: the limits bwrap cannot set itself, and the counters that say why.

A sandbox's memory, process and CPU limits hold for the whole sandbox only when they are
kernel cgroup limits: rlimits are per process (RLIMIT_AS) or per uid (RLIMIT_NPROC, and a
bwrap sandbox started by root maps its uid to host root). Both cgroup v1 and v2 are
supported; a new cgroup is created below the caller's own so the caller's confinement
still holds. The counters (OOM kills, refused forks) tell the host, without asking the
untrusted helper, whether a command was killed for memory or hit the process limit.
"""

from __future__ import annotations

import errno
import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

PREFIX = "assay-sbx-"
# A background sandbox's CPU share: the minimum each hierarchy takes (v1 shares, v2 weight).
BACKGROUND_SHARES = 2
BACKGROUND_WEIGHT = 1
# ...and everyone else's (the kernel's defaults).
NORMAL_SHARES = 1024
NORMAL_WEIGHT = 100


class CgroupUnavailable(Exception):
    """No writable cgroup for limits here; the message says why."""


@dataclass(frozen=True)
class _Mount:
    point: Path
    root: str
    fstype: str
    options: frozenset[str]


@lru_cache(maxsize=1)
def _mounts() -> tuple[_Mount, ...]:
    mounts = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return ()
    for line in lines:
        pre, _, post = line.partition(" - ")
        parts, tail = pre.split(), post.split()
        if len(parts) < 5 or len(tail) < 3 or not tail[0].startswith("cgroup"):
            continue
        mounts.append(_Mount(Path(parts[4]), parts[3], tail[0], frozenset(tail[2].split(","))))
    return tuple(mounts)


def _v1_mount(controller: str) -> _Mount | None:
    for m in _mounts():
        if m.fstype == "cgroup" and controller in m.options:
            return m
    return None


def _v2_mount() -> _Mount | None:
    for m in _mounts():
        if m.fstype == "cgroup2":
            try:
                controllers = (m.point / "cgroup.controllers").read_text().split()
            except OSError:
                continue
            if "memory" in controllers and "pids" in controllers:
                return m
    return None


def _membership(pid: int | str) -> dict[str, str]:
    """controller -> cgroup path of `pid` ("" is the v2 unified hierarchy)."""
    out: dict[str, str] = {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(",") if controllers else [""]:
            out[c] = path
    return out


def _dir_in(mount: _Mount, path: str) -> Path | None:
    """Host directory of cgroup `path` under `mount`, or None if it lies outside that mount."""
    root = mount.root.rstrip("/")
    if root and not (path == root or path.startswith(root + "/")):
        return None
    rel = path[len(root) :].lstrip("/")
    return mount.point / rel if rel else mount.point


def _read_counter(path: Path | None, key: str) -> int:
    if path is None:
        return 0
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


@dataclass(frozen=True)
class Counters:
    """Kernel counters of one cgroup: OOM kills and forks refused at the process limit."""

    memory_events: Path | None
    pids_events: Path | None
    v2: bool

    def snapshot(self) -> tuple[int, int]:
        return (
            _read_counter(self.memory_events, "oom_kill"),
            _read_counter(self.pids_events, "max"),
        )

    @classmethod
    def of_pid(cls, pid: int) -> Counters | None:
        """The counters of the cgroup `pid` lives in (e.g. a container's first process)."""
        try:
            member = _membership(pid)
        except (OSError, ValueError):
            return None
        mem_m, pids_m = _v1_mount("memory"), _v1_mount("pids")
        if mem_m and pids_m and "memory" in member and "pids" in member:
            mem, pids = _dir_in(mem_m, member["memory"]), _dir_in(pids_m, member["pids"])
            if mem and pids:
                return cls(mem / "memory.oom_control", pids / "pids.events", v2=False)
        v2 = _v2_mount()
        if v2 and "" in member:
            d = _dir_in(v2, member[""])
            if d:
                return cls(d / "memory.events", d / "pids.events", v2=True)
        return None


@dataclass
class Cgroup:
    """One sandbox's own cgroup(s), with its limits written; `procs` are the files to join."""

    dirs: list[Path]
    procs: list[Path]
    counters: Counters
    kind: str
    controllers: tuple[str, ...]
    notes: list[str] = field(default_factory=list)

    @classmethod
    def create(cls, memory_mb: int, pids: int, cpus: float, background: bool = False) -> Cgroup:
        mem_m, pids_m = _v1_mount("memory"), _v1_mount("pids")
        if mem_m and pids_m:
            return cls._create_v1(memory_mb, pids, cpus, background)
        if _v2_mount():
            return cls._create_v2(memory_mb, pids, cpus, background)
        raise CgroupUnavailable("no cgroup hierarchy with the memory and pids controllers is mounted")

    @classmethod
    def _create_v1(cls, memory_mb: int, pids: int, cpus: float, background: bool = False) -> Cgroup:
        name = PREFIX + uuid.uuid4().hex[:12]
        member = _membership("self")
        made: list[Path] = []
        found: dict[str, Path] = {}
        try:
            for controller in ("memory", "pids", "cpu"):
                mount = _v1_mount(controller)
                if mount is None or controller not in member:
                    if controller == "cpu":
                        continue
                    raise CgroupUnavailable(f"cgroup v1 controller {controller} is not mounted")
                parent = _dir_in(mount, member[controller])
                if parent is None:
                    raise CgroupUnavailable(f"own {controller} cgroup is outside its mount")
                d = parent / name
                if d in made:  # co-mounted controllers share one directory
                    found[controller] = d
                    continue
                d.mkdir()
                made.append(d)
                found[controller] = d
            mem, pid = found["memory"], found["pids"]
            limit = str(memory_mb << 20)
            _write(mem / "memory.limit_in_bytes", limit)
            if (mem / "memory.memsw.limit_in_bytes").exists():
                # No swap either, so the memory limit is the whole story.
                _write(mem / "memory.memsw.limit_in_bytes", limit, optional=True)
            _write(pid / "pids.max", str(pids))
            controllers = ("memory", "pids")
            if "cpu" in found:
                period = 100_000
                _write(found["cpu"] / "cpu.cfs_period_us", str(period))
                _write(found["cpu"] / "cpu.cfs_quota_us", str(max(1000, int(cpus * period))))
                if background:
                    _write(found["cpu"] / "cpu.shares", str(BACKGROUND_SHARES))
                controllers += ("cpu",)
        except OSError as exc:
            _remove(made)
            raise CgroupUnavailable(f"cgroup v1 is not writable here ({exc.strerror})") from None
        except CgroupUnavailable:
            _remove(made)
            raise
        counters = Counters(mem / "memory.oom_control", pid / "pids.events", v2=False)
        return cls(made, [d / "cgroup.procs" for d in made], counters, "cgroup v1", controllers)

    @classmethod
    def _create_v2(cls, memory_mb: int, pids: int, cpus: float, background: bool = False) -> Cgroup:
        mount = _v2_mount()
        assert mount is not None
        member = _membership("self")
        parent = _dir_in(mount, member.get("", "/"))
        if parent is None:
            raise CgroupUnavailable("own cgroup v2 is outside the mount")
        d = parent / (PREFIX + uuid.uuid4().hex[:12])
        try:
            enabled = (parent / "cgroup.subtree_control").read_text().split()
            missing = [c for c in ("memory", "pids", "cpu") if c not in enabled]
            if missing:
                # Fails (EBUSY) when our own cgroup holds processes and is not the root:
                # cgroup v2 allows controllers only on leaves. Then we fall back to rlimits.
                _write(parent / "cgroup.subtree_control", " ".join("+" + c for c in missing))
            d.mkdir()
        except OSError as exc:
            raise CgroupUnavailable(
                f"cgroup v2 at {parent} cannot delegate memory/pids to a child ({exc.strerror})"
            ) from None
        try:
            _write(d / "memory.max", str(memory_mb << 20))
            _write(d / "memory.swap.max", "0", optional=True)
            _write(d / "pids.max", str(pids))
            controllers: tuple[str, ...] = ("memory", "pids")
            if (d / "cpu.max").exists():
                period = 100_000
                _write(d / "cpu.max", f"{max(1000, int(cpus * period))} {period}")
                if background:
                    _write(d / "cpu.weight", str(BACKGROUND_WEIGHT))
                controllers += ("cpu",)
        except OSError as exc:
            _remove([d])
            raise CgroupUnavailable(f"cgroup v2 limits cannot be written ({exc.strerror})") from None
        counters = Counters(d / "memory.events", d / "pids.events", v2=True)
        return cls([d], [d / "cgroup.procs"], counters, "cgroup v2", controllers)

    def foreground(self) -> None:
        """Normal CPU weight from now on (a background sandbox whose work became urgent)."""
        if "cpu" not in self.controllers:
            return
        for d in self.dirs:
            if (d / "cpu.weight").exists():
                _write(d / "cpu.weight", str(NORMAL_WEIGHT), optional=True)
            elif (d / "cpu.shares").exists():
                _write(d / "cpu.shares", str(NORMAL_SHARES), optional=True)

    def pids(self) -> set[int]:
        found: set[int] = set()
        for procs in self.procs:
            try:
                found.update(int(p) for p in procs.read_text().split())
            except (OSError, ValueError):
                pass
        return found

    def kill(self) -> None:
        """SIGKILL everything in the cgroup: the backstop when the helper does not answer."""
        kill_file = self.dirs[0] / "cgroup.kill"
        if self.counters.v2 and kill_file.exists():
            _write(kill_file, "1", optional=True)
            return
        for _ in range(50):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.002)

    def remove(self) -> None:
        _remove(self.dirs)


def _write(path: Path, value: str, optional: bool = False) -> None:
    try:
        with open(path, "w") as f:
            f.write(value)
    except OSError:
        if not optional:
            raise


def _remove(dirs: list[Path]) -> None:
    for d in dirs:
        for _ in range(100):
            try:
                d.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    break
                time.sleep(0.01)


def prune() -> int:
    """Remove empty sandbox cgroups left by a host process that died; returns how many."""
    removed = 0
    try:
        member = _membership("self")
    except OSError:
        return 0
    for m in _mounts():
        keys = [c for c in m.options if c in member] if m.fstype == "cgroup" else [""]
        for key in keys[:1]:
            parent = _dir_in(m, member.get(key, "/")) if key in member else None
            if parent is None or not parent.is_dir():
                continue
            for d in parent.glob(PREFIX + "*"):
                try:
                    d.rmdir()
                    removed += 1
                except OSError:
                    pass
    return removed


def support() -> tuple[str | None, str]:
    """(kind, detail): can this process create limited cgroups? Tries, then cleans up."""
    try:
        cg = Cgroup.create(64, 16, 1.0)
    except CgroupUnavailable as exc:
        return None, str(exc)
    cg.remove()
    return cg.kind, f"{cg.kind} ({', '.join(cg.controllers)})"
