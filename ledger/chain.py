"""The verdict chain: how a row's hash is derived, and the walk that checks every link.

Anyone can re-derive a row's hash without assay's code:

    content  = {"run_id", "key", "created_at", "payload", "signature"} of the row
    canon    = JSON of content, keys sorted, separators "," and ":", UTF-8, no NaN/Infinity,
               created_at as UTC "YYYY-MM-DDTHH:MM:SS.ffffffZ"
    row_hash = sha256(prev_hash as 64 lowercase hex ASCII + "\\n" + canon), hex
    prev_hash of the first row is 64 zeros; of every later row, the previous row's row_hash.

Rows are numbered 1, 2, 3 ... by `id` with no gaps. The position is not hashed: the order is
carried by the links, so a swapped id shows up as a link pointing at the wrong row.
A hash chain cannot notice the newest rows being cut off; pin the head (`expected_head`) for
that. Who may append is the signatures' business, checked through `signature_check`. A
signature covers the payload only, so a payload that names its run and key ("run_id", "key")
must sit in a row of that run and key: else a genuine signed verdict could be copied into
another run's row and pass ("misplaced").
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from assay.typed import as_dict

GENESIS = "0" * 64

Problem = Literal["changed", "gap", "reordered", "bad_link", "bad_signature", "misplaced"]
SignatureCheck = Callable[[dict[str, Any], str], bool]
"""(payload, signature) -> True when the signature is good over canonical_json(payload)."""


def canonical_json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def normalize_payload(payload: Any) -> dict[str, Any]:
    """What the database will hand back for `payload`: the JSON round trip, done up front."""
    if not isinstance(payload, dict):
        raise TypeError(f"a verdict payload must be a dict, not {type(payload).__name__}")
    try:
        return json.loads(canonical_json(payload))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"verdict payload is not plain JSON: {exc}") from None


def format_time(ts: datetime) -> str:
    if ts.tzinfo is None:  # SQLite hands back naive UTC
        ts = ts.replace(tzinfo=UTC)
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def row_hash(prev_hash: str, *, run_id: str, key: str, created_at: datetime | str, payload: Any, signature: str) -> str:
    content = {
        "run_id": run_id,
        "key": key,
        "created_at": created_at if isinstance(created_at, str) else format_time(created_at),
        "payload": payload,
        "signature": signature,
    }
    return hashlib.sha256(prev_hash.encode("ascii", "replace") + b"\n" + canonical_json(content)).hexdigest()


@dataclass(frozen=True)
class RawRow:
    """A verdict row exactly as stored; fields may hold anything after tampering."""

    id: Any
    run_id: Any
    key: Any
    created_at: Any
    payload: Any
    signature: Any
    prev_hash: Any
    row_hash: Any


@dataclass(frozen=True)
class ChainReport:
    count: int
    head: str
    problem: Problem | None = None
    row_id: int | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.problem is None

    def summary(self) -> str:
        if self.ok:
            head = "empty" if self.count == 0 else f"head {self.head[:16]}"
            return f"ledger intact: {self.count} verdict{'s' * (self.count != 1)} chained, {head}"
        problem = (self.problem or "").replace("_", " ")
        return f"ledger TAMPERED at verdict row {self.row_id}: {problem}: {self.detail}"


def _recompute(row: RawRow) -> str | None:
    """The hash the row's stored content derives to, or None when it cannot even be read."""
    try:
        payload = json.loads(row.payload) if isinstance(row.payload, (str, bytes)) else row.payload
        created = row.created_at
        if isinstance(created, str):  # SQLite returns the stored text on a raw read
            created = datetime.fromisoformat(created)
        if not isinstance(created, datetime) or not isinstance(row.prev_hash, str):
            return None
        return row_hash(
            row.prev_hash,
            run_id=row.run_id,
            key=row.key,
            created_at=created,
            payload=payload,
            signature=row.signature,
        )
    except (TypeError, ValueError):
        return None


def walk(
    rows: Iterable[RawRow],
    find_by_hash: Callable[[str], int | None],
    *,
    signature_check: SignatureCheck | None = None,
    expected_head: str | None = None,
) -> ChainReport:
    """Check rows given in id order; stop at the first bad one and say what is wrong with it."""
    prev_id, prev_hash, count = 0, GENESIS, 0
    for row in rows:
        rid = row.id
        if rid != prev_id + 1:
            missing = f"row {prev_id + 1}" if rid == prev_id + 2 else f"rows {prev_id + 1}-{rid - 1}"
            return ChainReport(count, prev_hash, "gap", rid, f"{missing} missing (deleted)")
        if _recompute(row) != row.row_hash:
            return ChainReport(count, prev_hash, "changed", rid, "its contents no longer match its row_hash")
        if row.prev_hash != prev_hash:
            other = find_by_hash(row.prev_hash)
            if other is not None and other != rid:
                return ChainReport(
                    count,
                    prev_hash,
                    "reordered",
                    rid,
                    f"it links to row {other}, not to row {prev_id}"
                    if prev_id
                    else f"it links to row {other}, but is first",
                )
            before = f"row {prev_id}'s row_hash" if prev_id else "the chain's start"
            return ChainReport(
                count,
                prev_hash,
                "bad_link",
                rid,
                f"prev_hash does not match {before} (a row before it was rewritten, inserted or removed)",
            )
        wrong_place = misplaced(row.run_id, row.key, row.payload)
        if wrong_place:
            return ChainReport(count, prev_hash, "misplaced", rid, wrong_place)
        if signature_check is not None and not _signature_ok(signature_check, row):
            return ChainReport(count, prev_hash, "bad_signature", rid, "its signature does not verify")
        prev_id, prev_hash, count = rid, row.row_hash, count + 1
    if expected_head is not None and find_by_hash(expected_head) is None:
        return ChainReport(
            count,
            prev_hash,
            "gap",
            prev_id + 1,
            f"the pinned head {expected_head[:16]} is no longer in the chain (rows cut off the end)",
        )
    return ChainReport(count, prev_hash)


def misplaced(run_id: Any, key: Any, payload: Any) -> str | None:
    """Why a verdict row's payload does not belong in it (it names another run or key), or None."""
    if isinstance(payload, (str, bytes)):
        try:
            payload = json.loads(payload)
        except ValueError:
            return None  # unreadable: the hash check has its say
    doc = as_dict(payload)
    if doc is None:
        return None
    for field, actual in (("run_id", run_id), ("key", key)):
        if field in doc and doc[field] != actual:
            return f"its payload names {field} {str(doc[field])[:40]!r}, but the row holds {str(actual)[:40]!r} (copied from elsewhere)"
    return None


def _signature_ok(check: SignatureCheck, row: RawRow) -> bool:
    payload = json.loads(row.payload) if isinstance(row.payload, (str, bytes)) else row.payload
    try:
        return bool(check(payload, row.signature))
    except Exception:  # noqa: BLE001 - a check that blows up has not vouched for the row
        return False


def iter_raw(result: Iterator[Any]) -> Iterator[RawRow]:
    for r in result:
        yield RawRow(*r)
