"""Choosing a backend, and bad input: a missing backend is one clear line naming the fix, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from assay.errors import UserError
from assay.sandbox import SandboxSpec, open_sandbox, resolve_backend
from assay.sandbox import docker as docker_backend

ASSAY = [sys.executable, "-m", "assay"]


@pytest.fixture
def no_docker(monkeypatch, tmp_path):
    """Point the docker SDK at a socket nobody serves, as with a stopped daemon."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/docker.sock")
    saved = list(docker_backend._client_cache)
    docker_backend._client_cache.clear()
    yield f"unix://{tmp_path}/docker.sock"
    docker_backend._client_cache[:] = saved


@pytest.fixture
def no_bwrap(monkeypatch, tmp_path):
    """A PATH without bwrap (and nothing else needed by the check)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    return str(bin_dir)


def test_unknown_backend_is_a_user_error():
    with pytest.raises(UserError, match="unknown sandbox backend 'chroot'"):
        resolve_backend("chroot")


def test_stopped_docker_daemon_names_the_fix(no_docker, tmp_path):
    ok, detail = docker_backend.availability()
    assert not ok and "no Docker daemon is running" in detail
    with pytest.raises(UserError) as err:
        open_sandbox(SandboxSpec(workspace=tmp_path / "ws"), "docker")
    assert "start Docker" in str(err.value.fix) and "bwrap" in str(err.value.fix)
    assert not (tmp_path / "ws").exists()  # nothing half-made


def test_missing_bwrap_names_the_fix(no_bwrap, tmp_path):
    with pytest.raises(UserError) as err:
        open_sandbox(SandboxSpec(workspace=tmp_path / "ws"), "bwrap")
    assert "not installed" in err.value.problem and "apt-get install -y bubblewrap" in err.value.fix


def test_auto_with_nothing_available_says_how_to_install_either(no_docker, no_bwrap):
    with pytest.raises(UserError) as err:
        resolve_backend("auto")
    assert "bubblewrap" in err.value.fix and "docker" in err.value.fix.lower()


def test_auto_prefers_docker_then_bwrap(no_docker, need):
    from assay.sandbox import bwrap

    ok, detail = bwrap.availability()
    need(ok, f"bwrap unavailable: {detail}")
    assert resolve_backend("auto") == "bwrap"  # docker down: bwrap


def test_setting_picks_the_backend(monkeypatch):
    from assay.settings import settings

    monkeypatch.setenv("ASSAY_SANDBOX_BACKEND", "bwrap")
    settings.cache_clear()
    assert resolve_backend(None) == "bwrap"


def _cli(args, env_extra):
    env = {**os.environ, **env_extra}
    return subprocess.run([*ASSAY, *args], capture_output=True, text=True, env=env, timeout=120)


def test_cli_check_with_stopped_docker_is_one_line_exit_2(tmp_path):
    r = _cli(["sandbox", "check", "--backend", "docker"], {"DOCKER_HOST": f"unix://{tmp_path}/none.sock"})
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "docker sandbox is not available" in lines[0] and "fix:" in lines[0]
    assert "Traceback" not in r.stderr + r.stdout


def test_cli_check_with_missing_bwrap_is_one_line_exit_2(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    r = _cli(["sandbox", "check", "--backend", "bwrap"], {"PATH": str(bin_dir)})
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "bwrap" in lines[0] and "bubblewrap" in lines[0], r.stderr
    assert "Traceback" not in r.stderr + r.stdout


def test_cli_bad_backend_choice_is_exit_2():
    r = _cli(["sandbox", "check", "--backend", "chroot"], {})
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_cli_help():
    r = _cli(["sandbox", "check", "--help"], {})
    assert r.returncode == 0 and "--backend" in r.stdout
