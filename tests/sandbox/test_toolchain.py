"""What of the host a sandbox is given: a read-only toolchain, a small env, never /etc whole."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from assay.errors import UserError
from assay.sandbox import SandboxSpec
from assay.sandbox.toolchain import (
    NEVER_BIND,
    base_env,
    check_spec,
    etc_files,
    host_toolchain,
    merge_env,
    own_workspace,
)


def test_toolchain_binds_python_and_usr_but_nothing_sensitive():
    tc = host_toolchain()
    assert "/usr" in tc.ro_dirs
    assert not set(tc.ro_dirs) & NEVER_BIND
    assert not any(d == "/etc" or d.startswith("/etc/") for d in tc.ro_dirs)
    assert all(e in {"/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d"} for e in tc.etc)
    real_prefix = os.path.realpath(sys.base_prefix)
    assert any(real_prefix == d or real_prefix.startswith(d + "/") for d in tc.ro_dirs)
    # assay's own source tree is not bound (only the venv inside it, if any).
    src = str(Path(__file__).resolve().parents[2])
    assert src not in tc.ro_dirs


def test_env_is_built_not_inherited(monkeypatch):
    monkeypatch.setenv("ASSAY_TEST_SECRET", "hunter2")
    env = base_env(host_toolchain(), SandboxSpec(workspace=Path("/nowhere")))
    assert "ASSAY_TEST_SECRET" not in env
    assert set(env) == {"PATH", "HOME", "TMPDIR", "USER", "LOGNAME", "LANG", "PWD"}
    assert env["HOME"] == env["TMPDIR"] == "/tmp"


@pytest.mark.parametrize("bad", [{"A=B": "x"}, {"": "x"}, {"A": "x\0y"}, {"A": 1}])
def test_bad_env_is_a_user_error(bad):
    with pytest.raises(UserError):
        merge_env({}, bad)


def test_env_merge_overrides():
    assert merge_env({"PATH": "/a", "X": "1"}, {"X": "2"}) == {"PATH": "/a", "X": "2"}


def test_etc_files_are_minimal():
    files = etc_files(65534, 65534)
    assert set(files) == {"/etc/passwd", "/etc/group"}
    assert b"sandbox:x:65534:65534" in files["/etc/passwd"]


def test_check_spec_refuses_missing_binds_and_bad_targets(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        check_spec(SandboxSpec(workspace=tmp_path, ro_binds=((tmp_path / "missing", "/task"),)))
    with pytest.raises(UserError, match="not allowed"):
        check_spec(SandboxSpec(workspace=tmp_path, ro_binds=((tmp_path, "/etc"),)))
    with pytest.raises(UserError, match="not allowed"):
        check_spec(SandboxSpec(workspace=tmp_path, workdir="relative"))
    ws = check_spec(SandboxSpec(workspace=tmp_path / "new" / "ws"))
    assert ws.is_dir()  # a new workspace is created


@pytest.mark.skipif(os.getuid() != 0, reason="only root changes ownership")
def test_own_workspace_never_follows_planted_symlinks(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("host")
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "sub" / "f").write_text("x")
    (ws / "link").symlink_to(outside)
    (ws / "dirlink").symlink_to(tmp_path)
    own_workspace(ws, 65534, 65534)
    assert (ws / "sub" / "f").stat().st_uid == 65534
    assert os.lstat(ws / "link").st_uid == 65534
    assert outside.stat().st_uid == 0  # the target of a planted link keeps its owner
    assert tmp_path.stat().st_uid == 0
