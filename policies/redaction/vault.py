"""The placeholder vault: placeholder <-> real value, for one run, in process memory only.

The vault is the one object that holds secrets in clear, so it is built to leak by no
accident: its repr and str show counts only, it refuses pickling and copying (a pickled vault
would be the secrets on disk or on the wire), and it has no __dict__ for a debugger or a
logger to dump. Values are kept as the exact bytes a placeholder replaced, so restoring gives
back exactly the text that was redacted.
"""

from __future__ import annotations

import secrets
from functools import lru_cache

import re2

# A placeholder is ASCII so JSON, YAML and shell quoting leave it byte-for-byte unchanged,
# and double brackets with a category and a counter make it unlike anything in normal text.
# The kind is the detector's name (a gitleaks rule id, a PII kind, an env variable name).
PLACEHOLDER_RE = re2.compile(rb"\[\[(?:SECRET|PII):[A-Za-z0-9][A-Za-z0-9._-]{0,80}:[0-9]{1,9}\]\]")

CATEGORIES = ("SECRET", "PII")


@lru_cache(maxsize=1024)  # a run has a few dozen kinds; a dense text asks for each hundreds of times
def _safe_kind(kind: str) -> str:
    """Kinds come from rule ids and env names; anything else is folded into the allowed set."""
    out = "".join(c if (c.isascii() and (c.isalnum() or c in "._-")) else "-" for c in kind)[:80]
    return out if out and out[0].isalnum() else "x" + out[:79]


class Vault:
    __slots__ = ("_by_value", "_by_placeholder", "_counter")

    def __init__(self) -> None:
        self._by_value: dict[bytes, bytes] = {}
        self._by_placeholder: dict[bytes, bytes] = {}
        # Counters start at a random 8-digit number: two runs that redact the same files in the
        # same order (a folder's redacted view, say) issue different placeholders, so one run's
        # placeholder is never another's; fixed width, so a placeholder's length tells nothing.
        self._counter = 10_000_000 + secrets.randbelow(80_000_000)

    def placeholder_for(self, value: bytes, category: str, kind: str) -> bytes:
        """The run's placeholder for `value`; the first sighting fixes its category and kind."""
        found = self._by_value.get(value)
        if found is not None:
            return found
        if category not in CATEGORIES:
            raise ValueError(f"category must be one of {CATEGORIES}")
        self._counter += 1
        placeholder = f"[[{category}:{_safe_kind(kind)}:{self._counter}]]".encode()
        self._by_value[value] = placeholder
        self._by_placeholder[placeholder] = value
        return placeholder

    def value_of(self, placeholder: bytes) -> bytes | None:
        return self._by_placeholder.get(placeholder)

    def knows(self, placeholder: bytes) -> bool:
        return placeholder in self._by_placeholder

    def __len__(self) -> int:
        return len(self._by_placeholder)

    def __contains__(self, placeholder: object) -> bool:
        if isinstance(placeholder, str):
            placeholder = placeholder.encode()
        return placeholder in self._by_placeholder

    def __repr__(self) -> str:
        return f"<Vault: {len(self)} placeholders, values withheld>"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self)

    def __reduce_ex__(self, protocol: object) -> object:
        raise TypeError("the vault never leaves the process: it cannot be pickled")

    def __copy__(self) -> object:
        raise TypeError("the vault is not copied: pass the one per run instead")

    def __deepcopy__(self, memo: object) -> object:
        raise TypeError("the vault is not copied: pass the one per run instead")

    def __getstate__(self) -> object:
        raise TypeError("the vault never leaves the process: it cannot be pickled")
