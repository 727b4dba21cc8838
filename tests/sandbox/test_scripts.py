"""scripts/ensure-*.sh: idempotent and quiet when all is there; install/start when not.

The "missing" paths run against stub docker/dockerd/apt-get/bwrap on PATH, so the test
proves the script's logic without stopping the real daemon others are using.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _stub(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


@pytest.fixture
def stub_path(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # The script also needs a few real tools.
    for tool in ("sh", "id", "sleep", "setsid", "sudo", "touch", "chmod"):
        real = shutil.which(tool)
        if real:
            os.symlink(real, bin_dir / tool)
    return bin_dir


def _run(script: str, bin_dir: Path, tmp_path: Path):
    env = {"PATH": str(bin_dir), "ASSAY_DOCKERD_LOG": str(tmp_path / "dockerd.log"), "HOME": str(tmp_path)}
    return subprocess.run([str(SCRIPTS / script)], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.skipif(os.getuid() != 0, reason="the stubbed paths assume root (no sudo prompt)")
def test_ensure_docker_starts_a_daemon_when_none_answers(stub_path, tmp_path):
    flag = tmp_path / "daemon-up"
    _stub(stub_path, "docker", f'[ -f "{flag}" ] && echo 20.10 && exit 0; exit 1')
    _stub(stub_path, "dockerd", f'touch "{flag}"; echo started')
    r = _run("ensure-docker.sh", stub_path, tmp_path)
    assert r.returncode == 0, r.stderr
    assert flag.exists() and "starting dockerd" in r.stderr
    again = _run("ensure-docker.sh", stub_path, tmp_path)  # idempotent and silent now
    assert again.returncode == 0 and again.stdout == again.stderr == ""


@pytest.mark.skipif(os.getuid() != 0, reason="the stubbed paths assume root (no sudo prompt)")
def test_ensure_docker_installs_when_missing(stub_path, tmp_path):
    log = tmp_path / "apt.log"
    flag = tmp_path / "daemon-up"
    installed = stub_path / "docker"
    _stub(
        stub_path,
        "apt-get",
        f'echo "$@" >> "{log}"\n'
        f'case "$*" in *install*docker.io*) '
        f"printf '#!/bin/sh\\n[ -f {flag} ] && exit 0; exit 1\\n' > {installed}; chmod +x {installed}; "
        f"printf '#!/bin/sh\\ntouch {flag}\\n' > {stub_path}/dockerd; chmod +x {stub_path}/dockerd;; esac",
    )
    r = _run("ensure-docker.sh", stub_path, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "install -y -qq docker.io" in log.read_text()


def test_ensure_docker_is_silent_when_a_daemon_answers(need):
    need(
        shutil.which("docker") is not None
        and subprocess.run(["docker", "version"], capture_output=True).returncode == 0,
        "no docker daemon answers",
    )
    r = subprocess.run([str(SCRIPTS / "ensure-docker.sh")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == r.stderr == ""


@pytest.mark.skipif(os.getuid() != 0, reason="the stubbed paths assume root (no sudo prompt)")
def test_ensure_bwrap_installs_when_missing(stub_path, tmp_path):
    log = tmp_path / "apt.log"
    _stub(
        stub_path,
        "apt-get",
        f'echo "$@" >> "{log}"\ncase "$*" in *install*) '
        f"printf '#!/bin/sh\\n' > {stub_path}/bwrap; chmod +x {stub_path}/bwrap;; esac",
    )
    r = _run("ensure-bwrap.sh", stub_path, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "install -y -qq bubblewrap" in log.read_text()
    again = _run("ensure-bwrap.sh", stub_path, tmp_path)
    assert again.returncode == 0 and again.stdout == again.stderr == ""
