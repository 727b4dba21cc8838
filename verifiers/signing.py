"""The verifier's own ed25519 key: only the verifier process signs verdicts.

The key lives under ASSAY_HOME/keys (0600), outside every workspace; the agent's sandbox
never sees ASSAY_HOME. A verdict's signature covers the canonical JSON of its payload, so
any change to pass/fail, metrics, reasons or hashes breaks it.
"""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from assay.errors import UserError
from assay.ledger.chain import canonical_json, normalize_payload

KEY_NAME = "verifier-ed25519"


def canonical(payload: dict[str, Any]) -> bytes:
    """Exactly the bytes the ledger hashes, after the JSON round trip the database does."""
    return canonical_json(normalize_payload(payload))


def key_id(public: Ed25519PublicKey) -> str:
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def _paths(home: Path) -> tuple[Path, Path]:
    d = home / "keys"
    return d / f"{KEY_NAME}.pem", d / f"{KEY_NAME}.pub"


def load_or_create_key(home: Path) -> Ed25519PrivateKey:
    priv_path, pub_path = _paths(home)
    if priv_path.exists():
        try:
            key = serialization.load_pem_private_key(priv_path.read_bytes(), password=None)
        except (ValueError, TypeError) as exc:
            raise UserError(
                f"verifier key {priv_path} is unreadable ({exc})",
                "restore it from backup, or move it away to start a new key",
            ) from None
        if not isinstance(key, Ed25519PrivateKey):
            raise UserError(f"verifier key {priv_path} is not an ed25519 key", "move it away to start a new key")
        return key
    priv_path.parent.mkdir(parents=True, exist_ok=True)
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    fd = os.open(priv_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    pub_path.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return key


def load_public_key(home: Path) -> Ed25519PublicKey | None:
    _, pub_path = _paths(home)
    if not pub_path.exists():
        return None
    key = serialization.load_pem_public_key(pub_path.read_bytes())
    return key if isinstance(key, Ed25519PublicKey) else None


def sign(key: Ed25519PrivateKey, payload: dict[str, Any]) -> str:
    """The stored signature: 'ed25519:<key id>:<base64 signature over canonical(payload)>'."""
    sig = base64.b64encode(key.sign(canonical(payload))).decode()
    return f"ed25519:{key_id(key.public_key())}:{sig}"


def check(public: Ed25519PublicKey | None, payload: dict[str, Any], signature: str) -> str:
    """'valid', 'invalid', 'unknown-key' (signed by a key we do not hold) or 'no-key'."""
    if public is None:
        return "no-key"
    scheme, _, rest = str(signature).partition(":")
    signer, _, sig = rest.partition(":")
    if scheme != "ed25519" or not sig:
        return "invalid"
    if key_id(public) != signer:
        return "unknown-key"
    try:
        public.verify(base64.b64decode(sig, validate=True), canonical(payload))
    except (InvalidSignature, ValueError):
        return "invalid"
    return "valid"


def check_row(public: Ed25519PublicKey | None, run_id: str, key: str, payload: dict[str, Any], signature: str) -> str:
    """`check`, and 'misplaced' for a genuine payload copied into a row of another run or key
    (the signature covers the payload, which names both)."""
    from assay.ledger.chain import misplaced

    return "misplaced" if misplaced(run_id, key, payload) else check(public, payload, signature)


def chain_check(home: Path):
    """A `signature_check` for `Ledger.verify_chain`: only this verifier's key signs verdicts."""
    public = load_public_key(home)
    return lambda payload, signature: check(public, payload, signature) == "valid"
