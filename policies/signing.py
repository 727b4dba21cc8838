"""ed25519 signatures over capability manifests, and the trust store that checks them.

Layout under ASSAY_HOME:
    keys/<name>.key          private key, PEM PKCS#8, mode 0600 (keys/ is 0700)
    keys/<name>.pub          its public key, PEM
    trusted-keys/<id>.pub    public keys whose manifest signatures the gateway accepts
    signatures/<sha256>.sig  signatures of manifests that live where we may not write
                             (the shipped ones, in site-packages), found by content digest

A signature is a detached JSON file `MANIFEST.sig` beside the manifest. It covers every
byte of the manifest (behind a fixed context string, so a signature made with the same key
for some other purpose can never pass as a manifest signature) and names the key by id.
The bytes that are verified are the bytes that are parsed: the file is read once.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from assay.errors import UserError
from assay.policies.manifest import Manifest, parse_manifest, read_manifest_bytes
from assay.settings import settings

log = logging.getLogger("assay.policies")

SIGNATURE_FORMAT = "assay-manifest-signature/1"
CONTEXT = b"assay capability manifest v1\x00"
UNSIGNED_ENV = "ASSAY_ALLOW_UNSIGNED_MANIFESTS"
DEFAULT_KEY_NAME = "manifest"
MAX_SIG_BYTES = 4096


@dataclass(frozen=True)
class Provenance:
    """Where a loaded manifest's authority comes from; the gateway records it."""

    sha256: str
    key_id: str | None
    warning: str | None = None

    @property
    def signed(self) -> bool:
        return self.key_id is not None and self.warning is None


@dataclass(frozen=True)
class KeyPair:
    key_id: str
    private_path: Path
    public_path: Path
    trusted_path: Path


def key_id(public: Ed25519PublicKey) -> str:
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "ed25519:" + hashlib.sha256(raw).hexdigest()[:16]


def keys_dir() -> Path:
    return settings().ensure_home() / "keys"


def trust_dir() -> Path:
    return settings().ensure_home() / "trusted-keys"


def signature_store() -> Path:
    return settings().ensure_home() / "signatures"


def _public_pem(public: Ed25519PublicKey) -> bytes:
    return public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def _write_atomic(path: Path, data: bytes, mode: int) -> None:
    # Write beside the target and rename, so a reader never sees half a key or signature,
    # and a private key never exists on disk with wider permissions than 0600.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def keygen(name: str = DEFAULT_KEY_NAME, *, force: bool = False, if_missing: bool = False) -> KeyPair:
    """Create a signing key under ASSAY_HOME/keys and trust its public half.

    `if_missing`: keep an existing key (and make sure it is trusted) instead of refusing.
    """
    if not name.replace("-", "").replace("_", "").isalnum():
        raise UserError(f"key name {name!r} is not a plain name", "use letters, digits, '-' or '_'")
    kdir = keys_dir()
    kdir.mkdir(mode=0o700, exist_ok=True)
    private_path, public_path = kdir / f"{name}.key", kdir / f"{name}.pub"
    if private_path.exists() and if_missing and not force:
        public = load_private_key(private_path).public_key()
        return KeyPair(key_id(public), private_path, public_path, trust_public_key(public))
    if private_path.exists() and not force:
        raise UserError(
            f"signing key {private_path} already exists; manifests signed with it would stop verifying",
            "keep it, or pass --force to replace it",
        )
    private = Ed25519PrivateKey.generate()
    public = private.public_key()
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    _write_atomic(private_path, pem, 0o600)
    _write_atomic(public_path, _public_pem(public), 0o644)
    trusted = trust_public_key(public)
    return KeyPair(key_id(public), private_path, public_path, trusted)


def trust_public_key(public: Ed25519PublicKey) -> Path:
    tdir = trust_dir()
    tdir.mkdir(mode=0o755, exist_ok=True)
    kid = key_id(public)
    path = tdir / f"{kid.split(':', 1)[1]}.pub"
    _write_atomic(path, _public_pem(public), 0o644)
    return path


def load_public_key(path: str | Path) -> Ed25519PublicKey:
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise UserError(f"public key {p} cannot be read ({exc.strerror})", "give the path of a .pub file") from None
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise UserError(f"{p} is not a PEM public key ({exc})", "give a key written by `assay policy keygen`") from None
    if not isinstance(key, Ed25519PublicKey):
        raise UserError(f"{p} is not an ed25519 public key", "give a key written by `assay policy keygen`")
    return key


def load_private_key(path: str | Path | None = None) -> Ed25519PrivateKey:
    p = Path(path) if path else keys_dir() / f"{DEFAULT_KEY_NAME}.key"
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise UserError(f"signing key {p} does not exist", "create one with `assay policy keygen`") from None
    except OSError as exc:
        raise UserError(f"signing key {p} cannot be read ({exc.strerror})", "check its permissions") from None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise UserError(
            f"{p} is not an unencrypted PEM private key ({exc})", "use a key from `assay policy keygen`"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise UserError(f"{p} is not an ed25519 private key", "use a key from `assay policy keygen`")
    return key


def trusted_keys() -> dict[str, Ed25519PublicKey]:
    """The trust store, keyed by id computed from each key (never from its file name)."""
    tdir = trust_dir()
    if not tdir.is_dir():
        return {}
    keys = {}
    for path in sorted(tdir.glob("*.pub")):
        key = load_public_key(path)
        keys[key_id(key)] = key
    return keys


def signature_path(manifest_path: str | Path) -> Path:
    p = Path(manifest_path)
    return p.with_name(p.name + ".sig")


def sign_manifest(
    manifest_path: str | Path,
    private_key: str | Path | None = None,
    out: str | Path | None = None,
    *,
    to_store: bool = False,
) -> Path:
    """Write MANIFEST.sig (or `out`, or the store with `to_store`).

    Refuses a manifest that does not validate, so none gets signed by mistake.
    """
    data = read_manifest_bytes(manifest_path)
    parse_manifest(data, str(manifest_path))
    key = load_private_key(private_key)
    body = {
        "format": SIGNATURE_FORMAT,
        "key_id": key_id(key.public_key()),
        "sha256": hashlib.sha256(data).hexdigest(),
        "signature": base64.b64encode(key.sign(CONTEXT + data)).decode("ascii"),
    }
    if to_store:
        signature_store().mkdir(mode=0o755, exist_ok=True)
        out = signature_store() / f"{body['sha256']}.sig"
    out = Path(out) if out else signature_path(manifest_path)
    _write_atomic(out, (json.dumps(body, indent=2) + "\n").encode(), 0o644)
    return out


def _read_signature(sig_path: Path, manifest_path: str | Path) -> tuple[str, bytes]:
    try:
        with sig_path.open("rb") as fh:
            raw = fh.read(MAX_SIG_BYTES + 1)
    except FileNotFoundError:
        raise UserError(
            f"manifest {manifest_path} is not signed (no {sig_path})",
            f"sign it: assay policy sign {manifest_path}",
        ) from None
    except OSError as exc:
        raise UserError(f"signature {sig_path} cannot be read ({exc.strerror})", "check its permissions") from None
    bad = UserError(f"signature file {sig_path} is malformed", f"re-sign: assay policy sign {manifest_path}")
    if len(raw) > MAX_SIG_BYTES:
        raise bad
    try:
        body = json.loads(raw)
        if not isinstance(body, dict) or body.get("format") != SIGNATURE_FORMAT:
            raise ValueError
        kid, sig_b64 = body["key_id"], body["signature"]
        if not isinstance(kid, str) or not isinstance(sig_b64, str):
            raise ValueError
        signature = base64.b64decode(sig_b64, validate=True)
    except (ValueError, KeyError, TypeError, binascii.Error, RecursionError):
        raise bad from None
    if len(signature) != 64:
        raise bad
    return kid, signature


def verify_manifest_bytes(
    data: bytes, manifest_path: str | Path, pubkey: str | Path | None = None, signature: str | Path | None = None
) -> str:
    """Check `data` against its signature; the signer's key id, or UserError.

    The signature is `signature` if given, else MANIFEST.sig, else the store's entry for
    these bytes' digest.
    """
    if signature:
        sig_path = Path(signature)
    else:
        sig_path = signature_path(manifest_path)
        stored = signature_store() / f"{hashlib.sha256(data).hexdigest()}.sig"
        if not sig_path.exists() and stored.exists():
            sig_path = stored
    kid, sig_bytes = _read_signature(sig_path, manifest_path)
    if pubkey is not None:
        key = load_public_key(pubkey)
        if key_id(key) != kid:
            raise UserError(
                f"manifest {manifest_path} was signed by key {kid}, not by the given key {key_id(key)}",
                "give the public key that signed it, or re-sign with the matching private key",
            )
    else:
        key = trusted_keys().get(kid)
        if key is None:
            raise UserError(
                f"manifest {manifest_path} was signed by key {kid}, which is not in the trust store {trust_dir()}",
                "trust the signer's public key with `assay policy trust KEY.pub`, or re-sign with a trusted key",
            )
    try:
        key.verify(sig_bytes, CONTEXT + data)
    except InvalidSignature:
        raise UserError(
            f"manifest {manifest_path} does not match its signature {sig_path.name}: "
            "it was changed after signing, or the signature belongs to another file",
            f"review the change and re-sign: assay policy sign {manifest_path}",
        ) from None
    return kid


def load_signed_manifest(
    path: str | Path,
    *,
    pubkey: str | Path | None = None,
    role: str | None = None,
    signature: str | Path | None = None,
) -> Manifest:
    """The manifest at `path`, only if its signature verifies; UserError otherwise.

    `role`, when given, must be the manifest's role: a validly signed manifest for another
    role is a valid signature on the wrong permissions. `signature` defaults to PATH.sig
    (a shipped manifest in site-packages may be signed into a file elsewhere).
    """
    data = read_manifest_bytes(path)
    digest = hashlib.sha256(data).hexdigest()
    warning = None
    try:
        kid: str | None = verify_manifest_bytes(data, path, pubkey, signature)
    except UserError as exc:
        if os.environ.get(UNSIGNED_ENV) != "1":
            raise
        kid = None
        warning = f"{UNSIGNED_ENV}=1: using manifest {path} WITHOUT a valid signature ({exc.problem}); never do this outside development"
    manifest = parse_manifest(data, str(path))
    if role is not None and manifest.role != role:
        raise UserError(
            f"manifest {path} is for role {manifest.role!r}, not {role!r}",
            "give the manifest of the role this session runs as",
        )
    if warning:
        # Logged on every load, and kept on the manifest for the gateway to print at start.
        log.warning(warning)
    manifest._provenance = Provenance(sha256=digest, key_id=kid, warning=warning)
    return manifest
