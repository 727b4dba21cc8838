"""High-entropy tokens: random-looking runs of the base64 or hex alphabet.

A run is flagged when its Shannon entropy is as high as a random token of the same length
would reach (the 1st percentile of random tokens, minus a margin: in doubt, redact), and for
base64 when it mixes lower case, upper case and digits as random tokens almost always do, so
long identifiers (snake_case, CamelCase, paths) stay readable. Hex runs preceded by a hash
label (sha256:, commit, digest, ...) are taken for hashes and kept; unlabelled ones are not.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections import _count_elements  # pyright: ignore[reportAttributeAccessIssue]  # Counter's C helper: counts without building a Counter
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import re2

from assay.policies.redaction import re2bulk, re2native
from assay.policies.redaction.re2util import _UNANCHORED

_ANCHOR_START = re2._Anchor.ANCHOR_START

MIN_BASE64 = 20
MIN_HEX = 32

# Candidates are maximal runs of the base64/base64url alphabet that could pass the checks in
# `is_high_entropy`: a run holding a digit, an upper-case and a lower-case letter (whatever
# the order their first occurrences come in: one alternative per order), or a run of 32 or
# more hex digits. Every run the checks accept is one of these, and plain words, ids in one
# case, UUIDs and version strings are not, so RE2 skips them without a Python call each. The
# match includes the one byte before the run (RE2 has no lookbehind) and no capture group, so
# RE2 answers from its DFA alone; Latin-1 mode makes that byte one byte, whatever it is.
_C = rb"[A-Za-z0-9+/_-]"
_CLASSES = {"d": b"0-9", "u": b"A-Z", "l": b"a-z"}


def _one_order(order: str) -> bytes:
    """A run whose first digit, upper and lower come in `order` (e.g. "dul")."""
    out, seen = rb"[+/_-]*", b""
    for c in order[:-1]:
        seen += _CLASSES[c]
        out += b"[" + _CLASSES[c] + b"][" + seen + rb"+/_-]*"
    return out + b"[" + _CLASSES[order[-1]] + b"]" + _C + b"*"


def _latin1():
    opts = re2.Options()
    opts.encoding = re2.Options.Encoding.LATIN1
    return opts


_ORDERS = ("dul", "dlu", "udl", "uld", "ldu", "lud")
_CANDIDATE = re2.compile(
    rb"(?:^|[^A-Za-z0-9+/_-])(?:" + b"|".join(_one_order(o) for o in _ORDERS) + rb"|[0-9a-fA-F]{32,})",
    _latin1(),
)
_REST_OF_RUN = re2.compile(_C + b"*", _latin1())
_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-"
_IN_RUN = [b in _ALPHABET for b in range(256)]
_RUN_OR_PAD = _ALPHABET + b"="
_DIGITS = b"0123456789"
_LOWER = b"abcdefghijklmnopqrstuvwxyz"
_UPPER = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_HEXDIGITS = b"0123456789abcdefABCDEF"
_HASH_LABEL = re2.compile(
    rb"(?i)(?:sha[0-9]*|md5|blake[0-9a-z]*|commit|digest|hash|checksum|integrity|rev(?:ision)?|etag|object|tree|parent|index|fingerprint)[\s:=@\"'#(-]{0,3}$"
)

# 1st percentile of the Shannon entropy of uniformly random tokens, by length, measured by
# simulation (2000 samples per length). Interpolated linearly between the points.
_B64_P1 = [(16, 3.38), (20, 3.62), (24, 3.91), (32, 4.23), (40, 4.46), (64, 4.93), (128, 5.45), (256, 5.75)]
_HEX_P1 = [(16, 2.66), (20, 2.87), (24, 3.04), (32, 3.25), (40, 3.41), (64, 3.63), (128, 3.8), (256, 3.9)]
MARGIN = 0.1


@dataclass
class Finding:
    start: int
    end: int
    kind: str


def _threshold(table: list[tuple[int, float]], n: int) -> float:
    lengths = [x for x, _ in table]
    i = bisect_left(lengths, n)
    if i == 0:
        return table[0][1] - MARGIN
    if i >= len(table):
        return table[-1][1] - MARGIN
    (x0, y0), (x1, y1) = table[i - 1], table[i]
    return y0 + (y1 - y0) * (n - x0) / (x1 - x0) - MARGIN


# c*log2(c) by count, so entropy is one table lookup per distinct byte:
# H = log2(n) - sum(c*log2(c)) / n.
_CLOG2C = [0.0] + [c * math.log2(c) for c in range(1, 4097)]
_TABLED = 4096  # thresholds by length, looked up instead of interpolated each time
_HEX_AT = [_threshold(_HEX_P1, n) for n in range(_TABLED + 1)]
_B64_AT = [_threshold(_B64_P1, n) for n in range(_TABLED + 1)]


def entropy(data: bytes) -> float:
    """Shannon entropy in bits per byte."""
    n = len(data)
    if not n:
        return 0.0
    counts: dict[int, int] = {}
    _count_elements(counts, data)
    if n > 4096:
        return -sum(c / n * math.log2(c / n) for c in counts.values())
    return math.log2(n) - sum(map(_CLOG2C.__getitem__, counts.values())) / n


def entropies(items: list[bytes]) -> list[float]:
    """`entropy` of each item, in one numpy pass over all of them (for many short items).
    Sums may round differently from `entropy`'s; `above` settles near ties with it."""
    if not items:
        return []
    lengths = np.fromiter(map(len, items), np.int64, len(items))
    joined = np.frombuffer(b"".join(items), np.uint8)
    owner = np.repeat(np.arange(len(items), dtype=np.int64), lengths)
    # One count per (item, byte); only the counts that occur are weighed, since the
    # items x 256 table is mostly zeros and several float copies of it cost more than the rest.
    counts = np.bincount(owner * 256 + joined, minlength=len(items) * 256)
    used = np.flatnonzero(counts)
    c = counts[used].astype(np.float64)
    weighted = np.bincount(used >> 8, weights=c * np.log2(c), minlength=len(items))
    with np.errstate(divide="ignore", invalid="ignore"):
        values = np.where(lengths > 0, np.log2(np.maximum(lengths, 1)) - weighted / np.maximum(lengths, 1), 0.0)
    return values.tolist()


def above(items: list[bytes], threshold: float) -> list[bool]:
    """Whether each item's entropy exceeds `threshold`, exactly as `entropy(item) >
    threshold` says: the batch value decides unless it is within 1e-9 of the threshold."""
    out = []
    for item, value in zip(items, entropies(items), strict=False):
        if abs(value - threshold) < 1e-9:
            value = entropy(item)
        out.append(value > threshold)
    return out


def is_high_entropy(token: bytes, before: bytes = b"") -> str | None:
    """The kind of high-entropy token this is, or None. Cheapest rejections first: most
    candidates are identifiers or ids in one case."""
    body = token.rstrip(b"=")
    n = len(body)
    if n >= MIN_HEX and not body.translate(None, _HEXDIGITS):
        if len(body.translate(None, _DIGITS)) in (0, n):  # needs both digits and letters
            return None
        if _HASH_LABEL._regexp.Match(_UNANCHORED, before, 0, len(before))[0][0] != -1:
            return None
        return "high-entropy-hex" if entropy(body) >= (_HEX_AT[n] if n <= _TABLED else _threshold(_HEX_P1, n)) else None
    if n < MIN_BASE64:
        return None
    if len(body.translate(None, _UPPER)) == n or len(body.translate(None, _LOWER)) == n:
        return None
    if len(body.translate(None, _DIGITS)) == n:
        return None
    # A path or URL is words between slashes; random base64 almost never has two or more
    # segments in plain lower case.
    if b"/" in body:
        segments = body.split(b"/")
        wordy = sum(1 for seg in segments if len(seg) >= 2 and seg.islower() and seg.isalnum())
        if wordy >= max(2, len(segments) // 2):
            return None
    return "high-entropy" if entropy(body) >= (_B64_AT[n] if n <= _TABLED else _threshold(_B64_P1, n)) else None


@lru_cache(maxsize=1)
def native() -> re2native.Entropy | None:
    """This detector built into re2bulk's library, or None without it."""
    beyond = _TABLED + 1
    return re2native.Entropy.of(
        _CANDIDATE, _HASH_LABEL, _HEX_AT, _B64_AT, _threshold(_HEX_P1, beyond), _threshold(_B64_P1, beyond)
    )


_KINDS = {1: "high-entropy-hex", 2: "high-entropy"}


def find_high_entropy(data: bytes, covered: list[tuple[int, int]] | None = None, listed=None) -> list[Finding]:
    """Every maximal run of the base64 alphabet (with up to two '=' after it) that
    `is_high_entropy` takes for a token.

    `covered`: sorted, disjoint spans already found by a detector that outranks this one
    (redaction.py merges overlapping findings and names them after the higher-ranked one).
    A token wholly inside one of them would change nothing there, so it is not checked.
    Texts of re2bulk.MIN_BYTES and more are searched and judged in re2bulk's library, which
    leaves to `is_high_entropy` only an entropy within 1e-9 of its threshold; `listed`: the
    library's candidates for `data` (re2native.Entropy.candidates), when run ahead.
    """
    found = native() if re2bulk.takes(data) else None
    if found is not None:
        out = []
        flat = found.find(data, covered or [], listed)
        for k in range(0, len(flat), 4):
            s, e, end, kind = flat[k : k + 4]
            name = _KINDS.get(kind) or is_high_entropy(data[s:e], data[max(0, s - 24) : s])
            if name:
                out.append(Finding(s, end, name))
        return out
    out: list[Finding] = []
    search = re2bulk.live_cursor(_CANDIDATE, data)
    rest = _REST_OF_RUN._regexp.Match
    covered = covered or []
    starts = [lo for lo, _ in covered]
    n = len(data)
    pos = 0
    while pos < n:
        s, e = search(pos)
        if s < 0:
            break
        pos = e
        if not _IN_RUN[data[s]]:
            s += 1  # the byte before the run
        if e < n and _IN_RUN[data[e]]:
            # A 32-hex-digit start of a longer run that is not all hex: it lacks a digit, an
            # upper or a lower letter (else the first alternatives had taken it), so no check
            # would accept it. Skip the rest of it.
            pos = rest(_ANCHOR_START, data, e, n)[0][1]
            continue
        end = e
        while end < n and end < e + 2 and data[end] == 61:  # '=' padding belongs to the token
            end += 1
        if starts:
            i = bisect_right(starts, s) - 1
            if i >= 0 and end <= covered[i][1]:
                # Inside a covered span: so are the runs after it, up to the run (or '='
                # padding) the span ends in, which may reach past it. Go on from the byte
                # before that last run: the search needs it as the run's delimiter.
                b = covered[i][1]
                if b > e:
                    pos = e + len(data[e:b].rstrip(_RUN_OR_PAD)) - 1
                continue
        kind = is_high_entropy(data[s:e], data[max(0, s - 24) : s])
        if kind:
            out.append(Finding(s, end, kind))
    return out
