"""The verdict chain's signed head, kept outside the database, and a signed receipt per verdict.

A hash chain proves that no row in it was changed; it cannot prove that rows were not cut off
its end, or that the whole file was not swapped for yesterday's copy. After each verdict the
verifier signs the chain's head (how many verdicts, the newest row's hash) and writes it beside
its keys, one file per ledger; `assay ledger verify` then fails on a database that no longer
holds that row. Each verdict also gets a receipt (its id, row hash and the head it made),
signed the same way, that `assay run` writes next to its reports: `assay ledger verify
--receipts DIR` proves each one's verdict is still in the chain, wherever the receipt travelled.
This is Certificate Transparency's signed tree head and inclusion check, cut to one machine
or a team's PostgreSQL.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from assay.verifiers import signing

HEADS = "heads"


def ledger_id(url: str) -> str:
    """A ledger's name in heads and receipts: its URL's hash (no password ever written)."""
    from assay.ledger.schema import hide_password

    return hashlib.sha256(hide_password(url).encode()).hexdigest()[:16]


def head_path(home: Path, url: str) -> Path:
    return home / HEADS / f"{ledger_id(url)}.json"


def _signed(key: Ed25519PrivateKey, body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "signature": signing.sign(key, body)}


def _check(public: Ed25519PublicKey | None, doc: Any) -> str:
    if not isinstance(doc, dict) or "signature" not in doc:
        return "invalid"
    body = {k: v for k, v in doc.items() if k != "signature"}
    return signing.check(public, body, str(doc["signature"]))


def write_head(home: Path, key: Ed25519PrivateKey, url: str, count: int, head: str) -> dict[str, Any]:
    """Sign and store the chain's head for this ledger (atomically: a reader never sees half)."""
    doc = _signed(key, {"ledger": ledger_id(url), "count": count, "head": head})
    path = head_path(home, url)
    try:
        held = json.loads(path.read_text())
        if isinstance(held.get("count"), int) and held["count"] > count:
            return held  # a verdict chained before (an append that found its row): never move back
    except (OSError, ValueError, AttributeError):
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return doc


def receipt(key: Ed25519PrivateKey, url: str, verdict: Any) -> dict[str, Any]:
    """A signed receipt for one verdict row: which ledger, which row, and that row's hash (which
    the chain ties to every row before it)."""
    body = {
        "ledger": ledger_id(url),
        "run_id": verdict.run_id,
        "verdict_id": verdict.id,
        "row_hash": verdict.row_hash,
        "passed": bool((verdict.payload or {}).get("passed")),
    }
    return _signed(key, body)


def check_head(home: Path, public: Ed25519PublicKey | None, url: str, find_row: Any, count: int) -> str | None:
    """Why the ledger no longer holds the head signed for it, or None (also when none was)."""
    path = head_path(home, url)
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return f"the signed head {path} is unreadable"
    if _check(public, doc) != "valid":
        return f"the signed head {path} does not verify with the verifier's key"
    want, head = doc.get("count"), doc.get("head")
    if not isinstance(want, int) or not isinstance(head, str):
        return f"the signed head {path} is malformed"
    if count < want:
        return f"verdicts: the ledger holds {count} verdicts, but {want} were signed for it (rows cut off, or an older copy restored)"
    if find_row(want) != head:
        return f"verdicts: verdict {want} is not the one signed as the head (the chain was rewritten from there)"
    return None


def check_receipt(public: Ed25519PublicKey | None, doc: Any, url: str, find_row: Any, count: int) -> str | None:
    """Why a receipt's verdict is not (or no longer) in this ledger's chain, or None."""
    status = _check(public, doc)
    if status != "valid":
        return f"receipt signature is {status}"
    if doc.get("ledger") != ledger_id(url):
        return "receipt is for another ledger"
    vid, row = doc.get("verdict_id"), doc.get("row_hash")
    if not isinstance(vid, int) or vid > count:
        return f"verdict {vid} of run {doc.get('run_id')} is missing from the chain ({count} verdicts)"
    if find_row(vid) != row:
        return f"verdict {vid} of run {doc.get('run_id')} is not the one the receipt names (replaced)"
    return None
