"""The server refuses to start on a manifest it cannot trust: `assay mcp` exits 2 with one
line on stderr, writes nothing on stdout (a stdio client would read it as protocol), and
creates no run. The development escape hatch starts, loudly, every time.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess

import pytest
from tools_helpers import ASSAY, StdioWire, ledger_path, server_env, signed_manifest

MANIFEST = """
format = 1
role = "kernel-agent"
[tools.read_file]
default = "allow"
rate = { per_minute = 10 }
"""


def runs(home) -> int:
    p = ledger_path(home)
    if not p.exists():
        return 0
    con = sqlite3.connect(p)
    try:
        return con.execute("select count(*) from runs").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        con.close()


def start(home, workspace, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [ASSAY, "mcp", "--workspace", str(workspace), "--sandbox", "bwrap", *args],
        input="",
        capture_output=True,
        text=True,
        timeout=120,
        env=server_env(ASSAY_HOME=str(home), **env),
    )


def assert_refused(result, *words: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("assay: error: ") and "Traceback" not in result.stderr
    for w in words:
        assert w in lines[0], lines[0]
    assert result.stdout == ""


@pytest.fixture
def good(tmp_path):
    return signed_manifest(tmp_path / "manifests", MANIFEST, "kernel-agent.toml")


def test_the_signed_manifest_starts(signed_home, workspace, good):
    with StdioWire(["--workspace", str(workspace), "--manifest", str(good), "--sandbox", "bwrap"]) as w:
        init = w.initialize()
        tools, _ = w.request("tools/list")
        assert w.close() == 0
    assert "kernel-agent" in init["result"]["instructions"]
    assert [t["name"] for t in tools.obj["result"]["tools"]] == ["read_file"]


def test_an_unsigned_manifest_is_refused(signed_home, workspace, tmp_path):
    before = runs(signed_home)
    path = tmp_path / "unsigned.toml"
    path.write_text(MANIFEST)
    assert_refused(start(signed_home, workspace, "--manifest", str(path)), "not signed")
    assert runs(signed_home) == before


@pytest.mark.parametrize(
    "edit",
    [
        lambda b: b.replace(b"per_minute = 10", b"per_minute = 90"),
        lambda b: b + b" ",
        lambda b: b + b'\n[tools.exec]\ndefault = "allow"\n',
        lambda b: b[:-1],
        lambda b: bytes([b[0] ^ 0x20]) + b[1:],
    ],
    ids=["raised limit", "trailing space", "extra tool", "dropped byte", "flipped bit"],
)
def test_a_manifest_altered_after_signing_is_refused(signed_home, workspace, good, edit):
    before = runs(signed_home)
    good.write_bytes(edit(good.read_bytes()))
    result = start(signed_home, workspace, "--manifest", str(good))
    assert_refused(result)
    assert "signature" in result.stderr or "manifest" in result.stderr
    assert runs(signed_home) == before


def test_a_signature_moved_from_another_manifest_is_refused(signed_home, workspace, good, tmp_path):
    other = signed_manifest(tmp_path / "other", MANIFEST.replace("10", "11"), "kernel-agent.toml")
    shutil.copy(other.with_name(other.name + ".sig"), good.with_name(good.name + ".sig"))
    assert_refused(start(signed_home, workspace, "--manifest", str(good)), "does not match")


def test_a_manifest_signed_by_an_untrusted_key_is_refused(signed_home, workspace, good, tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from assay.policies.signing import sign_manifest

    rogue = tmp_path / "rogue.key"
    rogue.write_bytes(
        Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    sign_manifest(good, rogue)
    assert_refused(start(signed_home, workspace, "--manifest", str(good)), "not in the trust store")


@pytest.mark.parametrize(
    "sig",
    [
        b"",
        b"garbage",
        b"{}",
        json.dumps({"format": "assay-manifest-signature/1", "key_id": "x", "signature": "AAAA"}).encode(),
        b"[" * 100000,
    ],
)
def test_a_malformed_signature_is_refused(signed_home, workspace, good, sig):
    good.with_name(good.name + ".sig").write_bytes(sig)
    assert_refused(start(signed_home, workspace, "--manifest", str(good)))


def test_a_manifest_for_another_role_is_refused(signed_home, workspace, tmp_path):
    other = signed_manifest(tmp_path / "m", MANIFEST.replace('"kernel-agent"', '"reviewer"'), "reviewer.toml")
    assert_refused(
        start(signed_home, workspace, "--manifest", str(other), "--role", "kernel-agent"), "is for role 'reviewer'"
    )


def test_a_shipped_manifest_is_refused_in_a_home_that_never_signed_it(workspace, tmp_path):
    fresh = tmp_path / "fresh-home"
    assert_refused(start(fresh, workspace), "not signed")


def test_the_escape_hatch_warns_on_every_start(signed_home, workspace, tmp_path):
    path = tmp_path / "unsigned.toml"
    path.write_text(MANIFEST)
    env = server_env(ASSAY_HOME=str(signed_home), ASSAY_ALLOW_UNSIGNED_MANIFESTS="1")
    for _ in range(2):
        with StdioWire(["--workspace", str(workspace), "--manifest", str(path), "--sandbox", "bwrap"], env=env) as w:
            w.initialize()
            assert w.close() == 0
        assert b"WARNING" in w.stderr and b"WITHOUT a valid signature" in w.stderr
    # Anything but "1" is no escape hatch.
    assert_refused(
        start(signed_home, workspace, "--manifest", str(path), ASSAY_ALLOW_UNSIGNED_MANIFESTS="true"), "not signed"
    )
