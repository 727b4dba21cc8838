"""Unicode folding before matching: a secret written with lookalike characters is still found.

Code that prints a secret can hide it from a byte-exact matcher without changing how it reads:
fullwidth forms (ｇｈｐ_), characters that draw nothing between the letters (zero-width space,
soft hyphen, joiners, bidi controls), or Cyrillic and Greek letters that look like Latin ones.
`fold` gives the text as a matcher should see it (NFKC, format characters dropped, common
homoglyphs mapped to their Latin twins) and, for each of its characters, the index of the
original character it came from, so a finding in the folded text redacts the original span.
Only a text that folding changes costs more than one NFKC pass.
"""

from __future__ import annotations

import re
import unicodedata

import numpy as np

# Format characters that draw nothing: zero-width space and joiners, word joiner, BOM, soft
# hyphen, directional marks, embeddings, overrides and isolates, invisible operators.
_DROP = dict.fromkeys(
    [
        0x00AD,
        0x034F,
        0x061C,
        0x115F,
        0x1160,
        0x17B4,
        0x17B5,
        0x180E,
        0x200B,
        0x200C,
        0x200D,
        0x200E,
        0x200F,
        0x2060,
        0x2061,
        0x2062,
        0x2063,
        0x2064,
        0xFEFF,
    ]
    + list(range(0x202A, 0x202F))
    + list(range(0x2066, 0x206A)),
)
# Cyrillic and Greek letters that Unicode's confusables.txt maps to a single Latin letter (the
# ones a font draws the same: not every entry, the ones seen in practice).
_HOMOGLYPHS = {
    # Cyrillic lower and upper case
    "а": "a",
    "е": "e",
    "о": "o",
    "р": "p",
    "с": "c",
    "у": "y",
    "х": "x",
    "і": "i",
    "ј": "j",
    "ѕ": "s",
    "ԁ": "d",
    "ԛ": "q",
    "ԝ": "w",
    "һ": "h",
    "ӏ": "l",
    "ү": "y",
    "ɡ": "g",
    "А": "A",
    "В": "B",
    "Е": "E",
    "К": "K",
    "М": "M",
    "Н": "H",
    "О": "O",
    "Р": "P",
    "С": "C",
    "Т": "T",
    "Х": "X",
    "Ѕ": "S",
    "І": "I",
    "Ј": "J",
    "Ү": "Y",
    "Ԁ": "D",
    "Ԛ": "Q",
    "Ԝ": "W",
    # Greek
    "α": "a",
    "ο": "o",
    "ν": "v",
    "ρ": "p",
    "ι": "i",
    "κ": "k",
    "χ": "x",
    "υ": "u",
    "ϲ": "c",
    "ϳ": "j",
    "Α": "A",
    "Β": "B",
    "Ε": "E",
    "Ζ": "Z",
    "Η": "H",
    "Ι": "I",
    "Κ": "K",
    "Μ": "M",
    "Ν": "N",
    "Ο": "O",
    "Ρ": "P",
    "Τ": "T",
    "Υ": "Y",
    "Χ": "X",
}
_TABLE = {**_DROP, **{ord(k): v for k, v in _HOMOGLYPHS.items()}}
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")


def _one(char: str) -> str:
    return unicodedata.normalize("NFKC", char).translate(_TABLE)


def fold(text: str) -> tuple[str, np.ndarray] | None:
    """(folded text, original index of each of its characters), or None when folding changes
    nothing (every ASCII text, and most others)."""
    if text.isascii():
        return None
    if unicodedata.normalize("NFKC", text).translate(_TABLE) == text:
        return None
    parts: list[str] = []
    index: list[np.ndarray] = []
    pos = 0
    for m in _NON_ASCII.finditer(text):
        a, b = m.span()
        if a > pos:
            parts.append(text[pos:a])
            index.append(np.arange(pos, a, dtype=np.int64))
        for i in range(a, b):
            n = _one(text[i])
            if n:
                parts.append(n)
                index.append(np.full(len(n), i, dtype=np.int64))
        pos = b
    if pos < len(text):
        parts.append(text[pos:])
        index.append(np.arange(pos, len(text), dtype=np.int64))
    folded = "".join(parts)
    if folded == text:
        return None
    return folded, (np.concatenate(index) if index else np.zeros(0, dtype=np.int64))


def char_starts(data: bytes) -> np.ndarray:
    """The byte offset of each character of UTF-8 `data` (and len(data) at the end)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    starts = np.flatnonzero((raw & 0xC0) != 0x80)
    return np.append(starts, len(data))
