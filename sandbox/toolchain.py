"""What of the host a sandbox may see: the read-only toolchain, a small env, a tiny /etc.

The toolchain is the host's /usr (compilers, libc), the merged-/usr links, and the Python
installation assay runs on (its venv and base interpreter, so torch and its headers are
there). /etc is never bound whole: a sandbox started by root under bwrap maps its uid to
host root, so /etc/shadow would be readable. Only the few /etc entries compilers and the
dynamic loader need are bound; passwd/group are generated. assay's own source tree is not
bound: agent code has no business importing the gateway.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from assay.errors import UserError
from assay.sandbox.base import SandboxSpec

SANDBOX_USER = "sandbox"
TOP_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# The dynamic loader's cache and Debian's alternatives (c++ -> g++) are all compilers need.
ETC_ENTRIES = ("/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d")
# Binding any of these whole would expose the host; a Python prefix equal to one is refused.
NEVER_BIND = {"/", "/etc", "/root", "/home", "/var", "/proc", "/sys", "/dev", "/run", "/tmp"}


@dataclass(frozen=True)
class Toolchain:
    ro_dirs: tuple[str, ...]  # bound read-only at the same path
    symlinks: tuple[tuple[str, str], ...]  # (link path, target) recreated inside
    etc: tuple[str, ...]  # /etc entries bound read-only
    python: str  # the interpreter the helper runs on
    bin_dirs: tuple[str, ...]  # put first on PATH


def _python_prefixes() -> list[str]:
    real = os.path.realpath(sys.executable)
    candidates = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    candidates.append(os.path.dirname(os.path.dirname(real)))
    out: list[str] = []
    for c in candidates:
        c = os.path.realpath(c)
        if c not in out:
            out.append(c)
    return out


def covered(path: str, dirs: list[str]) -> bool:
    """`path` is one of `dirs` or lies below one."""
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in dirs)


@lru_cache(maxsize=1)
def host_toolchain() -> Toolchain:
    ro: list[str] = ["/usr"]
    links: list[tuple[str, str]] = []
    for d in TOP_DIRS:
        if os.path.islink(d):
            links.append((d, os.readlink(d)))
        elif os.path.isdir(d):
            ro.append(d)
    for prefix in _python_prefixes():
        if prefix in NEVER_BIND:
            continue
        if not covered(prefix, ro):
            ro.append(prefix)
    etc = tuple(e for e in ETC_ENTRIES if os.path.exists(e))
    venv_bin = os.path.join(sys.prefix, "bin")
    python = os.path.join(venv_bin, "python") if os.path.exists(os.path.join(venv_bin, "python")) else sys.executable
    return Toolchain(tuple(ro), tuple(links), etc, python, (venv_bin,))


def sandbox_ids() -> tuple[int, int]:
    """uid/gid commands run as: the caller's own ids, or nobody's when the caller is root."""
    uid, gid = os.getuid(), os.getgid()
    return (65534, 65534) if uid == 0 else (uid, gid)


def etc_files(uid: int, gid: int) -> dict[str, bytes]:
    """A minimal /etc/passwd and /etc/group, so getpwuid() and tools that ask work."""
    passwd = f"root:x:0:0:root:/root:/bin/sh\n{SANDBOX_USER}:x:{uid}:{gid}:assay sandbox:/tmp:/bin/sh\n"
    group = f"root:x:0:\n{SANDBOX_USER}:x:{gid}:\n"
    return {"/etc/passwd": passwd.encode(), "/etc/group": group.encode()}


def base_env(toolchain: Toolchain | None, spec: SandboxSpec) -> dict[str, str]:
    """The whole environment a command starts with; nothing comes from the host's env."""
    path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    if toolchain:
        path = ":".join(toolchain.bin_dirs) + ":" + path
    return {
        "PATH": path,
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "USER": SANDBOX_USER,
        "LOGNAME": SANDBOX_USER,
        "LANG": "C.UTF-8",
        "PWD": spec.workdir,
    }


def merge_env(base: dict[str, str], extra: dict[str, str] | None) -> dict[str, str]:
    """Base env plus the caller's explicit variables, checked so none can break the exec."""
    env = dict(base)
    for key, value in (extra or {}).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise UserError(f"sandbox env {key!r} is not a string pair", "pass env as a dict of str to str")
        if not key or "=" in key or "\0" in key or "\0" in value:
            raise UserError(f"sandbox env name {key!r} is invalid", "use names without '=' or NUL bytes")
        env[key] = value
    return env


def check_spec(spec: SandboxSpec) -> Path:
    """Validate what a spec asks to bind; returns the workspace's real path (created if new)."""
    workspace = Path(spec.workspace).expanduser()
    try:
        workspace.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(
            f"sandbox workspace {workspace} cannot be created ({exc.strerror})",
            "point the run at a writable directory",
        ) from None
    if not spec.workdir.startswith("/") or spec.workdir.rstrip("/") in NEVER_BIND | {"/usr"}:
        raise UserError(f"sandbox workdir {spec.workdir!r} is not allowed", "use an absolute path such as /workspace")
    for src, dst in spec.ro_binds:
        if not Path(src).exists():
            raise UserError(f"sandbox read-only bind {src} does not exist", "create it or drop it from ro_binds")
        if not str(dst).startswith("/") or str(dst).rstrip("/") in NEVER_BIND | {"/usr"}:
            raise UserError(
                f"sandbox bind target {dst!r} is not allowed", "bind under a fresh absolute path, e.g. /task"
            )
    return workspace.resolve()


def tmpfs_bytes(spec: SandboxSpec) -> int:
    """Size of the sandbox's private /tmp: half its memory (tmpfs pages are memory)."""
    return max(16, spec.limits.memory_mb // 2) << 20


def rlimits(spec: SandboxSpec, cgroup_limits: bool) -> dict[str, int]:
    """Per-process limits the helper sets on itself (its commands inherit them).

    Core dumps are always off (they would land in the workspace). Without cgroups, address
    space and process count fall back to rlimits: weaker, see `assay sandbox check`.
    """
    limits = {"CORE": 0}
    if not cgroup_limits:
        limits["AS"] = spec.limits.memory_mb << 20
        limits["NPROC"] = spec.limits.pids
    return limits


def own_workspace(path: Path, uid: int, gid: int) -> None:
    """Give the workspace tree to the host uid the sandbox writes as (only a root caller can, and must).

    Docker runs commands as nobody; bwrap as nobody, or as root where it cannot drop. Files
    the host adds later (a gateway tool writing as root) would be read-only to the sandbox,
    so this runs before every exec, while no sandbox process is alive. fwalk with dir fds
    and no-follow chown: a symlink planted in the workspace can never redirect a chown.
    """
    if os.getuid() != 0:
        return
    top = os.lstat(path)
    if top.st_uid != uid or top.st_gid != gid:
        os.chown(path, uid, gid, follow_symlinks=False)
    for _, dirs, files, dirfd in os.fwalk(path, follow_symlinks=False):
        for name in dirs + files:
            try:
                st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
                if st.st_uid != uid or st.st_gid != gid:
                    os.chown(name, uid, gid, dir_fd=dirfd, follow_symlinks=False)
            except FileNotFoundError:
                pass
