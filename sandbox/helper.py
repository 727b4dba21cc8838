"""The resident exec helper: the first process inside every sandbox.

This file is not imported by assay. Its source is handed to the sandbox's Python as
`python -I -S -c <source> <init-json>`, so it must stay standard-library only and must not
import anything from assay (the source tree is never bound into a sandbox).

Why it exists: starting a container (or even one `docker exec`) per command costs tens to
hundreds of milliseconds. The helper is started once per sandbox and runs each command
it is sent, so a warm exec costs one round trip on a pipe.

Protocol, on stdin/stdout: frames of a 4-byte big-endian length followed by UTF-8 JSON.
  helper -> host, once at start:  {"ready": true, "dumpable": bool}
  host -> helper:  {"op": "exec", "id": int, "argv": [str], "env": {str: str}, "cwd": str,
                    "timeout": float, "output_bytes": int, "stdin": base64}
  host -> helper, during an exec: {"op": "kill", "reason": "memory" | "pids"}
  helper -> host:  {"id": int, "exit": int, "stdout": base64, "stderr": base64,
                    "killed": null | "timeout" | "output" | "memory" | "pids", "truncated": bool}
The host treats every helper frame as untrusted: the command may have tampered with the
sandbox, so the host caps sizes, parses strictly and keeps its own deadline.

The helper runs as PID 1 of the sandbox's PID namespace. That makes two things cheap and
exact: `kill(-1, SIGKILL)` reaches every other process in the sandbox (also ones that left
the command's session with setsid), and every orphan is re-parented to us for reaping.
"""

import base64
import json
import os
import select
import signal
import struct
import subprocess
import sys
import time

MAX_REQUEST = 512 << 20
CHUNK = 1 << 16


def _harden():
    # As PID 1 only signals with a handler can reach us from inside the namespace; Python
    # installs one for SIGINT, so put the default back and the command cannot interrupt us.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    # Non-dumpable: the command (same uid) can then neither ptrace us nor open /proc/1/fd,
    # /proc/1/mem or /proc/1/environ, so it cannot forge our replies.
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(4, 0, 0, 0, 0) != 0  # PR_SET_DUMPABLE = 4
    except Exception:
        return True


def _apply_rlimits(limits):
    import resource

    for name, value in limits.items():
        res = getattr(resource, "RLIMIT_" + name, None)
        if res is None:
            continue
        try:
            resource.setrlimit(res, (value, value))
        except (ValueError, OSError):
            pass


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def send(obj):
    body = json.dumps(obj, separators=(",", ":")).encode()
    _write_all(1, struct.pack(">I", len(body)) + body)


class Frames:
    """Frames from the host on fd 0; `buffer` keeps what arrives early."""

    def __init__(self):
        self.buffer = bytearray()
        self.eof = False

    def feed(self):
        data = os.read(0, CHUNK)
        if not data:
            self.eof = True
        self.buffer += data

    def pop(self):
        if len(self.buffer) < 4:
            return None
        (size,) = struct.unpack(">I", self.buffer[:4])
        if size > MAX_REQUEST:
            raise SystemExit("request too large")
        if len(self.buffer) < 4 + size:
            return None
        body = bytes(self.buffer[4 : 4 + size])
        del self.buffer[: 4 + size]
        return json.loads(body)

    def next_blocking(self):
        while True:
            msg = self.pop()
            if msg is not None or self.eof:
                return msg
            self.feed()


def kill_all():
    """SIGKILL every process in the sandbox but us, and reap them, until none is left."""
    while True:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            while True:
                pid, _ = os.waitpid(-1, os.WNOHANG)
                if pid == 0:
                    break
        except ChildProcessError:
            return
        time.sleep(0.001)


def run(req, frames):
    started = time.monotonic()
    deadline = started + float(req["timeout"])
    cap = int(req["output_bytes"])
    stdin_data = base64.b64decode(req.get("stdin") or "")
    try:
        proc = subprocess.Popen(
            req["argv"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=req["env"],
            cwd=req["cwd"],
            close_fds=True,
            start_new_session=True,
        )
    except OSError as exc:
        code = 127 if isinstance(exc, FileNotFoundError) else 126
        msg = f"sandbox: cannot run {req['argv'][0]!r}: {exc.strerror}\n".encode()
        return {
            "exit": code,
            "stdout": "",
            "stderr": base64.b64encode(msg).decode(),
            "killed": None,
            "truncated": False,
        }

    assert proc.stdout is not None and proc.stderr is not None and proc.stdin is not None  # all PIPE
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    out = {out_fd: bytearray(), err_fd: bytearray()}
    open_fds = set(out)
    stdin_fd = proc.stdin.fileno()
    pending = memoryview(stdin_data)
    if not pending:
        proc.stdin.close()
        stdin_fd = None
    else:
        os.set_blocking(stdin_fd, False)
    total = 0
    killed = None
    truncated = False
    # A pidfd is readable the moment the command exits: no polling, so no latency tail.
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        pidfd = None
    poll = 0.0005

    while True:
        if proc.poll() is not None:
            # Done. Output still in the pipes is drained below; if a leftover background
            # process holds them open, kill_all ends it first.
            break
        now = time.monotonic()
        if now >= deadline:
            killed = "timeout"
            break
        rlist = list(open_fds)
        if pidfd is not None:
            rlist.append(pidfd)
        if not frames.eof:
            rlist.append(0)
        wlist = [stdin_fd] if stdin_fd is not None else []
        wait = deadline - now
        if pidfd is None:
            # Without a pidfd, an exit whose pipes a background process inherited is only
            # seen by polling; back off from 0.5 ms to 20 ms.
            wait = min(wait, poll)
            poll = min(poll * 2, 0.02)
        r, w, _ = select.select(rlist, wlist, [], wait)
        if w and stdin_fd is not None:
            try:
                n = os.write(stdin_fd, pending[:CHUNK])
                pending = pending[n:]
            except (BrokenPipeError, OSError):
                pending = pending[:0]
            if not pending:
                proc.stdin.close()
                stdin_fd = None
        for fd in r:
            if fd == pidfd:
                continue
            if fd == 0:
                frames.feed()
                if frames.eof:
                    kill_all()
                    raise SystemExit(0)
                msg = frames.pop()
                if msg is not None and msg.get("op") == "kill" and msg.get("reason") in ("memory", "pids"):
                    killed = msg["reason"]
                continue
            data = os.read(fd, CHUNK)
            if not data:
                open_fds.discard(fd)
                continue
            room = cap - total
            if len(data) > room:
                data = data[: max(room, 0)]
                truncated = True
                killed = "output"
            out[fd] += data
            total += len(data)
        if killed:
            break

    if pidfd is not None:
        os.close(pidfd)
    if killed:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
    # Reap our command first, so its exit status is ours and not kill_all's.
    proc.wait()
    kill_all()
    # Every writer is dead now; keep what was already written, up to the cap.
    for fd in list(open_fds):
        os.set_blocking(fd, False)
        while True:
            try:
                data = os.read(fd, CHUNK)
            except BlockingIOError:
                break
            if not data:
                break
            room = cap - total
            if len(data) > room:
                data = data[: max(room, 0)]
                truncated = True
            out[fd] += data
            total += len(data)
    for f in (proc.stdout, proc.stderr, proc.stdin):
        try:
            if f is not None:
                f.close()
        except OSError:
            pass
    return {
        "exit": proc.returncode,
        "stdout": base64.b64encode(out[out_fd]).decode(),
        "stderr": base64.b64encode(out[err_fd]).decode(),
        "killed": killed,
        "truncated": truncated,
    }


def main():
    if os.getpid() != 1:
        # kill(-1) outside a fresh PID namespace would signal every process the user owns
        # (as root: the whole machine). Outside PID 1 the helper refuses to run at all.
        sys.stderr.write("assay sandbox helper: must run as PID 1 of its own PID namespace\n")
        raise SystemExit(3)
    init = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    dumpable = _harden()
    _apply_rlimits(init.get("rlimits") or {})
    frames = Frames()
    send({"ready": True, "dumpable": dumpable})
    while True:
        req = frames.next_blocking()
        if req is None:
            kill_all()
            return
        if req.get("op") != "exec":
            continue
        result = run(req, frames)
        result["id"] = req["id"]
        send(result)


if __name__ == "__main__":
    main()
