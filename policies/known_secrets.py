"""Exact values assay knows are secret, found also when encoded or wrapped across lines.

A tool that prints a secret rarely prints it bare: it base64s it into a config, hex-dumps it,
URL-encodes it into a query string, or wraps it at some column. So every registered value is
matched in each of those forms, and in each form a run of whitespace (or a JSON/C escape like
\\n) may sit between any two characters. All forms of all values compile into one RE2 regex,
one capture group per value, so a scan is one linear pass however many secrets are known.

The regex is built over bytes in Latin-1 mode: one pattern character per byte, so a value
with non-ASCII characters is matched byte for byte, raw or percent-encoded.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

import re2

from assay.policies.re2util import match_spans

_ANCHOR_BOTH = re2._Anchor.ANCHOR_BOTH

# Values shorter than this are not registered: redacting every "1234" would wreck the text
# and protect nothing.
MIN_LENGTH = 6
# Encoded fragments shorter than this match too much ordinary text to be worth it.
MIN_ENCODED = 8

_SEP = rb"(?:\s|\\[nrt])*"
_B64CHARS = rb"[A-Za-z0-9+/_-]"


@dataclass
class Finding:
    start: int
    end: int
    kind: str


def _literal(b: int) -> bytes:
    return b"\\x%02x" % b


def _spaced(fragment: bytes) -> bytes:
    """A pattern for `fragment` with optional whitespace/escapes between its bytes."""
    return _SEP.join(_literal(b) for b in fragment)


def _hexdigit(n: int) -> bytes:
    upper, lower = b"%X" % n, b"%x" % n
    return upper if upper == lower else b"[" + upper + lower + b"]"


def _url_form(value: bytes) -> bytes:
    """Each byte raw or percent-encoded in either case (space also as '+'), whatever the encoder chose."""
    parts = []
    for b in value:
        alts = [_literal(b), b"%" + _hexdigit(b >> 4) + _hexdigit(b & 15)]
        if b == 0x20:
            alts.append(rb"\+")
        parts.append(b"(?:" + b"|".join(alts) + b")")
    return _SEP.join(parts)


def base64_fragments(value: bytes) -> list[bytes]:
    """The part of base64(x + value + y) that depends only on `value`, for each of the 3
    alignments value can have inside a larger encoded blob."""
    out = []
    for k in range(3):
        encoded = base64.b64encode(b"\0" * k + value)
        start = -(-8 * k // 6)  # ceil: the first character made only of value's bits
        stop = (8 * (k + len(value))) // 6  # the last character made only of value's bits
        fragment = encoded[start:stop]
        if len(fragment) >= MIN_ENCODED:
            out.append(fragment)
    return out


def forms(value: bytes) -> list[tuple[str, bytes]]:
    """(form name, pattern) for every encoding of `value` that is matched."""
    out: list[tuple[str, bytes]] = [("url", _url_form(value))]  # raw bytes are one of its alternatives
    for fragment in base64_fragments(value):
        urlsafe = fragment.replace(b"+", b"-").replace(b"/", b"_")
        # One base64 character on either side carries a few bits of the value: take it too.
        for frag in {fragment, urlsafe}:
            out.append(("base64", _B64CHARS + b"?" + _SEP + _spaced(frag) + _SEP + _B64CHARS + b"?={0,2}"))
    hexed = value.hex().encode()
    if len(hexed) >= MIN_ENCODED:
        out.append(("hex", _spaced(hexed)))
        out.append(("hex", _spaced(hexed.upper())))
    return out


class KnownSecrets:
    """The registered values of one run and the single regex that finds them."""

    __slots__ = ("_values", "_kinds", "_regex")

    def __init__(self) -> None:
        self._values: list[bytes] = []
        self._kinds: list[str] = []
        self._regex = None

    def add(self, value: bytes, kind: str) -> bool:
        if len(value) < MIN_LENGTH or value in self._values:
            return False
        self._values.append(value)
        self._kinds.append(kind)
        self._regex = None
        return True

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"<KnownSecrets: {len(self)} values, withheld>"

    def __reduce_ex__(self, protocol: object) -> object:
        raise TypeError("known secrets never leave the process: they cannot be pickled")

    def _compiled(self):
        """One regex for every form of every value (no capture groups, so RE2 answers from
        its DFA), and one per value to tell afterwards which value a match was."""
        if self._regex is None and self._values:
            opts = re2.Options()
            opts.encoding = re2.Options.Encoding.LATIN1
            opts.max_mem = 256 << 20
            opts.log_errors = False
            each = [b"(?:" + b"|".join(p for _, p in forms(value)) + b")" for value in self._values]
            self._regex = (re2.compile(b"|".join(each), opts), [re2.compile(p, opts) for p in each])
        return self._regex

    def find(self, data: bytes) -> list[Finding]:
        compiled = self._compiled()
        if compiled is None:
            return []
        combined, each = compiled
        out = []
        for spans in match_spans(combined, data):
            s, e = spans[0]
            for i, regex in enumerate(each):
                if regex._regexp.Match(_ANCHOR_BOTH, data, s, e)[0][0] != -1:
                    s, e = _trim(data, s, e)
                    if e > s:
                        out.append(Finding(s, e, self._kinds[i]))
                    break
        return out


def _trim(data: bytes, s: int, e: int) -> tuple[int, int]:
    """Leading/trailing separators are context, not secret."""
    while s < e and data[s : s + 1].isspace():
        s += 1
    while e > s and data[e - 1 : e].isspace():
        e -= 1
    return s, e
