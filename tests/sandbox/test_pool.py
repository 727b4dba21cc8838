"""The warm pool: one started sandbox per spec, reused across execs, all closed at the end."""

from __future__ import annotations

import threading
import time

import pytest
from sandbox_helpers import TIGHT

from assay.sandbox import SandboxError, SandboxPool, SandboxSpec


def test_reuses_one_sandbox_per_spec(backend, workspace, tmp_path):
    with SandboxPool(backend) as pool:
        spec = SandboxSpec(workspace=workspace, limits=TIGHT)
        first = pool.get(spec)
        for i in range(20):
            assert pool.exec(spec, f"echo {i}").stdout == f"{i}\n"
        assert pool.get(spec) is first and first.starts == 1 and len(pool) == 1
        # State persists between execs of one run: /tmp is the sandbox's, not per exec.
        pool.exec(spec, "echo kept > /tmp/note")
        assert pool.exec(spec, "cat /tmp/note").stdout == "kept\n"
        other = SandboxSpec(workspace=tmp_path / "other", limits=TIGHT)
        assert pool.get(other) is not first and len(pool) == 2


def test_warm_exec_is_much_cheaper_than_a_start(backend, workspace):
    with SandboxPool(backend) as pool:
        spec = SandboxSpec(workspace=workspace, limits=TIGHT)
        t0 = time.monotonic()
        pool.exec(spec, ["/bin/true"])
        cold = time.monotonic() - t0
        warm = min(_timed(lambda: pool.exec(spec, ["/bin/true"])) for _ in range(5))
        assert warm < cold / 3, (warm, cold)


def _timed(fn) -> float:
    t0 = time.monotonic()
    fn()
    return time.monotonic() - t0


def test_close_closes_every_sandbox(backend, workspace, tmp_path):
    pool = SandboxPool(backend)
    a = pool.get(SandboxSpec(workspace=workspace, limits=TIGHT))
    b = pool.get(SandboxSpec(workspace=tmp_path / "b", limits=TIGHT))
    pool.close()
    for sb in (a, b):
        with pytest.raises(SandboxError):
            sb.exec("true")
    with pytest.raises(SandboxError):
        pool.get(SandboxSpec(workspace=workspace, limits=TIGHT))


def test_abort_kills_a_running_command_at_once(backend, workspace):
    # A server stopped by a signal: close() would wait for the exec to end (here 20 s).
    pool = SandboxPool(backend)
    spec = SandboxSpec(workspace=workspace, limits=TIGHT)
    pool.exec(spec, "true")
    ended: dict = {}

    def run() -> None:
        try:
            ended["result"] = pool.exec(spec, ["sleep", "20"], timeout=25)
        except SandboxError as exc:
            ended["error"] = exc
        ended["at"] = time.monotonic()

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    time.sleep(1.0)  # the command is running
    aborted = time.monotonic()
    pool.abort()
    worker.join(10)
    assert "at" in ended, "the exec was still waiting 10 s after abort"
    assert ended["at"] - aborted < 5, ended
    assert "error" in ended or ended["result"].exit_code != 0, ended
    with pytest.raises(SandboxError):
        pool.get(spec)


def test_a_killed_sandbox_is_restarted_not_handed_out_dead(backend, workspace):
    with SandboxPool(backend) as pool:
        spec = SandboxSpec(workspace=workspace, limits=TIGHT)
        r = pool.exec(spec, ["python3", "-c", "a = []\nwhile True: a.append(bytearray(1 << 24))"])
        assert r.killed == "memory"
        assert pool.exec(spec, "echo fine").stdout == "fine\n"


class _CountingOpener:
    def __init__(self):
        self.opened = 0
        self.lock = threading.Lock()

    def __call__(self, spec, backend):
        with self.lock:
            self.opened += 1
        time.sleep(0.05)  # a slow cold start, so concurrent callers overlap
        return _Fake(spec)


class _Fake:
    backend = "fake"

    def __init__(self, spec):
        self.spec, self.closed = spec, False

    def exec(self, command, timeout=None, stdin=None, env=None):
        raise AssertionError("not used")

    def close(self):
        self.closed = True


def test_concurrent_first_use_opens_once(tmp_path):
    opener = _CountingOpener()
    pool = SandboxPool("bwrap", opener=opener)
    spec = SandboxSpec(workspace=tmp_path)
    got = []
    threads = [threading.Thread(target=lambda: got.append(pool.get(spec))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert opener.opened == 1 and len({id(g) for g in got}) == 1
    pool.close()
    assert got[0].closed
