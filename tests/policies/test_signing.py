"""Signed manifests, attacked: unsigned, altered, signed by strangers, swapped signatures."""

from __future__ import annotations

import json
import logging
import shutil
import stat

import pytest

from assay.errors import UserError
from assay.policies import signing
from assay.policies.signing import keygen, load_signed_manifest, sign_manifest

GOOD = b'role = "signer-test"\n\n[tools.read_file]\ndefault = "allow"\npaths = ["**"]\n'


@pytest.fixture
def signed(tmp_path):
    keygen()
    path = tmp_path / "role.toml"
    path.write_bytes(GOOD)
    sign_manifest(path)
    return path


def test_signed_manifest_loads_with_provenance(signed):
    m = load_signed_manifest(signed)
    assert m.role == "signer-test"
    assert m.provenance.signed and m.provenance.key_id.startswith("ed25519:")
    assert m.provenance.warning is None


def test_keygen_writes_a_private_key_only_its_owner_reads(_isolated_home):
    pair = keygen()
    assert stat.S_IMODE(pair.private_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(pair.private_path.parent.stat().st_mode) == 0o700
    assert pair.private_path.parent == _isolated_home / "keys"
    assert pair.trusted_path.read_bytes() == pair.public_path.read_bytes()


def test_keygen_refuses_to_overwrite_without_force():
    first = keygen()
    with pytest.raises(UserError, match="already exists"):
        keygen()
    assert keygen(force=True).key_id != first.key_id


def test_unsigned_manifest_is_refused(tmp_path):
    path = tmp_path / "role.toml"
    path.write_bytes(GOOD)
    with pytest.raises(UserError, match="is not signed") as exc:
        load_signed_manifest(path)
    assert "assay policy sign" in exc.value.fix


@pytest.mark.parametrize("offset", [0, 7, len(GOOD) // 2, len(GOOD) - 1])
def test_any_altered_byte_is_refused(signed, offset):
    data = bytearray(signed.read_bytes())
    data[offset] ^= 0x01
    signed.write_bytes(bytes(data))
    with pytest.raises(UserError, match="does not match its signature"):
        load_signed_manifest(signed)


def test_appended_bytes_are_refused(signed):
    # A TOML comment changes no permission, but the bytes are no longer the signed bytes.
    signed.write_bytes(GOOD + b"# harmless?\n")
    with pytest.raises(UserError, match="does not match"):
        load_signed_manifest(signed)


def test_signature_by_an_untrusted_key_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "role.toml"
    path.write_bytes(GOOD)
    # A stranger with their own ASSAY_HOME signs; our trust store never saw their key.
    stranger = tmp_path / "stranger-home"
    monkeypatch.setenv("ASSAY_HOME", str(stranger))
    signing.settings.cache_clear()
    keygen()
    sign_manifest(path)
    monkeypatch.setenv("ASSAY_HOME", str(tmp_path / "our-home"))
    signing.settings.cache_clear()
    keygen()  # we trust only our own key
    with pytest.raises(UserError, match="not in the trust store"):
        load_signed_manifest(path)


def test_signature_swapped_from_another_manifest_is_refused(signed, tmp_path):
    other = tmp_path / "other.toml"
    other.write_bytes(GOOD.replace(b'paths = ["**"]', b'paths = ["src/**"]'))
    sign_manifest(other)
    shutil.copy(signing.signature_path(other), signing.signature_path(signed))
    with pytest.raises(UserError, match="does not match"):
        load_signed_manifest(signed)


def test_signature_with_forged_key_id_is_refused(signed, tmp_path):
    # Claiming a trusted key's id does not help a signature made by another key.
    sig_path = signing.signature_path(signed)
    body = json.loads(sig_path.read_text())
    trusted_id = body["key_id"]
    stranger = signing.Ed25519PrivateKey.generate()
    tampered = GOOD + b'[tools.exec]\ndefault = "allow"\n'
    signed.write_bytes(tampered)
    import base64

    body["signature"] = base64.b64encode(stranger.sign(signing.CONTEXT + tampered)).decode()
    assert body["key_id"] == trusted_id
    sig_path.write_text(json.dumps(body))
    with pytest.raises(UserError, match="does not match"):
        load_signed_manifest(signed)


def test_signature_without_context_prefix_is_refused(signed):
    # A signature over the bare bytes (made for some other purpose) is not a manifest signature.
    key = signing.load_private_key()
    sig_path = signing.signature_path(signed)
    body = json.loads(sig_path.read_text())
    import base64

    body["signature"] = base64.b64encode(key.sign(signed.read_bytes())).decode()
    sig_path.write_text(json.dumps(body))
    with pytest.raises(UserError, match="does not match"):
        load_signed_manifest(signed)


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not json",
        b"[]",
        b'{"format": "other"}',
        b'{"format": "assay-manifest-signature/1"}',
        b'{"format": "assay-manifest-signature/1", "key_id": "x", "signature": "!!!"}',
        b'{"format": "assay-manifest-signature/1", "key_id": "x", "signature": "AAAA"}',
        b"[" * 100_000,
    ],
)
def test_malformed_signature_files_are_refused(signed, content):
    signing.signature_path(signed).write_bytes(content)
    with pytest.raises(UserError, match="malformed"):
        load_signed_manifest(signed)


def test_explicit_pubkey_must_be_the_signer(signed, tmp_path, monkeypatch):
    ours = signing.keys_dir() / "manifest.pub"
    assert load_signed_manifest(signed, pubkey=ours).role == "signer-test"
    monkeypatch.setenv("ASSAY_HOME", str(tmp_path / "elsewhere"))
    signing.settings.cache_clear()
    theirs = keygen().public_path
    with pytest.raises(UserError, match="not by the given key"):
        load_signed_manifest(signed, pubkey=theirs)


def test_validly_signed_manifest_for_another_role_is_refused(signed):
    with pytest.raises(UserError, match="for role 'signer-test', not 'kernel-agent'"):
        load_signed_manifest(signed, role="kernel-agent")


def test_signing_refuses_a_malformed_manifest(tmp_path):
    keygen()
    path = tmp_path / "role.toml"
    path.write_bytes(b'role = "x"\n[tools.exec]\nmax_timeout_s = "long"\n')
    with pytest.raises(UserError, match="max_timeout_s"):
        sign_manifest(path)
    assert not signing.signature_path(path).exists()


def test_malformed_manifest_is_refused_even_with_a_valid_signature(tmp_path):
    # Signed by hand, around sign_manifest's check: the signature verifies, validation still runs.
    import base64
    import hashlib

    keygen()
    key = signing.load_private_key()
    path = tmp_path / "role.toml"
    data = b'role = "x"\n[tools.exec]\nexecutables = ["/bin/sh"]\n'
    path.write_bytes(data)
    signing.signature_path(path).write_text(
        json.dumps(
            {
                "format": signing.SIGNATURE_FORMAT,
                "key_id": signing.key_id(key.public_key()),
                "sha256": hashlib.sha256(data).hexdigest(),
                "signature": base64.b64encode(key.sign(signing.CONTEXT + data)).decode(),
            }
        )
    )
    with pytest.raises(UserError, match="executables"):
        load_signed_manifest(path)


def test_escape_hatch_is_off_by_default_and_loud_when_on(tmp_path, monkeypatch, caplog):
    path = tmp_path / "role.toml"
    path.write_bytes(GOOD)
    monkeypatch.setenv(signing.UNSIGNED_ENV, "true")  # only exactly "1" opens it
    with pytest.raises(UserError):
        load_signed_manifest(path)
    monkeypatch.setenv(signing.UNSIGNED_ENV, "1")
    with caplog.at_level(logging.WARNING, logger="assay.policies"):
        for _ in range(2):
            m = load_signed_manifest(path)
            assert not m.provenance.signed and "WITHOUT a valid signature" in m.provenance.warning
    # Every load warns, not only the first.
    assert sum("WITHOUT a valid signature" in r.getMessage() for r in caplog.records) == 2
    # The hatch skips the signature, never validation.
    path.write_bytes(b'role = "Bad Role"\n')
    with pytest.raises(UserError, match="role"):
        load_signed_manifest(path)


def test_trust_store_ignores_file_names(signed):
    # Renaming a trusted key file does not let it stand in for another id: ids come from keys.
    tdir = signing.trust_dir()
    (only,) = list(tdir.glob("*.pub"))
    only.rename(tdir / "0000000000000000.pub")
    assert load_signed_manifest(signed).role == "signer-test"


def test_keygen_if_missing_keeps_the_key_and_trusts_it():
    first = keygen()
    first.trusted_path.unlink()
    again = keygen(if_missing=True)
    assert again.key_id == first.key_id and again.trusted_path.exists()


def test_signature_store_is_found_by_content_digest(tmp_path):
    keygen()
    path = tmp_path / "role.toml"
    path.write_bytes(GOOD)
    out = sign_manifest(path, to_store=True)
    assert out.parent == signing.signature_store() and not signing.signature_path(path).exists()
    assert load_signed_manifest(path).provenance.signed
    # Changed bytes have another digest: no stored signature applies to them.
    path.write_bytes(GOOD + b"\n")
    with pytest.raises(UserError, match="is not signed"):
        load_signed_manifest(path)
    # A .sig beside the file wins over the store, so a stale one there is not bypassed.
    path.write_bytes(GOOD)
    signing.signature_path(path).write_text("{}")
    with pytest.raises(UserError, match="malformed"):
        load_signed_manifest(path)
