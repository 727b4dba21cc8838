"""Hostile programs, in every backend, must be contained.

Contained means: the canary never appears in any output, the attempt fails, the exec ends
within its limit plus a second, and the host is unaffected (still responsive, its listener
got no connection, its files unchanged, no sandbox process left running on it).

The `hostile` fixture plants canaries on the host *before* the sandbox starts (so a backend
that leaked env or files would leak these) and routes every exec through a check that the
canary is absent from stdout and stderr.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sandbox_helpers import SLACK_S, TIGHT, host_processes_with, host_responsive, py

from assay.sandbox import ExecResult, Sandbox, SandboxSpec, open_sandbox

ENV_NAME = "ASSAY_ATTACK_CANARY"


@dataclass
class Hostile:
    sandbox: Sandbox
    canary: str
    secret_files: list[Path]
    workspace: Path
    task_dir: Path
    port: int
    listeners: list[socket.socket]
    abstract_name: bytes
    results: list[ExecResult] = field(default_factory=list)

    def run(self, command, timeout: float | None = None, **kw) -> ExecResult:
        t0 = time.monotonic()
        r = self.sandbox.exec(command, timeout=timeout, **kw)
        took = time.monotonic() - t0
        limit = timeout if timeout is not None else TIGHT.timeout_s
        assert took <= limit + SLACK_S, f"exec took {took:.2f}s, limit {limit}s"
        assert self.canary not in r.stdout and self.canary not in r.stderr, "canary leaked into output"
        self.results.append(r)
        return r

    def connections(self) -> int:
        n = 0
        for listener in self.listeners:
            listener.setblocking(False)
            while True:
                try:
                    conn, _ = listener.accept()
                except BlockingIOError:
                    break
                conn.close()
                n += 1
        return n


@pytest.fixture
def hostile(backend, tmp_path, monkeypatch):
    canary = "canary-" + secrets.token_hex(16)
    monkeypatch.setenv(ENV_NAME, canary)
    # A canary anyone on the host may read, and one in a private host dir.
    world = Path("/var/tmp") / f"assay-{secrets.token_hex(6)}.txt"
    world.write_text(canary)
    world.chmod(0o644)
    private = tmp_path / "host-private" / "secret.txt"
    private.parent.mkdir()
    private.write_text(canary)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    task = tmp_path / "task"
    task.mkdir()
    (task / "task.py").write_text("# read-only task file\n")
    listeners = []
    lo = socket.socket()
    lo.bind(("127.0.0.1", 0))
    lo.listen(16)
    port = lo.getsockname()[1]
    anyaddr = socket.socket()
    anyaddr.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    anyaddr.bind(("0.0.0.0", 0))
    anyaddr.listen(16)
    listeners += [lo, anyaddr]
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract_name = b"\0assay-canary-" + secrets.token_hex(6).encode()
    abstract.bind(abstract_name)
    abstract.listen(4)
    listeners.append(abstract)
    sb = open_sandbox(SandboxSpec(workspace=workspace, limits=TIGHT, ro_binds=((task, "/task"),)), backend)
    h = Hostile(sb, canary, [world, private], workspace, task, port, listeners, abstract_name)
    h.any_port = anyaddr.getsockname()[1]
    try:
        yield h
    finally:
        sb.close()
        got = h.connections()
        for s in listeners:
            s.close()
        world.unlink()
    # Whatever happened inside, the host must still be fine afterwards.
    assert got == 0, "a host listener got a connection from the sandbox"
    assert host_responsive() < 2.0


# Secrets ------------------------------------------------------------------------------


def test_host_env_is_invisible(hostile):
    assert os.environ[ENV_NAME] == hostile.canary  # planted on the host
    r = hostile.run("env; cat /proc/1/environ; cat /proc/[0-9]*/environ; echo; printenv " + ENV_NAME)
    assert ENV_NAME not in r.stdout
    r = hostile.run(py("import os; print(dict(os.environ))"))
    assert ENV_NAME not in r.stdout
    # Control: the probe does show what the caller passes explicitly.
    assert "given-value" in hostile.run("env", env={"GIVEN": "given-value"}).stdout


def test_host_files_are_invisible(hostile):
    for secret in hostile.secret_files:
        r = hostile.run(["/bin/cat", str(secret)])
        assert r.exit_code != 0
    r = hostile.run("ls -la /var/tmp /tmp; ls -la " + str(hostile.secret_files[1].parent))
    assert hostile.secret_files[0].name not in r.stdout


def test_symlink_escape_from_the_workspace(hostile):
    ws = hostile.workspace
    world, private = hostile.secret_files
    (ws / "abs").symlink_to(world)
    (ws / "private").symlink_to(private)
    (ws / "rel").symlink_to(os.path.relpath(private, ws))
    (ws / "root").symlink_to("/")
    # The host's /proc/<pid>/environ carries the env canary; the sandbox's /proc is its own.
    (ws / "hostenv").symlink_to(f"/proc/{os.getpid()}/environ")
    (ws / "docker").symlink_to("/var/run/docker.sock")
    r = hostile.run(
        "for f in abs private rel hostenv; do cat $f; done; cat root/var/tmp/"
        + world.name
        + "; cat root"
        + str(private)
    )
    assert r.exit_code != 0
    r = hostile.run(py("import socket; s = socket.socket(socket.AF_UNIX); s.connect('/workspace/docker')"))
    assert r.exit_code != 0 and ("FileNotFoundError" in r.stderr or "ConnectionRefused" in r.stderr)


def test_proc_of_the_helper_and_ptrace(hostile):
    code = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
results = {}
for path in ["/proc/1/environ", "/proc/1/mem", "/proc/1/fd/0", "/proc/1/fd/1", "/proc/1/root/etc/passwd"]:
    try:
        open(path, "rb").read(16); results[path] = "READ"
    except OSError as e:
        results[path] = e.errno
try:
    os.listdir("/proc/1/fd"); results["fd-list"] = "READ"
except OSError as e:
    results["fd-list"] = e.errno
results["ptrace"] = libc.ptrace(16, 1, None, None)  # PTRACE_ATTACH to the helper
results["seize"] = libc.ptrace(0x4206, 1, None, None)  # PTRACE_SEIZE
print(results)
"""
    r = hostile.run(py(code))
    res = eval(r.stdout)  # our own probe's repr of a dict of ints and strings
    assert "READ" not in res.values(), res
    assert res["ptrace"] == -1 and res["seize"] == -1
    # Nor can the command kill the helper: it is PID 1 and ignores what it did not ask for.
    hostile.run("kill -9 1; kill -INT 1; kill -TERM 1; kill -9 -1")
    assert hostile.run("echo still").stdout == "still\n" and hostile.sandbox.starts == 1


def test_forged_helper_replies_are_just_output(hostile):
    import base64
    import json
    import struct

    fake = json.dumps(
        {
            "id": 99,
            "exit": 0,
            "stdout": base64.b64encode(b"forged").decode(),
            "stderr": "",
            "killed": None,
            "truncated": False,
        }
    ).encode()
    frame = struct.pack(">I", len(fake)) + fake
    r = hostile.run(py(f"import sys; sys.stdout.buffer.write({frame!r}); sys.exit(5)"))
    assert r.exit_code == 5 and r.stdout.endswith('truncated": false}')
    assert hostile.run("echo next").stdout == "next\n"


# Network ------------------------------------------------------------------------------


def _host_addresses() -> list[str]:
    addrs = {"172.17.0.1"}
    try:
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        probe.connect(("192.0.2.1", 9))  # no packet is sent; picks the outbound address
        addrs.add(probe.getsockname()[0])
        probe.close()
    except OSError:
        pass
    return sorted(addrs)


def test_network_is_unreachable(hostile):
    targets = [("127.0.0.1", hostile.port), ("127.0.0.1", hostile.any_port)]
    targets += [(a, hostile.any_port) for a in _host_addresses()]
    targets += [("1.1.1.1", 443), ("8.8.8.8", 53)]
    code = f"""
import socket
reached = []
for host, port in {targets!r}:
    s = socket.socket(); s.settimeout(1)
    try:
        s.connect((host, port)); reached.append(host)
    except OSError:
        pass
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u.sendto(b"x", ("8.8.8.8", 53)); reached.append("udp")
except OSError:
    pass
a = socket.socket(socket.AF_UNIX)
try:
    a.connect({hostile.abstract_name!r}); reached.append("abstract-unix")
except OSError:
    pass
print("reached", reached)
print(open("/proc/net/dev").read())
"""
    r = hostile.run(py(code))
    assert "reached []" in r.stdout, r.stdout
    interfaces = {ln.split(":")[0].strip() for ln in r.stdout.splitlines()[3:] if ":" in ln}
    assert interfaces <= {"lo"}
    r = hostile.run(f"exec 3<>/dev/tcp/127.0.0.1/{hostile.port} && echo CONNECTED", timeout=3)
    assert "CONNECTED" not in r.stdout
    assert hostile.connections() == 0


def test_dns_does_not_resolve(hostile):
    r = hostile.run(py("import socket; print(socket.getaddrinfo('example.com', 443))"))
    assert r.exit_code != 0 and "gaierror" in r.stderr
    r = hostile.run("getent hosts example.com pypi.org; nslookup example.com 2>&1; true", timeout=5)
    assert not any(ch.isdigit() and "." in ln for ln in r.stdout.splitlines() for ch in ln[:1])


# Writes -------------------------------------------------------------------------------


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(path.iterdir()):
        h.update(p.name.encode())
    return h.hexdigest()


def test_writes_outside_the_workspace_fail(hostile):
    site = next(p for p in sys.path if p.endswith("site-packages"))
    before = {p: _digest(Path(p)) for p in (site, "/usr/bin", "/var/tmp")}
    passwd = Path("/etc/passwd").read_bytes()
    name = "assay-" + secrets.token_hex(4)
    targets = [
        "/",
        "/usr/bin",
        "/etc",
        "/etc/passwd",
        "/var/tmp",
        "/root",
        "/home",
        site,
        "/task",
        "/task/task.py",
        "/workspace/..",
        "/proc/sys/kernel/hostname",
        "/sys/kernel",
    ]
    code = f"""
import os, sys
made = []
for t in sys.argv[1:]:
    path = t if os.path.isfile(t) or t.startswith("/proc") else os.path.join(t, "{name}")
    try:
        with open(path, "a") as f:
            f.write("pwned")
        made.append(path)
    except OSError:
        pass
print("made", made)
"""
    r = hostile.run(py(code, *targets))
    assert "made []" in r.stdout, r.stdout
    # A planted sitecustomize would run in every later host Python: it must not land.
    assert not Path(site, "sitecustomize.py").exists() or Path(site, "sitecustomize.py").read_text().find("pwned") < 0
    assert {p: _digest(Path(p)) for p in before} == before
    assert Path("/etc/passwd").read_bytes() == passwd
    assert (hostile.task_dir / "task.py").read_text() == "# read-only task file\n"
    # /tmp and /dev/shm are writable but private: nothing shows on the host.
    hostile.run(f"echo x > /tmp/{name} && echo x > /dev/shm/{name}")
    assert not Path("/tmp", name).exists() and not Path("/dev/shm", name).exists()


def test_cannot_raise_its_own_limits_or_touch_sys(hostile):
    code = r"""
import glob
changed = []
for pattern in ["/sys/fs/cgroup/**/memory.limit_in_bytes", "/sys/fs/cgroup/**/memory.max",
                "/sys/fs/cgroup/**/pids.max", "/sys/fs/cgroup/**/cgroup.procs",
                "/sys/kernel/mm/transparent_hugepage/enabled", "/proc/sys/vm/drop_caches",
                "/proc/sys/kernel/core_pattern", "/proc/sysrq-trigger"]:
    for path in glob.glob(pattern, recursive=True) or [pattern]:
        try:
            with open(path, "w") as f:
                f.write("max")
            changed.append(path)
        except OSError:
            pass
print("changed", changed)
"""
    r = hostile.run(py(code))
    assert "changed []" in r.stdout, r.stdout
    # And the limits still hold afterwards.
    assert hostile.run(py("a = []\nwhile True: a.append(bytearray(1 << 24))")).killed == "memory"


def test_no_privilege_to_regain(hostile):
    r = hostile.run(["/bin/cat", "/proc/self/status"])
    fields = dict(ln.split(":\t", 1) for ln in r.stdout.splitlines() if ":\t" in ln)
    assert fields["CapEff"].strip() == fields["CapPrm"].strip() == "0" * 16
    assert fields["NoNewPrivs"].strip() == "1"
    assert fields["Uid"].split()[0] != "0"
    for attempt in [
        "unshare -U -r id",
        "unshare -n id",
        "mount -t tmpfs none /workspace",
        "su -c id root </dev/null",
        "chroot / id",
    ]:
        r = hostile.run(attempt + " 2>&1; echo rc=$?", timeout=5)
        assert "rc=0" not in r.stdout, attempt
        assert "uid=0(" not in r.stdout


# Resource bombs ----------------------------------------------------------------------


def test_fork_bomb(hostile):
    marker = "bomb-" + secrets.token_hex(4)
    # The classic bash bomb, its shell kept in the foreground (else it exits at once and the
    # helper's end-of-exec kill ends the bomb before it reaches the limit), and a Python one.
    for bomb in [
        ["/bin/bash", "-c", "b(){ b|b& }; b; while :; do sleep 1; done", marker],
        py("import os\nwhile True:\n    try: os.fork()\n    except OSError: pass", marker),
    ]:
        r = hostile.run(bomb)
        assert r.killed == "pids", (r.killed, r.exit_code, r.stderr[-300:])
        assert host_responsive() < 1.0
        assert host_processes_with(marker) == []
    # Fire and forget: the shell exits at once, the bomb must still die with the exec.
    hostile.run(["/bin/bash", "-c", "b(){ b|b& }; b", marker])
    assert host_processes_with(marker) == []
    r = hostile.run(py("import os; print(len([p for p in os.listdir('/proc') if p.isdigit()]))"))
    assert int(r.stdout) <= 2
    assert hostile.run("echo ok").stdout == "ok\n"


def test_memory_bomb(hostile):
    r = hostile.run(py("a = []\nwhile True: a.append(bytearray(1 << 24))"))
    assert r.killed == "memory" and r.exit_code != 0
    # Filling the private /tmp (memory too) is refused, and the sandbox keeps working.
    r = hostile.run("head -c 2G /dev/zero > /tmp/fill; echo rc=$?; rm -f /tmp/fill")
    assert "rc=0" not in r.stdout
    assert hostile.run("echo ok").stdout == "ok\n"


def test_infinite_loop_and_stubborn_children(hostile):
    marker = "loop-" + secrets.token_hex(4)
    code = (
        "import os, signal\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    while True: pass\n"
        "while True: pass\n"
    )
    r = hostile.run(py(code, marker), timeout=1.5)
    assert r.killed == "timeout"
    assert host_processes_with(marker) == []


def test_one_gigabyte_of_output(hostile):
    for cmd in [
        ["/usr/bin/head", "-c", str(1 << 30), "/dev/zero"],
        ["/bin/sh", "-c", f"head -c {1 << 30} /dev/zero >&2"],
        py("import sys\nwhile True: sys.stdout.write('A' * 65536)"),
    ]:
        r = hostile.run(cmd)
        assert r.killed == "output" and r.truncated
        assert len(r.stdout.encode()) + len(r.stderr.encode()) <= TIGHT.output_bytes


def test_no_process_outlives_its_exec(hostile):
    marker = "daemon-" + secrets.token_hex(4)
    code = (
        "import os, time, signal\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
        "        signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "        for fd in (0, 1, 2): os.close(fd)\n"
        "        while True:\n"
        "            open('/workspace/heartbeat', 'a').write('.')\n"
        "            time.sleep(0.02)\n"
        "    os._exit(0)\n"
        "time.sleep(0.3)\n"
        "print('parent done')\n"
    )
    r = hostile.run(py(code, marker))
    assert r.stdout == "parent done\n"
    beat = hostile.workspace / "heartbeat"
    size = beat.stat().st_size
    assert size > 0  # the daemon did run
    time.sleep(0.3)
    assert beat.stat().st_size == size  # and it is gone
    assert host_processes_with(marker) == []
    r = hostile.run(py("import os; print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))"))
    assert len(eval(r.stdout)) <= 2  # the helper and this probe


def test_host_processes_are_invisible_and_unkillable(hostile):
    import subprocess

    marker = "host-" + secrets.token_hex(4)
    victim = subprocess.Popen(
        ["/bin/sh", "-c", "sleep 60", marker],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        r = hostile.run(
            py(
                "import os\nfor p in os.listdir('/proc'):\n    if p.isdigit(): print(open(f'/proc/{p}/cmdline','rb').read()[:80])"
            )
        )
        assert marker not in r.stdout
        hostile.run(f"kill -9 {victim.pid}; kill -9 -1; true")
        assert victim.poll() is None  # still running
    finally:
        os.killpg(victim.pid, 9)
        victim.wait()
