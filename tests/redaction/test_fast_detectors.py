"""The detectors' fast paths agree with their plain meaning.

Entropy: RE2 proposes only runs the checks could accept, and the checks then judge them as
before, so the findings equal a byte-by-byte walk over every run; tokens inside spans a
higher-ranked detector found are skipped, which changes nothing once findings merge. PII: the
byte tests that skip a kind never skip the kind that matched.
"""

from __future__ import annotations

import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.policies.redaction import Redactor, default_rules, re2bulk, re2native, re2util
from assay.policies.redaction import entropy as _entropy
from assay.policies.redaction import pii as _pii

_SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _findings(found) -> list[tuple[int, int, str]]:
    return sorted((f.start, f.end, f.kind) for f in found)


_text = st.lists(
    st.one_of(
        st.text(alphabet=string.ascii_letters + string.digits + " _-./:=@+%\n\t\"'[]{}", max_size=40),
        st.sampled_from(
            [
                "api_key = ",
                "password: ",
                "AKIA",
                "ghp_",
                "eyJ",
                "-----BEGIN RSA PRIVATE KEY-----\n",
                "@example.com",
                "4111 1111 1111 1111",
                "192.0.2.",
                "::",
                "sha256:",
            ]
        ),
        st.text(alphabet=string.ascii_letters + string.digits + "+/", min_size=16, max_size=60),
    ),
    max_size=12,
).map("".join)


# -- entropy: candidate runs by RE2, judged as before ---------------------------------------

_ALPHABET = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-")


def _entropy_reference(data: bytes) -> list[tuple[int, int, str]]:
    """Every maximal run of the alphabet of 20+ bytes holding a digit, with up to two '='
    after it, judged by is_high_entropy: the detector's meaning, one byte at a time."""
    out, i, n = [], 0, len(data)
    while i < n:
        if data[i] not in _ALPHABET:
            i += 1
            continue
        j = i
        while j < n and data[j] in _ALPHABET:
            j += 1
        run = data[i:j]
        if len(run) >= 20 and any(48 <= c <= 57 for c in run):
            kind = _entropy.is_high_entropy(run, data[max(0, i - 24) : i])
            if kind:
                end = j
                while end < n and end < j + 2 and data[end] == 61:
                    end += 1
                out.append((i, end, kind))
        i = j
    return out


_tokenish = st.lists(
    st.one_of(
        st.text(alphabet=string.ascii_letters + string.digits + "+/_-", min_size=1, max_size=70),
        st.text(alphabet=string.hexdigits, min_size=30, max_size=70),
        st.sampled_from(["=", "==", "===", " ", "\n", ".", "sha256:", "commit ", "é", "\udcff", ":", "/"]),
    ),
    max_size=12,
).map("".join)


def _both(find):
    """`find()` in Python, and (when the library is there) natively: they must agree."""
    plain = find()
    if NATIVE:
        with re2bulk.any_length():
            assert find() == plain
    return plain


NATIVE = _entropy.native() is not None


def test_the_native_entropy_detector_is_there(need):
    need(NATIVE, f"re2bulk is not built ({re2bulk.unavailable()}): `make install` installs libre2-dev and builds it")


@_SETTINGS
@given(text=_tokenish)
def test_entropy_candidates_miss_no_run_the_checks_accept(text):
    data = text.encode("utf-8", "surrogatepass")
    assert _both(lambda: _findings(_entropy.find_high_entropy(data))) == _entropy_reference(data)


@_SETTINGS
@given(text=_tokenish, cuts=st.lists(st.integers(0, 400), max_size=6))
def test_entropy_candidates_found_ahead_give_what_searching_gives(text, cuts):
    # The candidates listed ahead (on the worker) are read as a live search would answer,
    # also where a covered span sends the search back inside a listed candidate.
    if not NATIVE:
        return
    data = (text * 3).encode("utf-8", "surrogatepass")
    cuts = sorted(min(c, len(data)) for c in cuts)
    covered = [(cuts[i], cuts[i + 1]) for i in range(0, len(cuts) - 1, 2) if cuts[i] < cuts[i + 1]]
    native = _entropy.native()
    listed = native.candidates(data)
    assert listed.tolist() == [x for spans in re2util.match_spans(_entropy._CANDIDATE, data) for x in spans[0]]
    assert native.find(data, covered, listed) == native.find(data, covered)


@pytest.mark.skipif(not NATIVE, reason="re2bulk is not built")
def test_an_entropy_on_the_threshold_is_settled_in_python(monkeypatch):
    # 20 bytes, 10 distinct twice each: exactly log2(10) bits; the threshold set to that value
    # for length 20 makes the native check undecided, and Python's >= keeps the token.
    token = b"aB3dE5fG7hJ9kL1mN3pQ"[:10] * 2
    value = _entropy.entropy(token)
    monkeypatch.setattr(re2bulk, "MIN_BYTES", 0)
    assert value < _entropy._B64_AT[20]
    assert _entropy.native().find(b" " + token + b" ", []) == []  # decided: below the shipped one
    tables = (list(_entropy._HEX_AT), list(_entropy._B64_AT))
    tables[1][20] = value
    tied = re2native.Entropy.of(_entropy._CANDIDATE, _entropy._HASH_LABEL, *tables, 0.0, 0.0)
    assert tied.find(b" " + token + b" ", []) == [1, 21, 21, 0]
    monkeypatch.setattr(_entropy, "native", lambda: tied)
    monkeypatch.setattr(_entropy, "_B64_AT", tables[1])
    assert _findings(_entropy.find_high_entropy(b" " + token + b" ")) == [(1, 21, "high-entropy")]


def test_a_token_after_a_non_ascii_character_is_redacted_whole():
    token = "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9"
    out = Redactor(default_rules()).redact("café" + token + " and \xff" + token)
    assert token not in out and out.startswith("café[[SECRET:")


def test_tokens_joined_by_padding_are_both_found_in_one_pass():
    data = b"aB3dE5fG7hJ9kL1mN3pQ5rS7tU9==Zq8Wn4Lk2Jh6Gf1Ds5Ap9Om3Iu7Ye2"
    assert len(_entropy.find_high_entropy(data)) == 2


@_SETTINGS
@given(text=_tokenish, cuts=st.lists(st.integers(0, 400), max_size=6))
def test_entropy_skips_only_tokens_inside_covered_spans(text, cuts):
    data = text.encode("utf-8", "surrogatepass")
    cuts = sorted(min(c, len(data)) for c in cuts)
    covered = [(cuts[i], cuts[i + 1]) for i in range(0, len(cuts) - 1, 2) if cuts[i] < cuts[i + 1]]
    everything = _both(lambda: _findings(_entropy.find_high_entropy(data)))
    kept = _both(lambda: _findings(_entropy.find_high_entropy(data, covered)))
    inside = [f for f in everything if any(lo <= f[0] and f[1] <= hi for lo, hi in covered)]
    assert kept == [f for f in everything if f not in inside]


# -- the redactor's merge: skipping covered tokens changes nothing ---------------------------


@_SETTINGS
@given(text=_text)
def test_skipping_covered_entropy_tokens_leaves_the_findings_unchanged(text):
    data = text.encode("utf-8", "surrogatepass")
    redactor = Redactor(default_rules())
    fast = redactor._find(data)
    plain = _entropy.find_high_entropy
    try:
        _entropy.find_high_entropy = lambda d, covered=None, listed=None: plain(d)
        slow = redactor._find(data)
    finally:
        _entropy.find_high_entropy = plain
    assert fast == slow


# -- PII: the byte tests only skip kinds that cannot have matched ----------------------------


@_SETTINGS
@given(text=st.text(alphabet=string.digits + string.ascii_letters[:8] + "ABDEGN +-.:()@%", max_size=120))
def test_pii_kind_guard_agrees_with_asking_every_kind(text):
    data = text.encode()
    for spans in re2util.match_spans(_pii._PATTERN, data):
        s, e = spans[0]
        full = next(
            (
                kind
                for kind, regex in _pii._ALONE
                if regex._regexp.Match(_pii._ANCHOR_START, data, s, len(data))[0] == (s, e)
            ),
            None,
        )
        assert _pii._kind_of(data, s, e) == full


_pii_pieces = st.lists(
    st.one_of(
        st.text(alphabet=string.digits + string.ascii_letters[:8] + "ABDEGN +-.:()@%", max_size=40),
        st.sampled_from(
            [
                "alice@example.com",
                "GB82 WEST 1234 5698 7654 32",
                "GB82WEST12345698765432",
                "DE89370400440532013000",
                "XX12345678901234567",
                "4111 1111 1111 1111",
                "4111-1111-1111-1111",
                "4111 1111-1111 1111",
                "5555555555554444",
                "4444444444444444",
                "192.0.2.7",
                "127.0.0.1",
                "0.0.0.0",
                "2001:db8::1",
                "::1",
                "::",
                "fe80::1%eth0",
                "+44 20 7946 0958",
                "(555) 123-4567",
                "555-123-4567",
                " ",
                "\n",
                "é",
            ]
        ),
    ),
    max_size=16,
).map("".join)


@_SETTINGS
@given(text=_pii_pieces)
def test_pii_found_natively_is_pii_found_in_python(text):
    data = text.encode()
    plain = _findings(_pii.find_pii(data))
    if _pii.native() is not None:
        with re2bulk.any_length():
            assert _findings(_pii.find_pii(data)) == plain


def test_every_pii_kind_is_found_natively(monkeypatch, need):
    need(_pii.native() is not None, f"re2bulk is not built ({re2bulk.unavailable()})")
    monkeypatch.setattr(re2bulk, "MIN_BYTES", 0)
    data = b"alice@example.com\nGB82 WEST 1234 5698 7654 32\n4111 1111 1111 1111\n192.0.2.7\n2001:db8::1\n+44 20 7946 0958\n127.0.0.1\n"
    kinds = [f.kind for f in _pii.find_pii(data)]
    assert kinds == ["email", "iban", "credit-card", "ipv4", "ipv6", "phone"]  # not the loopback
    native = _findings(_pii.find_pii(data))
    with re2bulk.python_only():
        assert native == _findings(_pii.find_pii(data))


def _card_reference(candidate: bytes) -> bool:
    digits = candidate.replace(b" ", b"").replace(b"-", b"").decode()
    if not 13 <= len(digits) <= 19 or len(set(digits)) < 2 or len({c for c in candidate if c in b" -"}) > 1:
        return False
    return _pii.luhn_ok(digits)


@_SETTINGS
@given(candidate=st.text(alphabet="0123456789 -", min_size=10, max_size=24).map(str.encode))
def test_card_check_in_c_agrees_with_luhn_digit_by_digit(candidate):
    assert _pii.card_ok(candidate) == _card_reference(candidate)


def _windows_reference(data: bytes, placed: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Each placeholder's line and the lines either side, merged, searched one by one."""
    out: list[tuple[int, int]] = []
    for s, e in placed:
        lo = data.rfind(b"\n", 0, max(0, data.rfind(b"\n", 0, s))) + 1
        nl = data.find(b"\n", e)
        nl = -1 if nl == -1 else data.find(b"\n", nl + 1)
        hi = len(data) if nl == -1 else nl + 1
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


@_SETTINGS
@given(text=st.text(alphabet="ab\n", max_size=80), cuts=st.lists(st.integers(0, 80), max_size=10, unique=True))
def test_rescan_windows_agree_with_searching_each_placeholder(text, cuts):
    from assay.policies.redaction import redactor as redaction

    data = text.encode()
    cuts = sorted(c for c in cuts if c <= len(data))
    placed = [(cuts[i], cuts[i + 1]) for i in range(0, len(cuts) - 1, 2)]
    assert redaction._windows(data, placed) == _windows_reference(data, placed)


# A placeholder named after a registered secret's kind can hold anything a detector finds (a
# GitHub-token-shaped kind here): it must stay masked in the rescan, found or known.
_KIND = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


@_SETTINGS
@given(
    first=_text,
    pieces=st.lists(
        st.one_of(
            _text,
            st.sampled_from(["[", "[[", "[[[", "]]", "[[SECRET:x:1]]", "\n", "hunter2-Sup3r-s3cret"]),
            st.integers(0, 5),
        ),
        max_size=10,
    ),
)
def test_rescan_knowing_its_placeholders_finds_what_searching_for_them_finds(first, pieces):
    from assay.policies.redaction import redactor as redaction
    from assay.policies.redaction.vault import PLACEHOLDER_RE

    redactor = Redactor(default_rules())
    redactor.add_secret("hunter2-Sup3r-s3cret", _KIND)
    issued = redactor.redact(first + " hunter2-Sup3r-s3cret ").encode()  # placeholders to plant again
    known = [issued[s:e].decode() for (s, e), *_ in re2util.match_spans(PLACEHOLDER_RE, issued)]
    text = "".join(known[p % len(known)] if isinstance(p, int) else p for p in pieces)
    data = text.encode()
    spans = redactor._find(data)
    out, placed = redactor._replace(data, spans)
    windows = redaction._windows(out, placed)
    assert redactor._find_in(out, windows, placed) == redactor._find_in(out, windows)


@_SETTINGS
@given(items=st.lists(st.binary(min_size=1, max_size=160), min_size=1, max_size=40), threshold=st.floats(0, 8))
def test_batched_entropy_decides_as_the_scalar_one(items, threshold):
    assert _entropy.above(items, threshold) == [_entropy.entropy(i) > threshold for i in items]
    # ties: each item's own entropy as the threshold is never "above"
    for item in items:
        assert _entropy.above([item], _entropy.entropy(item)) == [False]
