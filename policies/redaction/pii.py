"""Personal data detectors: e-mail, phone, IPv4/IPv6, payment cards (Luhn), IBANs (mod 97).

One RE2 pass finds candidates (linear time on attacker text); a small check then confirms
each candidate, so checksums decide for cards and IBANs and a random long number is not taken
for a card. Loopback and unspecified addresses are not personal data and stay. On long texts
the pass and the checks run in re2bulk's library (re2native.Pii).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from functools import lru_cache

import re2

from assay.policies.redaction import re2bulk, re2native
from assay.policies.redaction.re2util import match_spans

_ANCHOR_START = re2._Anchor.ANCHOR_START

_EMAIL = rb"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?)*\.[A-Za-z]{2,24}"
_OCTET = rb"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_IPV4 = rb"\b" + _OCTET + rb"(?:\." + _OCTET + rb"){3}\b"
# Candidates only: eight colon-separated hex groups, or fewer around one "::"; ipaddress
# decides. Clock times (12:30:45) have neither shape, and a C++ scope (std::vector) fails the check.
_H4 = rb"[0-9A-Fa-f]{1,4}"
_IPV6 = (
    rb"\b(?:" + _H4 + rb":){7}" + _H4 + rb"\b"
    rb"|(?:\b" + _H4 + rb"(?::" + _H4 + rb"){0,6})?::(?:" + _H4 + rb"(?::" + _H4 + rb"){0,6}\b)?(?:%[0-9A-Za-z]{1,16})?"
)
# International numbers need the leading +; national ones the common 3-3-4 layout with
# separators, so ids, timestamps and version strings are not read as phones.
_PHONE = (
    rb"\+[1-9][0-9]{0,2}[ .-]?(?:\(?[0-9]{1,4}\)?[ .-]?){1,4}[0-9]{2,4}\b"
    rb"|(?:\([0-9]{3}\)[ ]?|\b[0-9]{3}[.-])[0-9]{3}[.-][0-9]{4}\b"
)
# Card numbers start with a major network's digit (2-6) and have 13-19 digits, optionally
# grouped by single spaces or dashes; Luhn decides.
_CARD = rb"\b[2-6][0-9]{3}(?:[ -]?[0-9]){9,15}\b"
_IBAN = rb"\b[A-Z]{2}[0-9]{2}(?:[ ]?[A-Z0-9]){11,30}\b"

# One pass, no capture groups (so RE2 answers from its DFA alone); which kind a match is
# comes from its shape, tried in the alternation's order.
_PATTERN = re2.compile(b"|".join(b"(?:" + p + b")" for p in (_EMAIL, _IBAN, _CARD, _IPV4, _IPV6, _PHONE)))
_ALONE = [
    ("email", re2.compile(_EMAIL)),
    ("iban", re2.compile(_IBAN)),
    ("credit-card", re2.compile(_CARD)),
    ("ipv4", re2.compile(_IPV4)),
    ("ipv6", re2.compile(_IPV6)),
    ("phone", re2.compile(_PHONE)),
]


@dataclass
class Finding:
    start: int
    end: int
    kind: str


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


_DOUBLED = bytes.maketrans(b"0123456789", bytes([0, 2, 4, 6, 8, 1, 3, 5, 7, 9]))
_VALUE = bytes.maketrans(b"0123456789", bytes(range(10)))


def card_ok(candidate: bytes) -> bool:
    digits = candidate.translate(None, b" -")
    if not 13 <= len(digits) <= 19 or digits.count(digits[:1]) == len(digits):
        return False
    if b" " in candidate and b"-" in candidate:
        return False  # mixed separators are not a card layout
    # Luhn from the right: every second digit doubled (digit sums), all in C.
    backwards = digits[::-1]
    return (sum(backwards[0::2].translate(_VALUE)) + sum(backwards[1::2].translate(_DOUBLED))) % 10 == 0


# ISO 13616 lengths per country; a wrong length is not an IBAN however the checksum falls.
_IBAN_LENGTHS = {
    "AD": 24,
    "AE": 23,
    "AL": 28,
    "AT": 20,
    "AZ": 28,
    "BA": 20,
    "BE": 16,
    "BG": 22,
    "BH": 22,
    "BR": 29,
    "BY": 28,
    "CH": 21,
    "CR": 22,
    "CY": 28,
    "CZ": 24,
    "DE": 22,
    "DK": 18,
    "DO": 28,
    "EE": 20,
    "EG": 29,
    "ES": 24,
    "FI": 18,
    "FO": 18,
    "FR": 27,
    "GB": 22,
    "GE": 22,
    "GI": 23,
    "GL": 18,
    "GR": 27,
    "GT": 28,
    "HR": 21,
    "HU": 28,
    "IE": 22,
    "IL": 23,
    "IQ": 23,
    "IS": 26,
    "IT": 27,
    "JO": 30,
    "KW": 30,
    "KZ": 20,
    "LB": 28,
    "LC": 32,
    "LI": 21,
    "LT": 20,
    "LU": 20,
    "LV": 21,
    "MC": 27,
    "MD": 24,
    "ME": 22,
    "MK": 19,
    "MR": 27,
    "MT": 31,
    "MU": 30,
    "NL": 18,
    "NO": 15,
    "PK": 24,
    "PL": 28,
    "PS": 29,
    "PT": 25,
    "QA": 29,
    "RO": 24,
    "RS": 22,
    "SA": 24,
    "SC": 31,
    "SE": 24,
    "SI": 19,
    "SK": 24,
    "SM": 27,
    "ST": 25,
    "SV": 28,
    "TL": 23,
    "TN": 24,
    "TR": 26,
    "UA": 29,
    "VA": 22,
    "VG": 24,
    "XK": 20,
}


def iban_ok(candidate: bytes) -> bool:
    iban = candidate.replace(b" ", b"").decode()
    expected = _IBAN_LENGTHS.get(iban[:2])
    if expected is not None and len(iban) != expected:
        return False
    if expected is None and not 15 <= len(iban) <= 34:
        return False
    rearranged = iban[4:] + iban[:4]
    number = "".join(str(int(c, 36)) for c in rearranged)
    return int(number) % 97 == 1


def _ip_ok(candidate: bytes, v6: bool) -> bool:
    text = candidate.decode()
    if v6:
        if text.count(":") < 2 or text.strip(":") == "":
            return False
        text = text.split("%", 1)[0]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return False
    return not (ip.is_loopback or ip.is_unspecified)


def _phone_ok(candidate: bytes) -> bool:
    digits = sum(1 for c in candidate if 48 <= c <= 57)
    return 7 <= digits <= 15


_CHECKS = {
    "email": lambda c: True,
    "iban": iban_ok,
    "credit-card": card_ok,
    "ipv4": lambda c: _ip_ok(c, False),
    "ipv6": lambda c: _ip_ok(c, True),
    "phone": _phone_ok,
}


# Bytes each kind's match must hold (or start with): a kind whose test fails cannot have
# produced the match, so its regex is not asked. Only ever skips; never decides.
_POSSIBLE = {
    "email": lambda span: b"@" in span,
    "iban": lambda span: 65 <= span[0] <= 90,
    "credit-card": lambda span: 50 <= span[0] <= 54,
    "ipv4": lambda span: b"." in span,
    "ipv6": lambda span: b":" in span,
    "phone": lambda span: True,
}


def _kind_of(data: bytes, s: int, e: int) -> str | None:
    """Which alternative produced the match [s, e): the first that matches exactly there
    (alone, with the same surrounding bytes, so word boundaries behave the same)."""
    span = data[s:e]
    if span.isdigit():
        return "credit-card"  # the one kind whose match can be digits alone
    for kind, regex in _ALONE:
        if not _POSSIBLE[kind](span):
            continue
        spans = regex._regexp.Match(_ANCHOR_START, data, s, len(data))
        if spans[0] == (s, e):
            return kind
    return None


@lru_cache(maxsize=1)
def native() -> re2native.Pii | None:
    """This detector built into re2bulk's library, or None without it."""
    return re2native.Pii.of(_PATTERN, [regex for _, regex in _ALONE], _IBAN_LENGTHS)


def find_pii(data: bytes) -> list[Finding]:
    """Every personal datum in `data`. Texts of re2bulk.MIN_BYTES and more are searched and
    checked in re2bulk's library, which leaves IP addresses to `_ip_ok`."""
    out: list[Finding] = []
    found = native() if re2bulk.takes(data) else None
    if found is not None:
        flat = found.find(data)
        for k in range(0, len(flat), 4):
            s, e, kind, decided = flat[k : k + 4]
            name = _ALONE[kind][0]
            if decided or _CHECKS[name](data[s:e]):
                out.append(Finding(s, e, name))
        return out
    for spans in match_spans(_PATTERN, data):
        s, e = spans[0]
        kind = _kind_of(data, s, e)
        if kind and _CHECKS[kind](data[s:e]):
            out.append(Finding(s, e, kind))
    return out
