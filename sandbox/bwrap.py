"""The bubblewrap backend: namespaces from bwrap, whole-sandbox limits from a cgroup.

One long-lived `bwrap` per sandbox runs the helper as PID 1 of fresh user, mount, PID,
network, IPC, UTS and cgroup namespaces. When this process can create cgroups (root here),
bwrap is started inside a new cgroup with memory, pids and CPU limits, joined before bwrap
runs so nothing escapes them. Otherwise the helper falls back to rlimits, which
`assay sandbox check` reports as weaker containment.

Started by root, bwrap goes through launcher.py, which drops to nobody first: commands then
run as host uid 65534, not as a capability-less host root (see launcher.py for why).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from functools import cache, lru_cache
from pathlib import Path

from assay.errors import UserError
from assay.sandbox import background
from assay.sandbox.base import SandboxSpec
from assay.sandbox.cgroups import Cgroup, CgroupUnavailable
from assay.sandbox.protocol import HELPER_SOURCE
from assay.sandbox.resident import ResidentSandbox
from assay.sandbox.toolchain import (
    base_env,
    check_spec,
    etc_files,
    host_toolchain,
    own_workspace,
    rlimits,
    sandbox_ids,
    tmpfs_bytes,
)

INSTALL_FIX = "install bubblewrap: sudo apt-get install -y bubblewrap (or run scripts/ensure-bwrap.sh)"

# Joins the cgroups named before "--" (so the limits hold from bwrap's first instruction),
# then becomes bwrap.
_JOIN = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'


# --die-with-parent fires when the *thread* that forked bwrap exits (PR_SET_PDEATHSIG), and
# worker threads of async runtimes do exit when idle. So every bwrap is forked by this one
# thread, which lives as long as the process.
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="assay-bwrap-spawner")


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


@cache
def _supports(flag: str) -> bool:
    path = bwrap_path()
    if not path:
        return False
    out = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10)
    return flag in out.stdout + out.stderr


NOBODY = 65534
STAGE_ROOT = "/dev/shm"  # a tmpfs is mounted over it, in the launcher's private mount namespace only
LAUNCHER = Path(__file__).with_name("launcher.py")


def _launcher_argv(cgroup_procs: list[str], stage: list[tuple[str, str]], argv: list[str]) -> list[str]:
    spec = {
        "cgroup_procs": cgroup_procs,
        "stage": stage,
        "stage_root": STAGE_ROOT,
        "uid": NOBODY,
        "gid": NOBODY,
        "argv": argv,
    }
    return [os.path.realpath(sys.executable), "-I", "-S", str(LAUNCHER), json.dumps(spec)]


@lru_cache(maxsize=1)
def _mode() -> tuple[str, int, str]:
    """(mode, host uid commands run as, what that means).

    A sandbox's uid is mapped to the uid that started bwrap. Started by root, that is host
    root: no capabilities, but permission checks that only compare uids (sysctl files in
    /proc/sys, root-owned files) would pass. So root starts bwrap through launcher.py as
    nobody where the kernel allows unprivileged user namespaces, and falls back only where not.
    """
    uid = os.getuid()
    if uid != 0:
        return "user", uid, f"commands run as your uid {uid}"
    path = bwrap_path() or "bwrap"
    probe = subprocess.run(
        _launcher_argv(
            [],
            [],
            [
                path,
                "--unshare-all",
                "--die-with-parent",
                "--ro-bind",
                "/usr",
                "/usr",
                *_symlink_args(),
                "--",
                "/usr/bin/true",
            ],
        ),
        capture_output=True,
        timeout=10,
    )
    if probe.returncode == 0:
        return "nobody", NOBODY, f"commands run as host uid {NOBODY} (unprivileged user namespace)"
    return (
        "root",
        0,
        (
            "weaker: no unprivileged user namespaces, so the sandbox uid maps to host root "
            "(no capabilities; /proc/sys hidden)"
        ),
    )


def availability() -> tuple[bool, str]:
    """Can bwrap start a sandbox here? Runs a tiny one, since user namespaces may be off."""
    path = bwrap_path()
    if not path:
        return False, f"bubblewrap not found on PATH; {INSTALL_FIX}"
    try:
        version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
        probe = subprocess.run(
            [
                path,
                "--unshare-all",
                "--die-with-parent",
                "--ro-bind",
                "/usr",
                "/usr",
                *_symlink_args(),
                "--",
                "/usr/bin/true",
            ],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"bubblewrap at {path} does not run ({exc})"
    if probe.returncode != 0:
        err = probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else f"exit {probe.returncode}"
        return False, (
            f"bubblewrap cannot create namespaces here ({err}); enable unprivileged user namespaces, "
            "e.g. sudo sysctl -w kernel.unprivileged_userns_clone=1 "
            "(Ubuntu 24.04: kernel.apparmor_restrict_unprivileged_userns=0)"
        )
    return True, f"{version or 'bubblewrap'} at {path}; {_mode()[2]}"


_usable: list[str] = []  # bwrap paths that have worked in this process


def require() -> str:
    """bwrap's path, or a UserError naming the fix. A success is remembered (cold starts stay cheap)."""
    path = bwrap_path()
    if path and path in _usable:
        return path
    ok, detail = availability()
    if ok and path:
        _usable.append(path)
    if not ok:
        if not bwrap_path():
            raise UserError("bubblewrap (bwrap) is not installed", INSTALL_FIX.removeprefix("install bubblewrap: "))
        raise UserError(detail.split(";")[0], detail.split("; ", 1)[-1])
    return bwrap_path() or "bwrap"


def _symlink_args() -> list[str]:
    args: list[str] = []
    for link, target in host_toolchain().symlinks:
        args += ["--symlink", target, link]
    return args


class BwrapSandbox(ResidentSandbox):
    backend = "bwrap"

    def __init__(self, spec: SandboxSpec):
        super().__init__(spec)
        self._bwrap = require()
        self._workspace = check_spec(spec)
        self._proc: subprocess.Popen | None = None
        self._cgroup: Cgroup | None = None
        self._owner = (os.getuid(), os.getgid())
        self.containment = ""

    def _args(self, mode: str, src, data_fds: dict[str, int]) -> list[str]:
        tc = host_toolchain()
        uid, gid = sandbox_ids()
        args = [
            self._bwrap,
            "--unshare-all",  # user, mount, pid, net, ipc, uts, cgroup
            "--unshare-user",
            "--die-with-parent",
            "--new-session",  # no controlling tty: no TIOCSTI into the host's terminal
            "--as-pid-1",  # the helper is PID 1, so kill(-1) reaches every sandbox process
            "--uid",
            str(uid),
            "--gid",
            str(gid),
            "--hostname",
            "sandbox",
            "--clearenv",
            "--setenv",
            "PATH",
            "/usr/bin:/bin",
            "--setenv",
            "LANG",
            "C.UTF-8",
            "--cap-drop",
            "ALL",
        ]
        if _supports("--disable-userns"):
            args.append("--disable-userns")  # no nested user namespaces to regain capabilities in
        # src(): where bwrap finds a host path; staged by the launcher when bwrap runs as nobody.
        # A toolchain dir under /tmp or /dev (a venv kept in /tmp) is bound after the private
        # tmpfs mounts below, or they would cover it.
        scratch = ("/tmp", "/dev")
        late = [d for d in tc.ro_dirs if any(d == m or d.startswith(m + "/") for m in scratch)]
        for d in tc.ro_dirs:
            if d not in late:
                args += ["--ro-bind", src(d), d]
        args += _symlink_args()
        for e in tc.etc:
            args += ["--ro-bind", src(e), e]
        for path, fd in data_fds.items():
            args += ["--ro-bind-data", str(fd), path]
        args += ["--proc", "/proc"]
        if mode == "root":
            # Sysctl files check only "euid is root", which a root-mapped sandbox passes.
            args += ["--tmpfs", "/proc/sys", "--remount-ro", "/proc/sys"]
        # Private scratch; tmpfs pages count against the memory cgroup, and a size cap makes a
        # full /tmp an ENOSPC for the writer rather than an OOM kill of whatever is largest.
        tmp_size = ["--size", str(tmpfs_bytes(self.spec))] if _supports("--size") else []
        shm_size = ["--size", str(64 << 20)] if _supports("--size") else []
        args += [
            "--dev",
            "/dev",
            "--perms",
            "1777",
            *shm_size,
            "--tmpfs",
            "/dev/shm",
            "--perms",
            "1777",
            *tmp_size,
            "--tmpfs",
            "/tmp",
            "--bind",
            src(str(self._workspace)),
            self.spec.workdir,
        ]
        for d in late:
            args += ["--ro-bind", src(d), d]
        for host_path, dst in self.spec.ro_binds:
            args += ["--ro-bind", src(str(host_path)), str(dst)]
        args += ["--remount-ro", "/", "--chdir", self.spec.workdir]
        return args

    def _launch(self):
        limits = self.spec.limits
        mode, host_uid, mode_detail = _mode()
        try:
            self._cgroup = Cgroup.create(limits.memory_mb, limits.pids, limits.cpus, limits.background)
            self.containment = f"{self._cgroup.kind} ({', '.join(self._cgroup.controllers)}); {mode_detail}"
        except CgroupUnavailable as exc:
            self._cgroup = None
            self.containment = f"rlimits only, weaker: {exc}; {mode_detail}"
        self._owner = (host_uid, host_uid if mode != "user" else os.getgid())
        init = json.dumps({"rlimits": rlimits(self.spec, cgroup_limits=self._cgroup is not None)})
        uid, gid = sandbox_ids()
        fds: dict[str, int] = {}
        keep: list[int] = []
        stage: list[tuple[str, str]] = []

        def src(path: str) -> str:
            if mode != "nobody":
                return path
            staged = f"{STAGE_ROOT}/{len(stage)}"
            stage.append((path, staged))
            return staged

        try:
            for path, content in etc_files(uid, gid).items():
                r, w = os.pipe()
                os.write(w, content)  # a few hundred bytes: fits the pipe buffer
                os.close(w)
                fds[path] = r
                keep.append(r)
            argv = self._args(mode, src, fds) + [
                "--",
                host_toolchain().python,
                "-I",
                "-S",
                "-B",
                "-c",
                HELPER_SOURCE,
                init,
            ]
            procs = [str(p) for p in self._cgroup.procs] if self._cgroup else []
            if mode == "nobody":
                argv = _launcher_argv(procs, stage, argv)
            elif procs:
                argv = ["/bin/sh", "-c", _JOIN, "sh", *procs, "--", *argv]
            self._proc = _SPAWNER.submit(
                subprocess.Popen,
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=keep,
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},  # bwrap itself sees no host env
                close_fds=True,
            ).result()
        finally:
            for fd in keep:
                os.close(fd)
        env = base_env(host_toolchain(), self.spec)
        counters = self._cgroup.counters if self._cgroup else None
        return _PipeChannel(self._proc), counters, env

    def boost(self) -> None:
        """Normal CPU priority from now on: the cgroup's weight, and the nice value its
        processes inherited from a background caller (sandbox/background.py)."""
        cgroup = self._cgroup
        if cgroup is not None:
            cgroup.foreground()
            for pid in cgroup.pids():
                background.renice(pid)

    def _before_exec(self) -> None:
        own_workspace(self._workspace, *self._owner)

    def _diagnostics(self) -> str:
        proc = self._proc
        if proc is None or proc.stderr is None:
            return ""
        if proc.poll() is None:
            return "helper did not answer"
        try:
            err = proc.stderr.read(4096).decode(errors="replace").strip()
        except (OSError, ValueError):
            err = ""
        return err.splitlines()[-1] if err else f"bwrap exited {proc.returncode}"

    def _destroy(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            for f in (proc.stdin, proc.stdout, proc.stderr):
                try:
                    if f is not None:
                        f.close()
                except OSError:
                    pass
        cg, self._cgroup = self._cgroup, None
        if cg is not None:
            # The helper was PID 1: its death kills its namespace; this is the backstop.
            cg.kill()
            cg.remove()


class _PipeChannel:
    def __init__(self, proc: subprocess.Popen):
        assert proc.stdin and proc.stdout
        self._in = proc.stdin.fileno()
        self._out = proc.stdout.fileno()
        self._proc = proc

    def fileno(self) -> int:
        return self._out

    def send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._in, view) :]

    def recv(self) -> bytes | None:
        data = os.read(self._out, 1 << 20)
        return data or None

    def close(self) -> None:
        assert self._proc.stdin
        try:
            self._proc.stdin.close()  # EOF: the helper kills its commands and exits
        except OSError:
            pass
