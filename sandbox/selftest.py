"""The self-test behind `assay sandbox check`: a sandbox is attacked and must hold.

Each check plants something on the host (an env canary, a file canary, a listener, a
marked process), runs a probe inside a fresh sandbox with tight limits, and passes only if
the sandbox contained it. The attack test suite goes further; this is the quick proof a
user can run on their own machine.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Generator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from assay.sandbox.backends import open_sandbox
from assay.sandbox.base import Sandbox, SandboxLimits, SandboxSpec

LIMITS = SandboxLimits(timeout_s=5.0, memory_mb=256, pids=64, cpus=1.0, output_bytes=64 << 10)
SLACK_S = 1.0  # "contained" includes: over within its limit plus this


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class Host:
    """What the host planted for the probes to find (they must not)."""

    canary: str
    canary_file: Path
    port: int
    listener: socket.socket
    workspace: Path
    marker_proc: subprocess.Popen

    def connections(self) -> int:
        self.listener.setblocking(False)
        n = 0
        while True:
            try:
                conn, _ = self.listener.accept()
            except BlockingIOError:
                return n
            conn.close()
            n += 1


@contextmanager
def planted(workspace: Path | None = None) -> Generator[Host]:
    canary = "assay-canary-" + secrets.token_hex(12)
    old = os.environ.get("ASSAY_SELFTEST_CANARY")
    os.environ["ASSAY_SELFTEST_CANARY"] = canary  # a sandbox must never inherit this
    with tempfile.TemporaryDirectory(prefix="assay-selftest-") as tmp:
        root = Path(tmp)
        ws = workspace or root / "workspace"
        ws.mkdir(parents=True, exist_ok=True)
        secret = root / "host-secret.txt"
        secret.write_text(canary + "\n")
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        # A host process carrying the canary in its command line; its own session, so the
        # whole group (sh and its sleep) goes at the end and holds none of our pipes.
        marker = subprocess.Popen(
            ["/bin/sh", "-c", "sleep 300", canary],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            yield Host(canary, secret, listener.getsockname()[1], listener, ws, marker)
        finally:
            os.killpg(marker.pid, signal.SIGKILL)
            marker.wait()
            listener.close()
            if old is None:
                os.environ.pop("ASSAY_SELFTEST_CANARY", None)
            else:
                os.environ["ASSAY_SELFTEST_CANARY"] = old


def py(code: str) -> list[str]:
    """A probe in the sandbox's own Python (the venv's, bound read-only)."""
    return ["python3", "-I", "-c", code]


def _leak(host: Host, *texts: str) -> bool:
    return any(host.canary in t for t in texts)


# The probes ------------------------------------------------------------------------------


def check_runs(sb: Sandbox, host: Host) -> tuple[bool, str]:
    r = sb.exec(["/bin/echo", "assay-ok"])
    return r.ok and r.stdout == "assay-ok\n", f"exit {r.exit_code}, stdout {r.stdout[:40]!r}"


def check_workspace(sb: Sandbox, host: Host) -> tuple[bool, str]:
    token = secrets.token_hex(8)
    r = sb.exec(f"echo {token} > made-inside.txt && cat made-inside.txt")
    path = host.workspace / "made-inside.txt"
    seen = path.read_text().strip() if path.exists() else ""
    return r.ok and seen == token, "written inside, read on the host" if seen == token else f"host saw {seen!r}"


def check_writes(sb: Sandbox, host: Host) -> tuple[bool, str]:
    import sys

    name = "assay-probe-" + secrets.token_hex(6)
    targets = ["/", "/usr", "/etc", "/var", "/root", "/home", sys.prefix, str(host.canary_file.parent)]
    code = (
        "import sys\nok=[]\n"
        "for d in sys.argv[1:]:\n"
        "    try:\n"
        f"        open(d.rstrip('/') + '/{name}', 'w').write('x'); ok.append(d)\n"
        "    except OSError: pass\n"
        "print(' '.join(ok))\n"
    )
    r = sb.exec([*py(code), *targets])
    written = r.stdout.split()
    on_host = [t for t in targets if os.path.exists(os.path.join(t, name))]
    for t in on_host:
        os.unlink(os.path.join(t, name))
    # /tmp is private: a write there must not show on the host.
    sb.exec(["/bin/sh", "-c", f"echo x > /tmp/{name}"])
    tmp_leak = os.path.exists(f"/tmp/{name}")
    ok = r.exit_code == 0 and not written and not on_host and not tmp_leak
    return ok, f"{len(targets)} host paths refused" if ok else f"wrote {written or on_host}, /tmp shared={tmp_leak}"


def check_env(sb: Sandbox, host: Host) -> tuple[bool, str]:
    r = sb.exec("env; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'")
    return not _leak(host, r.stdout, r.stderr), "host env canary not visible" if not _leak(
        host, r.stdout
    ) else "canary leaked"


def check_files(sb: Sandbox, host: Host) -> tuple[bool, str]:
    r = sb.exec(["/bin/cat", str(host.canary_file)])
    ok = r.exit_code != 0 and not _leak(host, r.stdout, r.stderr)
    return ok, "host file not visible" if ok else "host file readable"


def check_network(sb: Sandbox, host: Host) -> tuple[bool, str]:
    code = (
        "import socket, sys\nopen_=[]\n"
        "for h, p in [('127.0.0.1', int(sys.argv[1])), ('1.1.1.1', 53), ('8.8.8.8', 443), ('172.17.0.1', 2375)]:\n"
        "    s = socket.socket(); s.settimeout(1)\n"
        "    try: s.connect((h, p)); open_.append(h)\n"
        "    except OSError: pass\n"
        "try: socket.getaddrinfo('example.com', 80); open_.append('dns')\n"
        "except OSError: pass\n"
        "print(' '.join(open_)); print(open('/proc/net/dev').read())\n"
    )
    r = sb.exec([*py(code), str(host.port)])
    lines = r.stdout.splitlines()
    reached = lines[0].split() if lines else ["?"]
    ifaces = {ln.split(":")[0].strip() for ln in lines[3:] if ":" in ln}
    got = host.connections()
    ok = r.exit_code == 0 and not reached and got == 0 and ifaces <= {"lo"}
    return (
        ok,
        "no route out, no DNS, host listener untouched"
        if ok
        else f"reached {reached}, listener got {got}, ifaces {ifaces}",
    )


PS = (
    "import os\n"
    "for p in sorted(int(p) for p in os.listdir('/proc') if p.isdigit()):\n"
    "    try: print(p, open(f'/proc/{p}/cmdline', 'rb').read()[:200].replace(b'\\0', b' ').decode(errors='replace').splitlines()[0])\n"
    "    except (OSError, IndexError): print(p, '?')\n"
)


def check_processes(sb: Sandbox, host: Host) -> tuple[bool, str]:
    r = sb.exec(py(PS))
    count = len(r.stdout.splitlines())
    # Visible: the helper (PID 1) and this probe. Nothing of the host's.
    ok = r.exit_code == 0 and not _leak(host, r.stdout) and count <= 3
    return (
        ok,
        f"{count} processes visible, none of the host's"
        if ok
        else f"{count} visible, marker seen={_leak(host, r.stdout)}",
    )


def check_privileges(sb: Sandbox, host: Host) -> tuple[bool, str]:
    r = sb.exec(["/bin/cat", "/proc/self/status"])
    fields = dict(ln.split(":\t", 1) for ln in r.stdout.splitlines() if ":\t" in ln)
    uid = fields.get("Uid", "0").split()[0]
    ok = fields.get("CapEff", "").strip() == "0" * 16 and fields.get("NoNewPrivs", "").strip() == "1" and uid != "0"
    return (
        ok,
        f"uid {uid}, no capabilities, no-new-privs"
        if ok
        else f"CapEff={fields.get('CapEff')} NNP={fields.get('NoNewPrivs')} uid={uid}",
    )


def _limit(sb: Sandbox, command, reason: str, timeout: float) -> tuple[bool, str]:
    t0 = time.monotonic()
    r = sb.exec(command, timeout=timeout)
    took = time.monotonic() - t0
    ok = r.killed == reason and took <= timeout + SLACK_S
    return (
        ok,
        f"killed ({r.killed}) after {took:.2f}s" if ok else f"killed={r.killed} exit={r.exit_code} after {took:.2f}s",
    )


def check_memory(sb: Sandbox, host: Host) -> tuple[bool, str]:
    return _limit(sb, py("a = []\nwhile True: a.append(bytearray(16 << 20))"), "memory", LIMITS.timeout_s)


def check_pids(sb: Sandbox, host: Host) -> tuple[bool, str]:
    bomb = "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass"
    return _limit(sb, py(bomb), "pids", LIMITS.timeout_s)


def check_timeout(sb: Sandbox, host: Host) -> tuple[bool, str]:
    return _limit(sb, "sleep 60 & sleep 60; wait", "timeout", 1.0)


def check_output(sb: Sandbox, host: Host) -> tuple[bool, str]:
    r = sb.exec(["/usr/bin/yes", "assay"], timeout=LIMITS.timeout_s)
    size = len(r.stdout.encode()) + len(r.stderr.encode())
    ok = r.killed == "output" and r.truncated and size <= LIMITS.output_bytes
    return (
        ok,
        f"cut at {size} bytes, killed (output)" if ok else f"killed={r.killed} truncated={r.truncated} size={size}",
    )


def check_leftovers(sb: Sandbox, host: Host) -> tuple[bool, str]:
    sb.exec("setsid sleep 120 >/dev/null 2>&1 & (sleep 120 &) ; echo started")
    r = sb.exec(py(PS))
    survivors = [ln for ln in r.stdout.splitlines() if "sleep" in ln]
    return not survivors, "background processes end with their exec" if not survivors else f"survived: {survivors}"


CHECKS: list[tuple[str, Callable[[Sandbox, Host], tuple[bool, str]]]] = [
    ("runs a command", check_runs),
    ("workspace is writable", check_workspace),
    ("writes outside the workspace fail", check_writes),
    ("host env invisible", check_env),
    ("host files invisible", check_files),
    ("no network", check_network),
    ("host processes invisible", check_processes),
    ("no privileges", check_privileges),
    ("memory limit", check_memory),
    ("process limit", check_pids),
    ("timeout kills the tree", check_timeout),
    ("output limit", check_output),
    ("no process outlives its exec", check_leftovers),
]


def run_selftest(backend: str, on_check: Callable[[Check], None] | None = None) -> list[Check]:
    """Every check against a fresh `backend` sandbox; a check that raises is a failure."""
    results: list[Check] = []
    with planted() as host:
        sb = open_sandbox(SandboxSpec(workspace=host.workspace, limits=LIMITS), backend)
        try:
            for name, fn in CHECKS:
                try:
                    ok, detail = fn(sb, host)
                except Exception as exc:  # a crash in a probe is a failed check, not a pass
                    ok, detail = False, f"{type(exc).__name__}: {exc}"
                check = Check(name, ok, detail)
                results.append(check)
                if on_check:
                    on_check(check)
        finally:
            sb.close()
    return results
