"""Cgroup limits and counters: real ones where this host has them, v2's file protocol on a stand-in tree."""

from __future__ import annotations

import subprocess
import sys
import time

from assay.sandbox import cgroups
from assay.sandbox.cgroups import Cgroup, Counters, _dir_in, _Mount


def test_real_cgroup_limits_and_oom_counter(need):
    kind, detail = cgroups.support()
    need(kind is not None, f"no writable cgroup here: {detail}")
    cg = Cgroup.create(memory_mb=64, pids=16, cpus=0.5)
    try:
        assert {"memory", "pids"} <= set(cg.controllers)
        base = cg.counters.snapshot()
        # A process joins, allocates past the limit and is OOM-killed; the counter says so.
        hog = "import sys\nopen(sys.argv[1], 'w').write(str(__import__('os').getpid()))\na = [bytearray(1 << 20) for _ in range(256)]"
        joined = " ".join(f'echo $$ > "{p}";' for p in cg.procs)
        r = subprocess.run(
            ["/bin/sh", "-c", f'{joined} exec {sys.executable} -I -S -c "$0" /dev/null', hog],
            capture_output=True,
            timeout=60,
        )
        assert r.returncode == -9 or r.returncode == 137
        oom, _ = cg.counters.snapshot()
        assert oom > base[0]
        # Forks past pids.max are refused and counted.
        bomb = "import os\nfor _ in range(64):\n    try:\n        if os.fork() == 0: __import__('time').sleep(2); os._exit(0)\n    except OSError: pass"
        subprocess.run(["/bin/sh", "-c", f'{joined} exec {sys.executable} -I -S -c "$0"', bomb], timeout=60)
        assert cg.counters.snapshot()[1] > base[1]
        # A process's counters are found from /proc/<pid>/cgroup (how docker containers are read).
        sleeper = subprocess.Popen(["/bin/sh", "-c", f"{joined} exec sleep 30"])
        try:
            deadline = time.monotonic() + 5
            while sleeper.pid not in cg.pids() and time.monotonic() < deadline:
                time.sleep(0.01)
            assert Counters.of_pid(sleeper.pid) == cg.counters
        finally:
            sleeper.kill()
            sleeper.wait()
    finally:
        cg.kill()
        cg.remove()
    assert not any(d.exists() for d in cg.dirs)


def test_dir_in_respects_the_mount_root(tmp_path):
    m = _Mount(tmp_path, "/", "cgroup2", frozenset())
    assert _dir_in(m, "/a/b") == tmp_path / "a/b"
    nested = _Mount(tmp_path, "/docker/x", "cgroup", frozenset({"memory"}))
    assert _dir_in(nested, "/docker/x/y") == tmp_path / "y"
    assert _dir_in(nested, "/elsewhere") is None


def test_v2_file_protocol_on_a_stand_in_tree(tmp_path, monkeypatch):
    """cgroup v2 is not mounted with controllers here; its file names and values still must be right."""
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    (tmp_path / "cgroup.subtree_control").write_text("")
    monkeypatch.setattr(cgroups, "_mounts", lambda: (_Mount(tmp_path, "/", "cgroup2", frozenset()),))
    monkeypatch.setattr(cgroups, "_membership", lambda pid: {"": "/"})
    cg = Cgroup.create(memory_mb=300, pids=40, cpus=1.5)
    d = cg.dirs[0]
    assert cg.kind == "cgroup v2" and d.parent == tmp_path
    assert (tmp_path / "cgroup.subtree_control").read_text() == "+memory +pids +cpu"
    assert (d / "memory.max").read_text() == str(300 << 20)
    assert (d / "memory.swap.max").read_text() == "0"
    assert (d / "pids.max").read_text() == "40"
    assert cg.procs == [d / "cgroup.procs"]
    (d / "memory.events").write_text("low 0\nhigh 0\nmax 5\noom 2\noom_kill 2\n")
    (d / "pids.events").write_text("max 7\n")
    assert cg.counters.snapshot() == (2, 7)
    for f in d.iterdir():
        f.unlink()
    cg.remove()
    assert not d.exists()
