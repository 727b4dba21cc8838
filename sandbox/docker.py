"""The docker backend: a hardened container per sandbox, the helper as its only resident process.

No registry is needed: the base image is a few kilobytes (passwd, group, merged-/usr links)
imported locally and tagged by its content, and the host toolchain is bind-mounted read-only.
A user-named image (ASSAY_DOCKER_IMAGE) is used as it is, with no host binds but the
workspace and ro_binds; it must provide `python3` for the helper.

The warm path is one round trip on the container's attach socket (stdin/stdout of the
helper), not a `docker exec` (58 ms each here).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import socket
import tarfile
import threading
from functools import lru_cache
from typing import cast

from assay.errors import UserError
from assay.sandbox.base import SandboxSpec
from assay.sandbox.cgroups import BACKGROUND_SHARES, NORMAL_SHARES, Counters
from assay.sandbox.protocol import HELPER_SOURCE, ProtocolError
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

IMAGE_REPO = "assay-sandbox"
LABEL = "assay.sandbox"
START_FIX = (
    "start Docker (sudo systemctl start docker, or sudo scripts/ensure-docker.sh), "
    "or use bubblewrap: export ASSAY_SANDBOX_BACKEND=bwrap"
)

# Seconds one Docker API call may take once the daemon has answered the probe.
OP_TIMEOUT = 120

_client_lock = threading.Lock()
_client_cache: list = []


def _connect(timeout: int = 10):
    import docker

    return docker.from_env(timeout=timeout)


def client():
    """The process's docker client; UserError naming the fix when no daemon answers."""
    with _client_lock:
        if _client_cache:
            return _client_cache[0]
        ok, detail, c = _probe()
        if not ok or c is None:
            raise UserError(detail, _fix_for(detail))
        _client_cache.append(c)
        return c


def _fix_for(detail: str) -> str:
    if "ermission denied" in detail:
        return "add yourself to the docker group (sudo usermod -aG docker $USER, then log in again) or use ASSAY_SANDBOX_BACKEND=bwrap"
    if "not installed" in detail:
        return "install Docker (sudo apt-get install -y docker.io, or sudo scripts/ensure-docker.sh) or use ASSAY_SANDBOX_BACKEND=bwrap"
    return START_FIX


def _probe():
    try:
        import docker  # noqa: F401
    except ImportError:
        return False, "the docker Python SDK is not installed", None
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        c = _connect(timeout=5)
        c.ping()
        version = c.version().get("Version", "?")
        # The probe is quick to say "no daemon"; real calls get longer: a daemon that was just
        # started, or a busy host, takes more than 5 s to start a container's first task.
        c.api.timeout = OP_TIMEOUT
    except Exception as exc:  # the SDK raises several unrelated types for "no daemon"
        text = str(exc)
        if "Permission denied" in text or "PermissionError" in text:
            return False, f"no permission to use the Docker daemon at {host}", None
        if host.startswith("unix://") and not os.path.exists(host[len("unix://") :]):
            return False, f"no Docker daemon is running (no socket at {host})", None
        return False, f"the Docker daemon at {host} does not answer", None
    return True, f"Docker {version} at {host}", c


def availability() -> tuple[bool, str]:
    if _client_cache:
        try:
            _client_cache[0].ping()
            return True, f"Docker {_client_cache[0].version().get('Version', '?')}"
        except Exception:
            _client_cache.clear()
    ok, detail, c = _probe()
    if ok:
        with _client_lock:
            _client_cache[:] = [c]
    return ok, detail


def _base_image_tar(uid: int, gid: int) -> bytes:
    """A deterministic tiny rootfs: same content, same bytes, same tag."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:

        def add(name: str, kind: bytes, mode: int, data: bytes = b"", target: str = "") -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime, info.uid, info.gid = kind, mode, 0, 0, 0
            info.linkname = target
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)

        for d in ("etc", "tmp", "workspace", "proc", "sys", "dev"):
            add(d, tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755)
        for path, content in sorted(etc_files(uid, gid).items()):
            add(path.lstrip("/"), tarfile.REGTYPE, 0o644, content)
        for link, target in host_toolchain().symlinks:
            add(link.lstrip("/"), tarfile.SYMTYPE, 0o777, target=target)
    return buf.getvalue()


@lru_cache(maxsize=4)
def ensure_image(uid: int, gid: int) -> str:
    """Import the base image unless an identical one exists; returns its tag."""
    import docker.errors

    data = _base_image_tar(uid, gid)
    tag = hashlib.sha256(data).hexdigest()[:16]
    ref = f"{IMAGE_REPO}:{tag}"
    api = client().api
    try:
        api.inspect_image(ref)
    except docker.errors.ImageNotFound:
        api.import_image_from_data(data, repository=IMAGE_REPO, tag=tag)
    return ref


def _bind(src: str, dst: str, mode: str) -> str:
    if ":" in src or ":" in dst:
        raise UserError(f"docker cannot bind a path with ':' ({src} -> {dst})", "rename the path or use bwrap")
    return f"{src}:{dst}:{mode}"


class DockerSandbox(ResidentSandbox):
    backend = "docker"

    def __init__(self, spec: SandboxSpec, image: str | None = None):
        super().__init__(spec)
        from assay.settings import settings

        self._api = client().api
        self._image = image if image is not None else settings().docker_image
        self._workspace = check_spec(spec)
        self._cid: str | None = None
        self.containment = "docker cgroup limits (memory, pids, cpu)"

    def _launch(self):
        import docker.types

        spec, limits = self.spec, self.spec.limits
        uid, gid = sandbox_ids()
        binds = [_bind(str(self._workspace), spec.workdir, "rw")]
        if self._image:
            image, python, tc = self._image, "python3", None
        else:
            tc = host_toolchain()
            image, python = ensure_image(uid, gid), tc.python
            binds += [_bind(d, d, "ro") for d in (*tc.ro_dirs, *tc.etc)]
        binds += [_bind(str(src), str(dst), "ro") for src, dst in spec.ro_binds]
        cpus = min(float(limits.cpus), float(os.cpu_count() or 1))
        host_config = self._api.create_host_config(
            binds=binds,
            network_mode="none",
            read_only=True,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            pids_limit=limits.pids,
            mem_limit=limits.memory_mb << 20,
            memswap_limit=limits.memory_mb << 20,  # no swap: the memory limit is the limit
            nano_cpus=int(cpus * 1e9),
            cpu_shares=BACKGROUND_SHARES if limits.background else None,
            # Counted against the memory limit; capped so a full /tmp is ENOSPC, not an OOM kill.
            tmpfs={"/tmp": f"rw,nosuid,nodev,size={tmpfs_bytes(spec)},mode=1777"},
            ipc_mode="private",
            auto_remove=True,
            # The helper's replies go through stdout; no log driver should copy them to disk.
            log_config=docker.types.LogConfig(type="none"),
        )
        init = json.dumps({"rlimits": rlimits(spec, cgroup_limits=True)})
        created = self._api.create_container(
            image,
            command=[python, "-I", "-S", "-B", "-c", HELPER_SOURCE, init],
            user=f"{uid}:{gid}",
            working_dir=spec.workdir,
            stdin_open=True,  # with detach=False this also sets StdinOnce: our EOF ends it
            tty=False,
            environment={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            network_disabled=True,
            hostname="sandbox",
            labels={LABEL: "1", "assay.owner-pid": str(os.getpid())},
            host_config=host_config,
        )
        cid: str = created["Id"]
        self._cid = cid
        # Attach before start so the helper's greeting cannot be missed.
        sock = self._api.attach_socket(cid, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
        self._api.start(cid)
        pid = self._api.inspect_container(cid)["State"]["Pid"]
        counters = Counters.of_pid(pid) if pid else None
        return _AttachChannel(sock), counters, base_env(tc, spec)

    def boost(self) -> None:
        """Normal CPU weight from now on (its processes never had the caller's nice value:
        the engine starts them)."""
        if self._cid is not None:
            self._api.update_container(self._cid, cpu_shares=NORMAL_SHARES)

    def _before_exec(self) -> None:
        own_workspace(self._workspace, *sandbox_ids())

    def _diagnostics(self) -> str:
        chan = self._chan
        err = chan.stderr_tail() if isinstance(chan, _AttachChannel) else ""
        return err.strip().splitlines()[-1] if err.strip() else ""

    def _destroy(self) -> None:
        import docker.errors

        cid, self._cid = self._cid, None
        if cid is None:
            return
        try:
            self._api.remove_container(cid, force=True)
        except docker.errors.APIError:
            pass  # already gone (auto-remove) or being removed


class _AttachChannel:
    """The attach stream: docker multiplexes stdout/stderr in 8-byte-headed frames."""

    MAX_CHUNK = 1 << 20

    def __init__(self, sock):
        # The SDK wraps the socket (in a SocketIO or a response); its _sock is the socket itself.
        self._sock = cast(socket.socket, getattr(sock, "_sock", sock))
        self._keep = sock  # the SDK wrapper holds the HTTP response open
        self._sock.setblocking(True)
        self._header = bytearray()
        self._left = 0
        self._stream = 0
        self._stderr = bytearray()

    def fileno(self) -> int:
        return self._sock.fileno()

    def send(self, data: bytes) -> None:
        self._sock.sendall(data)

    def stderr_tail(self) -> str:
        return self._stderr[-4096:].decode(errors="replace")

    def recv(self) -> bytes | None:
        chunk = self._sock.recv(self.MAX_CHUNK)
        if not chunk:
            return None
        out = bytearray()
        view = memoryview(chunk)
        while view:
            if self._left == 0:
                need = 8 - len(self._header)
                self._header += view[:need]
                view = view[need:]
                if len(self._header) < 8:
                    break
                stream, zero, size = self._header[0], bytes(self._header[1:4]), int.from_bytes(self._header[4:8], "big")
                self._header.clear()
                if stream not in (1, 2) or zero != b"\0\0\0":
                    raise ProtocolError("malformed docker stream header")
                self._stream, self._left = stream, size
                continue
            take = view[: self._left]
            view = view[len(take) :]
            self._left -= len(take)
            if self._stream == 1:
                out += take
            else:
                self._stderr += take
                del self._stderr[:-8192]
        return bytes(out)

    def close(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        try:
            self._keep.close()
        except Exception:
            pass
        self._sock.close()
