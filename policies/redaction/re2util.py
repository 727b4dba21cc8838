"""RE2 helpers shared by the redaction detectors: match iteration, and what a pattern needs.

`analyse(pattern)` reads an RE2 pattern (the subset gitleaks' rules use) and says, without
running it, what every match must look like: the literal strings one of which every match
contains, how far before and after that literal a match can reach (in bytes and in line
ends), and the widest match. `secret_rules` uses it to run a rule only around the places its
literal occurs instead of over the whole text, with the same matches (see `Shape`).

The analysis never runs a pattern on text, so it adds nothing attacker-controlled to the
linear-time argument; anything it does not understand raises `Unsupported`, and the caller
then runs that rule over the whole text as before.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import re2

_UNANCHORED = re2._Anchor.UNANCHORED


def match_spans(regex, data: bytes, pos: int = 0, endpos: int | None = None) -> Iterator[tuple]:
    """Every match of `regex` in `data[pos:endpos]` as a tuple of (start, end) spans, one per
    group, with the bytes around that range as context (for \\b, ^ and $).

    The same leftmost, non-overlapping matches as finditer, without building a Match object
    per hit: on text with thousands of candidates that object costs more than the search.
    """
    search = regex._regexp.Match
    n = len(data) if endpos is None else endpos
    while pos <= n:
        spans = search(_UNANCHORED, data, pos, n)
        s, e = spans[0]
        if s == -1:
            return
        yield spans
        pos = e if e > s else e + 1


class Lines:
    """Where the line ends of one text are, found once (numpy, one pass) when first asked,
    then looked up by bisection: many questions about one long line cost no search each."""

    __slots__ = ("data", "_ends")

    def __init__(self, data: bytes):
        self.data = data
        self._ends: list[int] | None = None

    @classmethod
    def of(cls, data: bytes) -> Lines:
        """The index of `data`, shared with the last caller that asked about the same bytes."""
        global _LAST_LINES
        last = _LAST_LINES
        if last is not None and last.data is data:
            return last
        _LAST_LINES = made = cls(data)
        return made

    def _index(self) -> list[int]:
        if self._ends is None:
            self._ends = np.flatnonzero(np.frombuffer(self.data, np.uint8) == 10).tolist()
        return self._ends

    def start(self, at: int, lines: int | None) -> int:
        """The earliest start of a span ending at `at` that holds at most `lines` line ends."""
        if lines is None:
            return 0
        ends = self._index()
        i = bisect_left(ends, at) - 1 - lines
        return ends[i] + 1 if i >= 0 else 0

    def end(self, at: int, lines: int | None) -> int:
        """The latest end of a span starting at `at` that holds at most `lines` line ends."""
        if lines is None:
            return len(self.data)
        ends = self._index()
        i = bisect_left(ends, at) + lines
        return ends[i] if i < len(ends) else len(self.data)


_LAST_LINES: Lines | None = None


# -- pattern analysis ---------------------------------------------------------------------

# RE2, in its default UTF-8 mode, folds two ASCII letters with characters outside ASCII under
# (?i): k with U+212A KELVIN SIGN and s with U+017F LATIN SMALL LETTER LONG S. Lower-casing
# bytes does not fold those, so the analysis below assumes a text holds neither (their UTF-8
# forms); callers check `FOLDS_OUTSIDE_ASCII` and fall back to scanning the whole text.
FOLDS_OUTSIDE_ASCII = ("\u212a".encode(), "\u017f".encode())


class Unsupported(ValueError):
    """A construct the analysis does not model (the rule then runs over the whole text)."""


@dataclass(frozen=True)
class Locator:
    """One literal a match may contain, and how far the match can reach around it.

    `literal` is lower-case ASCII: it occurs in `data.lower()` wherever the pattern's own
    (possibly case-sensitive) literal occurs in `data`. For a match [s, e) holding it at p:
    s >= p - before and e <= p + len(literal) + after (None: no byte bound); the text between
    s and p holds at most `lines_before` newlines, and between p and e at most `lines_after`
    (None: no bound).
    """

    literal: bytes
    before: int | None
    after: int | None
    lines_before: int | None
    lines_after: int | None


@dataclass(frozen=True)
class Shape:
    """What every match of a pattern looks like. `locators`: every match contains one of
    these literals, placed as each says; None when no such literal could be derived."""

    max_width: int | None  # bytes; None when unbounded
    max_newlines: int | None
    locators: tuple[Locator, ...] | None


_ASCII = (1 << 128) - 1


def _range(lo: int, hi: int) -> int:
    return ((1 << (hi + 1)) - 1) ^ ((1 << lo) - 1)


def _chars(s: str) -> int:
    bits = 0
    for c in s:
        bits |= 1 << ord(c)
    return bits


_DIGIT = _range(48, 57)
_UPPER = _range(65, 90)
_LOWER = _range(97, 122)
_WORD = _DIGIT | _UPPER | _LOWER | _chars("_")
_SPACE = _chars("\t\n\f\r ")  # RE2's \s: no \v
_NEWLINE = 1 << 10
_PERL = {
    "d": (_DIGIT, False),
    "D": (_ASCII ^ _DIGIT, True),
    "s": (_SPACE, False),
    "S": (_ASCII ^ _SPACE, True),
    "w": (_WORD, False),
    "W": (_ASCII ^ _WORD, True),
}
_POSIX = {
    "alnum": _DIGIT | _UPPER | _LOWER,
    "alpha": _UPPER | _LOWER,
    "ascii": _ASCII,
    "blank": _chars(" \t"),
    "cntrl": _range(0, 31) | (1 << 127),
    "digit": _DIGIT,
    "graph": _range(33, 126),
    "lower": _LOWER,
    "print": _range(32, 126),
    "punct": _range(33, 47) | _range(58, 64) | _range(91, 96) | _range(123, 126),
    "space": _chars("\t\n\v\f\r "),
    "upper": _UPPER,
    "word": _WORD,
    "xdigit": _DIGIT | _range(65, 70) | _range(97, 102),
}
_SIMPLE_ESCAPES = {"a": 7, "f": 12, "t": 9, "n": 10, "r": 13, "v": 11}
_FLAG_CHARS = "imsU"


def _fold(bits: int) -> int:
    return bits | ((bits & _UPPER) << 32) | ((bits & _LOWER) >> 32)


# Parse tree: ("set", ascii_bits, non_ascii) one character; ("empty",) zero width;
# ("cat", [nodes]); ("alt", [nodes]); ("rep", node, min, max_or_None).


class _Parser:
    def __init__(self, pattern: str):
        self.p = pattern
        self.i = 0
        self.depth = 0
        self.groups = 0  # capturing groups opened so far
        self.top: list[tuple[int, dict, int]] = []  # each top-level item: where it starts, flags and groups before it

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.p[j] if j < len(self.p) else ""

    def parse(self):
        node = self.alternation({c: False for c in _FLAG_CHARS})
        if self.i != len(self.p):
            raise Unsupported(f"unexpected {self.peek()!r} at {self.i}")
        return node

    def alternation(self, flags: dict):
        flags = dict(flags)  # (?i) inside a group lasts to its end, across | too, as in RE2
        branches = [self.concatenation(flags)]
        while self.peek() == "|":
            self.i += 1
            if self.depth == 0:
                self.top.clear()  # an alternation at the top: no top-level items to split at
                self.depth = -1
            branches.append(self.concatenation(flags))
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def concatenation(self, flags: dict):
        items = []
        while self.peek() not in ("", "|", ")"):
            if self.peek() == "(" and self.peek(1) == "?":
                k = self.i + 2
                while k < len(self.p) and self.p[k] in _FLAG_CHARS + "-":
                    k += 1
                if k < len(self.p) and self.p[k] == ")" and k > self.i + 2:
                    self._set_flags(flags, self.p[self.i + 2 : k])
                    self.i = k + 1
                    continue
            if self.depth == 0:
                self.top.append((self.i, dict(flags), self.groups))
            items.append(self.repetition(self.atom(flags)))
        return items[0] if len(items) == 1 else ("cat", items)

    @staticmethod
    def _set_flags(flags: dict, spec: str) -> None:
        on = True
        for ch in spec:
            if ch == "-":
                if not on:
                    raise Unsupported("bad flags")
                on = False
            else:
                flags[ch] = on

    def repetition(self, atom):
        while True:
            c = self.peek()
            if c in ("*", "+", "?"):
                self.i += 1
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            elif c == "{":
                j = self.p.find("}", self.i)
                parts = self.p[self.i + 1 : j].split(",") if j != -1 else []
                if (
                    not (1 <= len(parts) <= 2)
                    or not parts[0].isdigit()
                    or (len(parts) == 2 and parts[1] and not parts[1].isdigit())
                ):
                    return atom  # not a repeat: the '{' is a literal, read as the next atom
                lo = int(parts[0])
                hi = lo if len(parts) == 1 else (int(parts[1]) if parts[1] else None)
                if lo > 1000 or (hi is not None and not lo <= hi <= 1000):
                    raise Unsupported("bad repeat")
                self.i = j + 1
            else:
                return atom
            if self.peek() == "?":
                self.i += 1  # non-greedy: which match is preferred changes, not which can match
            if atom[0] == "rep":
                raise Unsupported("repeat of a repeat")
            atom = ("rep", atom, lo, hi)

    def atom(self, flags: dict):
        c = self.peek()
        if c == "(":
            self.i += 1
            inner = dict(flags)
            if self.peek() != "?":
                self.groups += 1
            else:
                if self.p.startswith("?P<", self.i) or self.p.startswith("?<", self.i):
                    j = self.p.find(">", self.i)
                    if j == -1:
                        raise Unsupported("bad group name")
                    self.groups += 1
                    self.i = j + 1
                elif self.p.startswith("?:", self.i):
                    self.i += 2
                else:
                    k = self.i + 1
                    while k < len(self.p) and self.p[k] in _FLAG_CHARS + "-":
                        k += 1
                    if k >= len(self.p) or self.p[k] != ":" or k == self.i + 1:
                        raise Unsupported("unknown group syntax")
                    self._set_flags(inner, self.p[self.i + 1 : k])
                    self.i = k + 1
            self.depth += 1
            node = self.alternation(inner)
            self.depth -= 1
            if self.peek() != ")":
                raise Unsupported("missing )")
            self.i += 1
            return node
        if c == "[":
            return self.char_class(flags)
        if c == ".":
            self.i += 1
            return ("set", _ASCII if flags["s"] else _ASCII ^ _NEWLINE, True)
        if c in "^$":
            self.i += 1
            return ("empty",)
        if c in "*+?":
            raise Unsupported("repeat without an operand")
        if c == "\\":
            return self.escape(flags, in_class=False)
        self.i += 1
        return self.literal(ord(c), flags)

    @staticmethod
    def literal(cp: int, flags: dict):
        if cp >= 128:
            return ("set", 0, True)
        bits = 1 << cp
        return ("set", _fold(bits) if flags["i"] else bits, False)

    def escape(self, flags: dict, in_class: bool):
        self.i += 1
        c = self.peek()
        if not c:
            raise Unsupported("trailing backslash")
        self.i += 1
        if c in _PERL:
            bits, non_ascii = _PERL[c]
            return ("set", _fold(bits) if flags["i"] else bits, non_ascii)
        if not in_class and c in "bBAz":
            return ("empty",)
        if c in _SIMPLE_ESCAPES:
            cp = _SIMPLE_ESCAPES[c]
        elif c == "x":
            if self.peek() == "{":
                j = self.p.find("}", self.i)
                digits = self.p[self.i + 1 : j] if j != -1 else ""
                self.i = j + 1
            else:
                digits = self.p[self.i : self.i + 2]
                self.i += 2
            try:
                cp = int(digits, 16)
            except ValueError:
                raise Unsupported("bad \\x escape") from None
        elif c.isalnum() or not c.isascii():
            raise Unsupported(f"escape \\{c}")  # \p, \Q, \C, octal, backreferences...
        else:
            cp = ord(c)
        return cp if in_class else self.literal(cp, flags)

    def char_class(self, flags: dict):
        self.i += 1
        negated = self.peek() == "^"
        if negated:
            self.i += 1
        bits, non_ascii, first = 0, False, True
        while True:
            c = self.peek()
            if not c:
                raise Unsupported("unterminated class")
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            if c == "[" and self.peek(1) == ":":
                j = self.p.find(":]", self.i)
                name = self.p[self.i + 2 : j] if j != -1 else ""
                if name not in _POSIX:
                    raise Unsupported("POSIX class")
                bits |= _POSIX[name]
                self.i = j + 2
                continue
            lo = self._class_char()
            if isinstance(lo, tuple):  # \d, \s, \w and their negations
                bits |= lo[1]
                non_ascii |= lo[2]
                continue
            hi = lo
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                hi = self._class_char()
                if isinstance(hi, tuple) or hi < lo:
                    raise Unsupported("bad range")
            if hi >= 128:
                non_ascii = True
            if lo < 128:
                bits |= _range(lo, min(hi, 127))
        if flags["i"]:
            bits = _fold(bits)
        if negated:
            bits, non_ascii = _ASCII ^ bits, True
        return ("set", bits, non_ascii)

    def _class_char(self) -> Any:  # a code point, or an escape's ("set", bits, non_ascii)
        c = self.peek()
        if c == "\\":
            return self.escape({"i": False}, in_class=True)
        self.i += 1
        return ord(c)


_EXACT_MAX = 64  # the most alternative strings tracked for one node


@dataclass
class _Facts:
    max_width: int | None
    max_newlines: int | None
    exact: frozenset | None  # every string (lower-cased) the node can match, when few
    locators: list | None  # [(literal, before, after, lines_before, lines_after)]


def _max_known(values) -> int | None:
    """The largest of `values`, or None when any is unknown (None)."""
    known = list(values)
    return None if any(v is None for v in known) else max(v for v in known if v is not None)


def _add(a, b):
    return None if a is None or b is None else a + b


def _times(a, k):
    if a == 0:
        return 0
    return None if a is None or k is None else a * k


def _only_char(bits: int, non_ascii: bool) -> str | None:
    """The one lower-cased character a set matches (so `[Aa]` and `(?i)a` both give 'a')."""
    if non_ascii or not bits or bits & _NEWLINE:
        return None  # a literal never holds a line end: windows are measured in lines too
    if bits & (bits - 1) == 0:  # one bit: the common case, a plain literal character
        return chr(bits.bit_length() - 1).lower()
    return _folded_char(bits)


@lru_cache(maxsize=4096)
def _folded_char(bits: int) -> str | None:
    chars = {chr(i).lower() for i in range(128) if bits >> i & 1}
    return chars.pop() if len(chars) == 1 else None


def _score(locators) -> tuple:
    """Which of two requirements to locate by: bounded windows first, then the longer (rarer)
    shortest literal, then fewer literals."""
    shortest = min(len(loc[0]) for loc in locators)
    bounded = all(
        (b is not None or lb is not None) and (a is not None or la is not None) for _, b, a, lb, la in locators
    )
    return (bounded, min(shortest, 8), -len(locators), shortest)


def _own_locators(f: _Facts):
    """The best requirement for a node alone: its exact strings (when none is empty) or what
    its parts require."""
    options = []
    if f.exact and all(f.exact):
        options.append([(s, 0, 0, 0, 0) for s in f.exact])
    if f.locators:
        options.append(f.locators)
    return max(options, key=_score) if options else None


def _facts(node) -> _Facts:
    kind = node[0]
    if kind == "empty":
        return _Facts(0, 0, frozenset([""]), None)
    if kind == "set":
        _, bits, non_ascii = node
        only = _only_char(bits, non_ascii)
        # A character outside ASCII is up to 4 bytes of UTF-8. (?i) letters that fold with a
        # non-ASCII character are counted as 1 byte: texts holding those are scanned whole.
        return _Facts(4 if non_ascii else 1, 1 if bits & _NEWLINE else 0, frozenset([only]) if only else None, None)
    if kind == "alt":
        parts = [_facts(child) for child in node[1]]
        width = _max_known(f.max_width for f in parts)
        lines = _max_known(f.max_newlines for f in parts)
        exact = None
        each = [f.exact for f in parts]
        if all(e is not None for e in each):
            union = frozenset().union(*(e for e in each if e is not None))
            exact = union if len(union) <= _EXACT_MAX else None
        locators: list | None = []
        for f in parts:
            own = _own_locators(f)
            if not own:
                locators = None  # one branch needs no literal, so the alternation needs none
                break
            locators.extend(own)
        return _Facts(width, lines, exact, locators)
    if kind == "rep":
        _, child, lo, hi = node
        f = _facts(child)
        exact = None
        if f.exact is not None and hi is not None and hi <= 8:
            strings: set = set()
            acc = {""}
            too_many = False
            for k in range(hi + 1):
                if k >= lo:
                    strings |= acc
                acc = {a + b for a in acc for b in f.exact}
                if len(acc) > _EXACT_MAX or len(strings) > _EXACT_MAX:
                    too_many = True
                    break
            exact = None if too_many else frozenset(strings)
        locators = None
        if lo >= 1:
            own = _own_locators(f)
            if own:  # in the first copy; the other copies come after it
                more = None if hi is None else hi - 1
                locators = [
                    (s, b, _add(a, _times(f.max_width, more)), lb, _add(la, _times(f.max_newlines, more)))
                    for s, b, a, lb, la in own
                ]
        return _Facts(_times(f.max_width, hi), _times(f.max_newlines, hi), exact, locators)
    if kind == "cat":
        parts = [_facts(child) for child in node[1]]
        n = len(parts)
        pre_w: list[int | None] = [0]
        pre_l: list[int | None] = [0]
        for f in parts:
            pre_w.append(_add(pre_w[-1], f.max_width))
            pre_l.append(_add(pre_l[-1], f.max_newlines))
        suf_w: list[int | None] = [0] * (n + 1)
        suf_l: list[int | None] = [0] * (n + 1)
        for i in range(n - 1, -1, -1):
            suf_w[i] = _add(suf_w[i + 1], parts[i].max_width)
            suf_l[i] = _add(suf_l[i + 1], parts[i].max_newlines)
        options = []
        whole = None
        i = 0
        while i < n:
            if parts[i].exact is None:
                i += 1
                continue
            # Adjacent parts with known strings make longer literals: \bA3- gives "a3-".
            j, acc = i, frozenset([""])
            while j < n and (ex := parts[j].exact) is not None:
                joined = frozenset(a + b for a in acc for b in ex)
                if len(joined) > _EXACT_MAX:
                    break
                acc, j = joined, j + 1
            if acc and all(acc):
                options.append([(s, pre_w[i], suf_w[j], pre_l[i], suf_l[j]) for s in acc])
            if i == 0 and j == n:
                whole = acc
            i = j
        for i, f in enumerate(parts):
            if f.exact is None and f.locators:
                options.append(
                    [
                        (s, _add(pre_w[i], b), _add(a, suf_w[i + 1]), _add(pre_l[i], lb), _add(la, suf_l[i + 1]))
                        for s, b, a, lb, la in f.locators
                    ]
                )
        return _Facts(pre_w[n], pre_l[n], whole, max(options, key=_score) if options else None)
    raise AssertionError(kind)


def analyse(pattern: str) -> Shape:
    """The shape of every match of an RE2 `pattern` (UTF-8 mode). Raises Unsupported."""
    facts = _facts(_Parser(pattern).parse())
    own = _own_locators(facts)
    locators = None
    if own:
        try:
            locators = tuple(Locator(s.encode("ascii"), b, a, lb, la) for s, b, a, lb, la in own)
        except UnicodeEncodeError:  # cannot happen: literals are built from ASCII only
            locators = None
    return Shape(facts.max_width, facts.max_newlines, locators)


# -- how far a match reaches -----------------------------------------------------------------
#
# A reach is (fixed, hop): a match starting at x ends at or before
#     max(x + fixed, nextnl(x + hop[0]) + hop[1])
# where nextnl(y) is the first line end at or after y (the text's end if none); either part
# may be None (absent), and a reach of None means no bound. The hop part bounds a run that
# cannot hold a line end however long it is (like [a-z0-9+/]{11,}): it stops at the next one.


def _then(a, b):
    """The reach of one part followed by another."""
    fa, ha = a
    fb, hb = b
    hops = []
    if fa is not None and hb is not None:
        hops.append((fa + hb[0], hb[1]))
    if ha is not None and fb is not None:
        hops.append((ha[0], ha[1] + fb))
    if ha is not None and hb is not None:
        if ha[1] + hb[0] != 0:
            return None  # nextnl(nextnl(y) + c): two lines' worth, not modelled
        hops.append((ha[0], hb[1]))  # nextnl(nextnl(y)) == nextnl(y)
    fixed = fa + fb if fa is not None and fb is not None else None
    hop = (max(h[0] for h in hops), max(h[1] for h in hops)) if hops else None
    return (fixed, hop)


def _either(reaches):
    fixed = [f for f, _ in reaches if f is not None]
    hops = [h for _, h in reaches if h is not None]
    return (max(fixed) if fixed else None, (max(h[0] for h in hops), max(h[1] for h in hops)) if hops else None)


def _reach(node):
    facts = _facts(node)
    if facts.max_width is not None:
        return (facts.max_width, None)
    if facts.max_newlines == 0:
        return (None, (0, 0))  # no line end inside: it stops at the next one
    kind = node[0]
    if kind == "cat":
        acc = (0, None)
        for child in node[1]:
            part = _reach(child)
            acc = None if part is None else _then(acc, part)
            if acc is None:
                return None
        return acc
    if kind == "alt":
        parts = [_reach(child) for child in node[1]]
        return None if any(p is None for p in parts) else _either(parts)
    if kind == "rep" and node[3] is not None:
        part = _reach(node[1])
        acc = (0, None)
        for _ in range(node[3]):
            acc = None if part is None else _then(acc, part)
            if acc is None:
                return None
        return acc
    return None


def reach_end(reach, data: bytes, x: int) -> int:
    """The last end a match starting at `x` can have, by `reach` (not None)."""
    fixed, hop = reach
    end = x + fixed if fixed is not None else x
    if hop is not None:
        at = x + hop[0]
        nl = data.find(b"\n", at) if at < len(data) else -1
        end = max(end, (len(data) if nl < 0 else nl) + hop[1])
    return min(end, len(data))


@dataclass(frozen=True)
class Core:
    """A pattern split as prefix + core, where the prefix is the leading parts before the
    first literal and is at most `before` bytes wide: every match of the pattern holds a
    match of `pattern` (the core, with the flags in force where it starts) at most `before`
    bytes after its own start, and ends by `reach` from that core match's start."""

    pattern: str
    before: int
    reach: tuple
    # The prefix is one lazy repeat of a character class (generic-api-key's [\\w.-]{0,50}?)
    # holding no group: a match is then the prefix up to the first place the core matches,
    # and the core's own match from there, groups and all. The class's bytes (ASCII) then.
    lazy_prefix: bool
    prefix_bytes: bytes = b""


def core(pattern: str) -> Core | None:
    """The pattern's core when it has a prefix worth dropping (like generic-api-key's
    `[\\w.-]{0,50}?`, which keeps RE2's DFA busy at every word character), else None."""
    parser = _Parser(pattern)
    tree = parser.parse()
    if tree[0] != "cat" or len(parser.top) != len(tree[1]):
        return None
    items: list[Any] = tree[1]
    # The first item whose every match is exact (a literal): where the core starts.
    j = next((i for i, item in enumerate(items) if (exact := _facts(item).exact) and all(exact)), None)
    if j is None:
        return None
    prefix = [_facts(item) for item in items[:j]]
    if j == 0 or any(f.max_width is None for f in prefix):
        return None
    reach = _reach(("cat", items[j:]))
    if reach is None:
        return None
    start, flags, groups = parser.top[j]
    on = "".join(c for c in _FLAG_CHARS if flags[c])
    first = items[0]
    lazy = (
        j == 1
        and groups == 0
        and first[0] == "rep"
        and first[1][0] == "set"
        and first[2] == 0
        and pattern[parser.top[0][0] : start].endswith(("}?", "*?"))
    )
    chars = b""
    if lazy and not first[1][2]:
        chars = bytes(i for i in range(128) if first[1][1] >> i & 1)
    lazy = lazy and bool(chars)
    return Core(
        ("(?" + on + ")" if on else "") + pattern[start:], sum(f.max_width or 0 for f in prefix), reach, lazy, chars
    )


def _requirements(node) -> list[frozenset]:
    """Sets of literals such that every match holds at least one literal of each set."""
    f = _facts(node)
    own = [f.exact] if f.exact and all(f.exact) else []
    kind = node[0]
    if kind == "cat":
        parts = [_facts(child) for child in node[1]]
        out, i = list(own), 0
        while i < len(parts):
            if parts[i].exact is None:
                out.extend(_requirements(node[1][i]))
                i += 1
                continue
            j, acc = i, frozenset([""])
            while j < len(parts) and (ex := parts[j].exact) is not None:
                joined = frozenset(a + b for a in acc for b in ex)
                if len(joined) > _EXACT_MAX:
                    break
                acc, j = joined, j + 1
            if j == i:
                acc, j = parts[i].exact, i + 1
            if acc and all(acc):
                out.append(acc)
                common = _common_prefix(acc)
                if common and len(acc) > 1:
                    out.append(frozenset([common]))
            i = j
        return out[:32]
    if kind == "alt":
        combos = [frozenset()]
        for child in node[1]:
            reqs = _requirements(child)
            if not reqs:
                return own
            combos = [c | r for c in combos for r in reqs][:32]
        return own + [c for c in combos if len(c) <= _EXACT_MAX]
    if kind == "rep" and node[2] >= 1:
        return own + _requirements(node[1])
    return own


def _common_prefix(strings) -> str:
    first, last = min(strings), max(strings)
    k = 0
    while k < min(len(first), len(last)) and first[k] == last[k]:
        k += 1
    return first[:k]


def requirements(pattern: str) -> list[frozenset[bytes]]:
    """Sets of lower-case literals such that every match of `pattern` holds one literal of
    each set (for `kubernetes-secret-yaml`: "kind:", "secret" and "data:"). Under the same
    assumption as `analyse` (no U+212A or U+017F in the text). Raises Unsupported."""
    out = []
    for req in _requirements(_Parser(pattern).parse()):
        out.append(frozenset(s.encode("ascii") for s in req))
    return out


def starts_with_literal(pattern: str) -> bool:
    """Whether the pattern opens with a literal character (no \\b, ^ or class first), which
    lets RE2 skip ahead with memchr to where a match can start: then a pass over the whole
    text is cheap."""
    tree = _Parser(pattern).parse()
    first = tree[1][0] if tree[0] == "cat" else tree
    exact = _facts(first).exact if first[0] == "set" else None
    return bool(exact) and len(exact) == 1 and all(exact)
