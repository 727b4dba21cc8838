"""High-entropy tokens: random-looking runs of the base64 or hex alphabet.

A run is flagged when its Shannon entropy is as high as a random token of the same length
would reach (the 1st percentile of random tokens, minus a margin: in doubt, redact), and for
base64 when it mixes lower case, upper case and digits as random tokens almost always do, so
long identifiers (snake_case, CamelCase, paths) stay readable. Hex runs preceded by a hash
label (sha256:, commit, digest, ...) are taken for hashes and kept; unlabelled ones are not.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass

import re2

from assay.policies.re2util import match_spans

MIN_BASE64 = 20
MIN_HEX = 32

# Maximal runs of the base64/base64url alphabet, at least 20 long and holding a digit (both
# kinds of token need one). Each alternative fixes where the first digit is, and the run must
# start after a non-alphabet byte, so RE2's DFA tracks one run at a time instead of a thread
# per start position; that keeps it small and fast. The match includes that one leading byte
# (RE2 has no lookbehind) and no capture group, so RE2 answers from its DFA alone.
_C = rb"[A-Za-z0-9+/_-]"
_L = rb"[A-Za-z+/_-]"
_RUN = re2.compile(
    rb"(?:^|[^A-Za-z0-9+/_-])(?:"
    + b"|".join([_L + b"{%d}[0-9]" % p + _C + b"{%d,}" % (MIN_BASE64 - 1 - p) for p in range(MIN_BASE64 - 1)]
                + [_L + b"{%d,}[0-9]" % (MIN_BASE64 - 1) + _C + b"*"])
    + rb")={0,2}"
)
_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-"
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


def entropy(data: bytes) -> float:
    """Shannon entropy in bits per byte."""
    n = len(data)
    if not n:
        return 0.0
    if n > 4096:
        return -sum(c / n * math.log2(c / n) for c in Counter(data).values())
    return math.log2(n) - sum(map(_CLOG2C.__getitem__, Counter(data).values())) / n


def is_high_entropy(token: bytes, before: bytes = b"") -> str | None:
    """The kind of high-entropy token this is, or None. Cheapest rejections first: most
    candidates are identifiers or ids in one case."""
    body = token.rstrip(b"=")
    n = len(body)
    if n >= MIN_HEX and not body.translate(None, _HEXDIGITS):
        if len(body.translate(None, _DIGITS)) in (0, n):  # needs both digits and letters
            return None
        if _HASH_LABEL.search(before):
            return None
        return "high-entropy-hex" if entropy(body) >= _threshold(_HEX_P1, n) else None
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
    return "high-entropy" if entropy(body) >= _threshold(_B64_P1, n) else None


def find_high_entropy(data: bytes) -> list[Finding]:
    out: list[Finding] = []
    for spans in match_spans(_RUN, data):
        s, e = spans[0]
        if data[s] not in _ALPHABET:
            s += 1  # the delimiter byte before the run
        kind = is_high_entropy(data[s:e], data[max(0, s - 24) : s])
        if kind:
            out.append(Finding(s, e, kind))
    return out
