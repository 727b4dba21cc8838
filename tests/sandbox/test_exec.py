"""exec semantics, the same in every backend: output, exit codes, stdin, env, limits, restarts."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pytest
from sandbox_helpers import SLACK_S, TIGHT, py

from assay.sandbox import ExecResult, Sandbox, SandboxError, SandboxLimits


def test_is_a_sandbox(sandbox, backend):
    assert isinstance(sandbox, Sandbox)
    assert sandbox.backend == backend
    assert sandbox.hardened  # the helper made itself non-dumpable


def test_stdout_stderr_exit_code(sandbox):
    r = sandbox.exec("echo out; echo err >&2; exit 3")
    assert isinstance(r, ExecResult)
    assert (r.stdout, r.stderr, r.exit_code, r.killed, r.truncated) == ("out\n", "err\n", 3, None, False)
    assert not r.ok and r.duration_s > 0


def test_argv_is_not_shell_parsed(sandbox):
    r = sandbox.exec(["/bin/echo", "$HOME", "a b", ";", "rm -rf /"])
    assert r.stdout == "$HOME a b ; rm -rf /\n"


def test_missing_program_is_127(sandbox):
    r = sandbox.exec(["/no/such/program"])
    assert r.exit_code == 127 and "cannot run" in r.stderr


def test_stdin_bytes_and_str(sandbox):
    assert sandbox.exec(["/bin/cat"], stdin=b"\x00\x01bytes").stdout == "\x00\x01bytes"
    assert sandbox.exec(["/usr/bin/wc", "-c"], stdin="x" * 300_000).stdout.strip() == "300000"
    assert sandbox.exec(["/bin/cat"]).stdout == ""  # no stdin: EOF at once, no hang


def test_env_is_explicit(sandbox):
    r = sandbox.exec("echo $GIVEN; echo $PATH; echo $HOME; env | wc -l", env={"GIVEN": "yes"})
    given, path, home, count = r.stdout.split("\n")[:4]
    assert given == "yes" and "/usr/bin" in path and home == "/tmp"
    assert int(count) <= 10


def test_cwd_is_the_workspace_and_visible_on_host(sandbox, workspace):
    r = sandbox.exec("pwd; echo made > inside.txt; mkdir -p d/e && echo deep > d/e/f")
    assert r.stdout.strip() == "/workspace"
    assert (workspace / "inside.txt").read_text() == "made\n"
    assert (workspace / "d/e/f").read_text() == "deep\n"


def test_files_the_host_adds_later_stay_writable(sandbox, workspace):
    sandbox.exec("true")
    (workspace / "from-host").mkdir()
    (workspace / "from-host" / "f.txt").write_text("host\n")
    r = sandbox.exec("echo more >> from-host/f.txt && touch from-host/new && echo ok")
    assert r.stdout == "ok\n", r.stderr
    assert (workspace / "from-host" / "f.txt").read_text() == "host\nmore\n"


def test_binary_output_is_decoded_safely(sandbox):
    r = sandbox.exec(py("import sys; sys.stdout.buffer.write(bytes(range(256)))"))
    assert r.ok and len(r.stdout) == 256  # invalid UTF-8 replaced, not raised


def test_timeout_kills_the_whole_tree(sandbox):
    t0 = time.monotonic()
    r = sandbox.exec("sleep 30 & (trap '' TERM; sleep 30) & sleep 30", timeout=1)
    took = time.monotonic() - t0
    assert r.killed == "timeout" and r.exit_code != 0
    assert 1.0 <= took <= 1.0 + SLACK_S
    assert sandbox.exec("echo alive").stdout == "alive\n"  # the sandbox survives its command


def test_default_timeout_is_the_spec_limit(make_sandbox):
    sb = make_sandbox(limits=SandboxLimits(timeout_s=1.0, memory_mb=256, pids=64, output_bytes=4096))
    t0 = time.monotonic()
    assert sb.exec("sleep 10").killed == "timeout"
    assert time.monotonic() - t0 <= 1.0 + SLACK_S


def test_output_cap(sandbox):
    r = sandbox.exec("head -c 200000 /dev/zero | tr '\\0' a; echo err >&2")
    assert r.truncated and r.killed == "output"
    assert len(r.stdout) + len(r.stderr) <= TIGHT.output_bytes


def test_output_at_the_cap_is_not_truncated(sandbox):
    r = sandbox.exec(["/usr/bin/head", "-c", str(TIGHT.output_bytes), "/dev/zero"])
    assert r.ok and not r.truncated and len(r.stdout) == TIGHT.output_bytes


def test_bad_arguments(sandbox):
    with pytest.raises(ValueError):
        sandbox.exec([])
    with pytest.raises(ValueError):
        sandbox.exec("echo", timeout=0)
    with pytest.raises(ValueError):
        sandbox.exec(["a\0b"])


def test_ro_binds_are_readable_not_writable(make_sandbox, tmp_path):
    task = tmp_path / "task"
    task.mkdir()
    (task / "task.py").write_text("print('task')\n")
    sb = make_sandbox(ro_binds=[(task, "/task")])
    assert sb.exec(["python3", "/task/task.py"]).stdout == "task\n"
    r = sb.exec("echo x > /task/task.py; echo x > /task/new; cat /task/task.py")
    assert "Read-only file system" in r.stderr and r.stdout == "print('task')\n"
    assert sorted(os.listdir(task)) == ["task.py"]


def test_concurrent_execs_are_serialized(sandbox):
    results = []

    def run(i):
        results.append(sandbox.exec(f"echo {i}"))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.stdout for r in results) == sorted(f"{i}\n" for i in range(8))


def test_restarts_after_being_killed_from_outside(sandbox, backend):
    assert sandbox.starts == 1
    if backend == "docker":
        import docker

        docker.from_env().api.kill(sandbox._cid)
    else:
        sandbox._proc.send_signal(signal.SIGKILL)
        sandbox._proc.wait()
    with pytest.raises(SandboxError):
        sandbox.exec("echo lost")  # the exec in flight when it died is reported, not faked
    assert sandbox.exec("echo back").stdout == "back\n"
    assert sandbox.starts == 2


def test_close_is_final(make_sandbox):
    sb = make_sandbox()
    sb.exec("true")
    sb.close()
    sb.close()  # idempotent
    with pytest.raises(SandboxError):
        sb.exec("true")


def test_compiler_and_venv_usable_read_only(sandbox):
    """The kernel job's needs: g++ from /usr writes into the workspace; the venv's Python runs."""
    src = '#include <cstdio>\nint main(){ std::printf("%d\\n", 6*7); }\n'
    r = sandbox.exec("cat > k.cpp && g++ -O2 -o k k.cpp && ./k", stdin=src, timeout=60)
    assert r.stdout == "42\n", r.stderr
    r = sandbox.exec(py("import sys, sysconfig; print(sys.prefix); print(sysconfig.get_paths()['purelib'])"))
    assert r.ok and "site-packages" in r.stdout


@pytest.mark.slow
def test_torch_imports_inside(make_sandbox):
    sb = make_sandbox(limits=SandboxLimits(timeout_s=120, memory_mb=2048, pids=128, output_bytes=1 << 16))
    r = sb.exec(py("import torch; print(torch.ones(3).sum().item())"), timeout=120)
    assert r.stdout.strip() == "3.0", r.stderr[-2000:]


def test_no_container_or_cgroup_left_after_close(make_sandbox, backend):
    sb = make_sandbox()
    sb.exec("true")
    if backend == "docker":
        cid = sb._cid
        sb.close()
        import docker

        assert cid not in [c["Id"] for c in docker.from_env().api.containers(all=True)]
    else:
        dirs = list(sb._cgroup.dirs) if sb._cgroup else []
        pid = sb._proc.pid
        sb.close()
        assert not any(d.exists() for d in dirs)
        assert subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode != 0


def _freeze(sandbox, backend) -> None:
    """Stop every process of the sandbox from the host: a helper that never answers."""
    if backend == "docker":
        import docker

        docker.from_env().api.pause(sandbox._cid)
    else:
        for pid in sandbox._cgroup.pids():
            os.kill(pid, signal.SIGSTOP)


def test_host_deadline_holds_when_the_helper_hangs(sandbox, backend):
    """The helper is untrusted: if it stops answering, the host kills the sandbox on its own clock."""
    if backend == "bwrap" and sandbox._cgroup is None:
        pytest.skip("needs the sandbox's cgroup to find its processes")
    _freeze(sandbox, backend)
    t0 = time.monotonic()
    r = sandbox.exec("echo never", timeout=1)
    took = time.monotonic() - t0
    assert r.killed == "timeout" and "no answer" in r.stderr
    assert took <= 1.0 + SLACK_S
    assert sandbox.exec("echo fresh").stdout == "fresh\n" and sandbox.starts == 2


@pytest.mark.skipif(os.getuid() != 0, reason="the root-mapped fallback is bwrap started by root")
def test_bwrap_root_mapped_fallback_hides_sysctls(workspace, monkeypatch, need):
    """Where root cannot drop to nobody (no unprivileged user namespaces), bwrap maps the
    sandbox to host root; then /proc/sys, whose files check only "euid is root", is hidden."""
    from assay.sandbox import bwrap
    from assay.sandbox.base import SandboxSpec

    ok, detail = bwrap.availability()
    need(ok, f"bwrap unavailable: {detail}")

    monkeypatch.setattr(bwrap, "_mode", lambda: ("root", 0, "weaker: forced by this test"))
    sb = bwrap.BwrapSandbox(SandboxSpec(workspace=workspace, limits=TIGHT))
    try:
        code = (
            "import os\nbad = []\n"
            "for p in ['/proc/sys/vm/drop_caches', '/proc/sys/kernel/panic', '/proc/sys/kernel/core_pattern']:\n"
            "    try:\n        os.close(os.open(p, os.O_WRONLY)); bad.append(p)\n    except OSError: pass\n"
            "print(bad, os.listdir('/proc/sys'))\n"
        )
        r = sb.exec(py(code))
        assert r.stdout.strip() == "[] []", r.stdout + r.stderr
        assert "weaker" in sb.containment
        assert sb.exec("echo hi > f && cat f").stdout == "hi\n"  # the workspace still works
        assert (workspace / "f").stat().st_uid == 0
    finally:
        sb.close()


def test_cpu_limit_caps_cpu_time(make_sandbox):
    """A busy loop for 2 s of wall time under cpus=0.25 gets about 0.5 CPU-seconds.

    Unlimited it would get up to 2 (1 on this shared, loaded machine), so the bound tells.
    """
    sb = make_sandbox(limits=SandboxLimits(timeout_s=20, memory_mb=256, pids=64, cpus=0.25, output_bytes=4096))
    code = (
        "import os, time\n"
        "end = time.monotonic() + 2\n"
        "while time.monotonic() < end: pass\n"
        "t = os.times(); print(t.user + t.system)\n"
    )
    r = sb.exec(py(code), timeout=20)
    assert r.ok, r.stderr
    assert float(r.stdout) <= 0.25 * 2 + 0.25, r.stdout
