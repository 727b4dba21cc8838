"""RE2 helpers shared by the redaction detectors."""

from __future__ import annotations

from typing import Iterator

import re2

_UNANCHORED = re2._Anchor.UNANCHORED


def match_spans(regex, data: bytes) -> Iterator[tuple]:
    """Every match of `regex` in `data` as a tuple of (start, end) spans, one per group.

    The same leftmost, non-overlapping matches as finditer, without building a Match object
    per hit: on text with thousands of candidates that object costs more than the search.
    """
    search = regex._regexp.Match
    pos, n = 0, len(data)
    while pos <= n:
        spans = search(_UNANCHORED, data, pos, n)
        s, e = spans[0]
        if s == -1:
            return
        yield spans
        pos = e if e > s else e + 1
