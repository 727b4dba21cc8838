"""Exact values assay knows are secret, found also when encoded or wrapped across lines.

A tool that prints a secret rarely prints it bare: it base64s it into a config, hex-dumps it,
URL-encodes it into a query string, escapes it into JSON, HTML or a shell or Python string
literal, or wraps it at some column.
So every registered value is matched in each of those forms, and in each form a run of
whitespace (or a JSON/C escape like \\n) may sit between any two characters. A dump tool
(xxd, hexdump -C, od) shows a value in pieces, 16 bytes a line, as text and as hex with the
offsets between them: so any 8 bytes of a token-like value are matched too, raw or as hex
(`fragments`). All forms of all values compile into one RE2 regex, so a scan is one linear
pass however many secrets are known.

The regex is built over bytes in Latin-1 mode: one pattern character per byte, so a value
with non-ASCII characters is matched byte for byte, raw or percent-encoded.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

import re2

from assay.policies.redaction import re2bulk

_ANCHOR_BOTH = re2._Anchor.ANCHOR_BOTH

# Values shorter than this are not registered: redacting every "1234" would wreck the text
# and protect nothing.
MIN_LENGTH = 6
# Encoded fragments shorter than this match too much ordinary text to be worth it.
MIN_ENCODED = 8

# What may stand between two characters of a value: whitespace and escaped line ends (wrapping),
# and the separators a value printed in pieces shows (comma-, pipe- or colon-separated, a list
# of one-character strings: 'g', 'h', ...), however short the pieces.
_SEP = rb"(?:[\s,|;:'\"\[\]]|\\+[nrt])*"
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


def _byte_alternatives(b: int) -> list[bytes]:
    """One byte raw, percent-encoded in either case (space also as '+'), or for bytes outside
    printable ASCII as a C/Python hex escape (repr of bytes: \\xc3) or an octal one (git's
    quoted paths, bash's $'...': \\303)."""
    alts = [_literal(b), b"%" + _hexdigit(b >> 4) + _hexdigit(b & 15)]
    if b == 0x20:
        alts.append(rb"\+")
    if b >= 0x7F or b < 0x20:
        alts.append(rb"\\+x" + _hexdigit(b >> 4) + _hexdigit(b & 15))
        alts.append(rb"\\+" + b"%03o" % b)
    return alts


# Backslash escapes: JSON's (every encoder writes \" and \\; PHP also \/), Python's and C's
# (repr writes \'), the shell's (printf %q: \&, \<) and re.escape's: any ASCII punctuation
# may follow a backslash. An escape may be escaped again, as in JSON inside a JSON string
# (\\\"), so an escape's backslash is any run of them.
_CONTROL_ESCAPES = {"\b": b"b", "\f": b"f", "\n": b"n", "\r": b"r", "\t": b"t"}
# re.escape and the shell also put a backslash before whitespace ("\\ ", a backslash then a
# line end): a key file escaped so shows every line end that way.
_ESCAPED_SPACE = frozenset(" \t\n\r\v\f")
_HTML_NAMED = {"&": b"&amp;", "<": b"&lt;", ">": b"&gt;", '"': b"&quot;", "'": b"&apos;"}


def _hex_number(n: int, width: int = 0) -> bytes:
    """`n` in hex digits of either case, zero-padded to `width` (or with any leading zeros)."""
    digits = b"%x" % n
    body = b"".join(_hexdigit(int(d, 16)) for d in digits.decode())
    if width:
        return b"0" * (width - len(digits)) + body
    return b"0*" + body


def _char_escapes(char: str) -> list[bytes]:
    """How an escaping encoder may write any character, a letter or digit too: \\u0067 (JSON
    with every character escaped), \\x67 (C, Python), \\147 (octal: C, bash's $'...'), and
    0x67 (a hex list, as xxd -i writes bytes), one byte of UTF-8 each for those three, and HTML's
    numeric &#103; and &#x67;."""
    code = ord(char)
    alts = []
    if code < 0x10000:
        alts.append(rb"\\+u" + _hex_number(code, 4))
    raw = char.encode("utf-8")
    alts.append(b"".join(rb"\\+x" + _hex_number(b, 2) for b in raw))
    alts.append(b"".join(rb"\\+0?" + b"%03o" % b for b in raw))
    alts.append(_SEP.join(b"0[xX]" + _hex_number(b, 2) for b in raw))
    alts.append(b"&#0*" + str(code).encode() + b";")  # HTML numeric, as an encoder that escapes all
    alts.append(b"&#[xX]" + _hex_number(code) + b";")
    return alts


def _escapes(char: str) -> list[bytes]:
    """How encoders may write one character that is not an ASCII letter or digit: Go's
    encoding/json writes <, > and & as \\u003c..., Python's json.dumps every non-ASCII
    character as \\uXXXX (a surrogate pair above the BMP) and ascii() as \\xf6, PHP's
    json_encode / as \\/, html.escape ' as &#x27;, printf %q & as \\&. Letters and digits no
    encoder escapes by default."""
    code = ord(char)
    units = [code] if code < 0x10000 else [0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)]
    alts = [b"".join(rb"\\+u" + _hex_number(u, 4) for u in units)]
    alts.append(b"&#0*" + str(code).encode() + b";")
    alts.append(b"&#[xX]" + _hex_number(code) + b";")
    if code <= 0xFF and not char.isascii():
        alts.append(rb"\\+x" + _hex_number(code, 2))
    if code > 0xFFFF:
        alts.append(rb"\\+U" + _hex_number(code, 8))
    if char.isascii() and (0x21 <= code < 0x7F or char in _ESCAPED_SPACE):
        alts.append(rb"\\+" + _literal(code))
    if char in _CONTROL_ESCAPES:
        alts.append(rb"\\+" + _CONTROL_ESCAPES[char])
    if char in _HTML_NAMED:
        alts.append(_HTML_NAMED[char])
    return alts


def _text_form(value: bytes) -> bytes:
    """The value as text encoders write it: each byte raw or URL-encoded, and each character
    that is not a letter or digit also JSON- or HTML-escaped, in any mix (Go escapes only
    <, > and &). A value that is not UTF-8 is taken byte by byte."""
    try:
        chars = value.decode("utf-8")
    except UnicodeDecodeError:
        chars = None
    parts = []
    if chars is None:
        for b in value:
            parts.append(b"(?:" + b"|".join(_byte_alternatives(b)) + b")")
        return _SEP.join(parts)
    for char in chars:
        raw = char.encode("utf-8")
        alts = [_SEP.join(b"(?:" + b"|".join(_byte_alternatives(b)) + b")" for b in raw)]
        alts += _char_escapes(char)
        if not (char.isascii() and char.isalnum()):
            alts += _escapes(char)
        parts.append(b"(?:" + b"|".join(dict.fromkeys(alts)) + b")")
    return _SEP.join(parts)


# Fragments: dump tools print 16 bytes a line, so a value shows in pieces between the offsets.
# Windows of FRAGMENT bytes at every STRIDE-th offset of the value are matched, so any piece
# of FRAGMENT + STRIDE - 1 bytes or more holds one, and the match is followed out to the
# piece's ends (`_piece_span`); a shorter piece at a dump line's edge may still show.
FRAGMENT = 8
STRIDE = 4
# Values whose pieces are matched: token-like (no whitespace; a URL's host, port and path are
# not secrets by themselves), and not so long that their windows would swell the regex (a key
# file's body is matched whole, in all its forms).
FRAGMENT_VALUE = (12, 256)
_PLAIN = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789./:_-@")


def _specific(window: bytes) -> bool:
    """Whether a window is unlike ordinary text: it holds an upper-case letter, a byte that is
    not a lower-case letter, digit or path punctuation (a quote, <, &, non-ASCII), or both a
    digit and a lower-case letter. "localhost" or "/assay_db" stay readable."""
    if any(b not in _PLAIN or 65 <= b <= 90 for b in window):
        return True
    return any(48 <= b <= 57 for b in window) and any(97 <= b <= 122 for b in window)


def windows(value: bytes) -> list[bytes]:
    """The specific windows of a token-like value whose pieces are matched (else none)."""
    lo, hi = FRAGMENT_VALUE
    if not lo <= len(value) <= hi or b"://" in value or any(b in b" \t\r\n\v\f" for b in value):
        return []
    starts = sorted(set(range(0, len(value) - FRAGMENT + 1, STRIDE)) | {len(value) - FRAGMENT})
    return [w for w in dict.fromkeys(value[i : i + FRAGMENT] for i in starts) if _specific(w)]


def fragments(value: bytes) -> list[bytes]:
    """Patterns for a value's windows, raw and as hex in either case with whitespace between
    the digits (xxd's and hexdump -C's hex columns)."""
    out = []
    for window in windows(value):
        out.append(b"".join(_literal(b) for b in window))
        hexed = window.hex().encode()
        out.append(rb"\s*".join(_literal(b) for b in hexed))
        out.append(rb"\s*".join(_literal(b) for b in hexed.upper()))
    return out


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
    out: list[tuple[str, bytes]] = [("text", _text_form(value))]  # raw bytes are one of its alternatives
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

    __slots__ = ("_values", "_kinds", "_regex", "_bulk")

    def __init__(self) -> None:
        self._values: list[bytes] = []
        self._kinds: list[str] = []
        self._regex = None
        self._bulk = None

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
        """One regex for every form of every value, whole forms before fragments so a whole
        value is taken whole (no capture groups, so RE2 answers from its DFA), and per value
        one regex of its whole forms and one of its fragments, to tell a match's value."""
        if self._regex is None and self._values:
            whole = [b"(?:" + b"|".join(p for _, p in forms(value)) + b")" for value in self._values]
            pieces = [b"|".join(fragments(value)) for value in self._values]
            self._regex = (
                _compile(b"|".join(whole + [p for p in pieces if p])),
                [_compile(p) for p in whole],
                [_compile(p) if p else None for p in pieces],
            )
            self._bulk = None
        return self._regex

    def passes(self) -> list:
        """The whole-text pass `find` makes, as (regex, its re2bulk twin), to run ahead. The
        twin is compiled when first asked for (only long texts ask)."""
        compiled = self._compiled()
        if compiled is None:
            return []
        if self._bulk is None:  # `_compiled` clears it whenever it compiles anew
            self._bulk = (compiled[0], re2bulk.Bulk.of(compiled[0]))
        return [self._bulk]

    def find(self, data: bytes, prefetched: re2bulk.Prefetched | None = None) -> list[Finding]:
        """Every match of a registered value's forms. A fragment's match is one window of the
        piece shown, followed out to the piece's ends, so a piece is one finding.
        `prefetched`: this text's whole-text passes, run ahead (re2bulk)."""
        compiled = self._compiled()
        if compiled is None:
            return []
        combined, whole, pieces = compiled
        search = prefetched.cursor(combined) if prefetched is not None else re2bulk.live_cursor(combined, data)
        n = len(data)
        out = []
        pos = 0
        while pos <= n:
            s, e = search(pos)
            if s == -1:
                break
            pos = e if e > s else e + 1
            i = _which(whole, data, s, e)
            if i is None:
                i = _which(pieces, data, s, e)
                if i is None:
                    continue
                s, e = _piece_span(self._values[i], data, s, e)
                pos = max(pos, e)
            s, e = _trim(data, s, e)
            if e > s:
                out.append(Finding(s, e, self._kinds[i]))
        return out


def _compile(pattern: bytes):
    opts = re2.Options()
    opts.encoding = re2.Options.Encoding.LATIN1
    opts.max_mem = 256 << 20
    opts.log_errors = False
    return re2.compile(pattern, opts)


def _which(regexes: list, data: bytes, s: int, e: int) -> int | None:
    """Which value's regex matches exactly data[s:e]."""
    for i, regex in enumerate(regexes):
        if regex is not None and regex._regexp.Match(_ANCHOR_BOTH, data, s, e)[0][0] != -1:
            return i
    return None


_WHITESPACE = b" \t\r\n\v\f"


def _piece_span(value: bytes, data: bytes, s: int, e: int) -> tuple[int, int]:
    """The whole piece of `value` around data[s:e], one fragment window, raw or hex: the
    text is followed back and on, byte by byte (hex digit pair by pair, whitespace between),
    as long as it goes as the value does."""
    window = data[s:e]
    hexed = window not in value
    if hexed:
        window = bytes.fromhex(bytes(b for b in window if b not in _WHITESPACE).decode("ascii"))
    lo, hi = s, e
    at = value.find(window)
    while at >= 0:
        lo = min(lo, _follow(value, at - 1, -1, data, s, hexed))
        hi = max(hi, _follow(value, at + len(window), 1, data, e, hexed))
        at = value.find(window, at + 1)
    return lo, hi


def _follow(value: bytes, j: int, step: int, data: bytes, i: int, hexed: bool) -> int:
    """From data offset `i` (an edge of a match), how far the text goes on showing value[j],
    value[j + step], ... (step 1: on, -1: back): the offset of the outer edge reached."""
    n = len(data)
    while 0 <= j < len(value):
        if hexed:
            k = _past_whitespace(data, i, step)
            pair = data[k : k + 2] if step > 0 else data[max(k - 2, 0) : k]
            if len(pair) < 2 or pair.lower() != b"%02x" % value[j]:
                return i
            i = k + 2 * step
        else:
            k = i if step > 0 else i - 1
            if not 0 <= k < n or data[k] != value[j]:
                return i
            i += step
        j += step
    return i


def _past_whitespace(data: bytes, i: int, step: int) -> int:
    if step > 0:
        while i < len(data) and data[i] in _WHITESPACE:
            i += 1
    else:
        while i > 0 and data[i - 1] in _WHITESPACE:
            i -= 1
    return i


def _trim(data: bytes, s: int, e: int) -> tuple[int, int]:
    """Leading/trailing separators are context, not secret."""
    while s < e and data[s : s + 1].isspace():
        s += 1
    while e > s and data[e - 1 : e].isspace():
        e -= 1
    return s, e
