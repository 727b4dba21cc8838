"""`assay sandbox check` end to end, and the self-test it runs (which must be able to fail)."""

from __future__ import annotations

import os
import subprocess
import sys

from sandbox_helpers import TIGHT

from assay.sandbox import SandboxSpec, open_sandbox
from assay.sandbox.selftest import CHECKS, check_env, planted, run_selftest


def test_selftest_passes_in_each_backend(backend):
    results = run_selftest(backend)
    assert [c.name for c in results] == [name for name, _ in CHECKS]
    failed = [c for c in results if not c.ok]
    assert not failed, failed


def test_selftest_env_check_catches_a_leak(backend, workspace):
    """The env check is not a formality: hand the canary in explicitly and it must fail."""
    with planted(workspace) as host:
        sb = open_sandbox(SandboxSpec(workspace=workspace, limits=TIGHT), backend)
        try:
            leaky = _Leaky(sb, {"ASSAY_SELFTEST_CANARY": host.canary})
            ok, _ = check_env(leaky, host)
            assert not ok
            ok, _ = check_env(sb, host)
            assert ok
        finally:
            sb.close()


class _Leaky:
    """A sandbox wrapper that passes host secrets in, as a broken backend would."""

    def __init__(self, sb, env):
        self.sb, self.env = sb, env

    def exec(self, command, timeout=None, stdin=None, env=None):
        return self.sb.exec(command, timeout=timeout, stdin=stdin, env={**self.env, **(env or {})})


def test_cli_check_all_exits_0(need):
    from sandbox_helpers import TIGHT  # noqa: F401  (conftest sets the path)

    from assay.sandbox.backends import availability

    avail = availability()
    need(all(ok for ok, _ in avail.values()), f"both backends needed: {avail}")
    r = subprocess.run(
        [sys.executable, "-m", "assay", "sandbox", "check", "--backend", "all"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "self-test: docker" in r.stdout and "self-test: bwrap" in r.stdout
    assert "FAIL" not in r.stdout and "all checks passed" in r.stdout


def test_prune_removes_orphans_only(need, tmp_path):
    from assay.sandbox import cgroups
    from assay.sandbox.docker import LABEL, availability, client, ensure_image

    ok, detail = availability()
    need(ok, f"docker unavailable: {detail}")
    api = client().api
    image = ensure_image(65534, 65534)
    dead = api.create_container(image, command=["/x"], labels={LABEL: "1", "assay.owner-pid": "999999999"})["Id"]
    alive = api.create_container(image, command=["/x"], labels={LABEL: "1", "assay.owner-pid": str(os.getpid())})["Id"]
    try:
        stale = None
        kind, _ = cgroups.support()
        if kind:
            cg = cgroups.Cgroup.create(64, 16, 1.0)
            stale = cg.dirs  # empty, owner gone: what a killed assay process leaves
        r = subprocess.run(
            [sys.executable, "-m", "assay", "sandbox", "prune"], capture_output=True, text=True, timeout=120
        )
        assert r.returncode == 0, r.stderr
        ids = {c["Id"] for c in api.containers(all=True)}
        assert dead not in ids and alive in ids
        if stale:
            assert not any(d.exists() for d in stale)
    finally:
        for cid in (dead, alive):
            try:
                api.remove_container(cid, force=True)
            except Exception:
                pass
