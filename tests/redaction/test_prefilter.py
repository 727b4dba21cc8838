"""The fast paths find exactly what the plain definitions find.

`RuleSet.scan` runs a rule only in windows around its literals (derived from the regex by
re2util.analyse), skips rules whose literals or keywords are absent, and finds generic-api-key
through its core; `RuleSet.scan_whole` is the definition (every rule whose keyword occurs, over
the whole text). The literal search and the located rules run in Python or, on long texts,
in re2bulk's library: both are held to the definition here. They must agree on every input:
random text, text built from the rules' own literals and keywords, strings generated from each
rule's regex, and hostile shapes (one literal repeated until the search gives up on it, long
lines, characters RE2 folds into k and s).
"""

from __future__ import annotations

import re
import string
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.policies.redaction import default_rules, re2bulk, re2util
from assay.policies.redaction.secret_rules import load_rules

RULES = default_rules()
NATIVE = re2bulk.library() is not None and RULES.native() is not None
_SETTINGS = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)


def _findings(found) -> list[tuple[int, int, str]]:
    return sorted((f.start, f.end, f.kind) for f in found)


@contextmanager
def _engine(native: bool):
    """RuleSet.scan's literal search and located rules in Python, or in re2bulk's library
    whatever the text's length (it takes only texts of re2bulk.MIN_BYTES and more)."""
    with re2bulk.any_length() if native else re2bulk.python_only():
        yield


def _same(data: bytes) -> None:
    want = _findings(RULES.scan_whole(data))
    with _engine(native=False):
        assert _findings(RULES.scan(data)) == want
    if NATIVE:
        with _engine(native=True):
            assert _findings(RULES.scan(data)) == want


def test_the_native_engine_is_there(need):
    need(NATIVE, f"re2bulk is not built ({re2bulk.unavailable()}): `make install` installs libre2-dev and builds it")


# Pieces a hostile or unlucky text is made of: the literals the search looks for, the
# keywords the gates ask about, separators and line ends, token-like runs, and the two
# characters RE2 folds into k and s under (?i).
_LITERALS = sorted({loc.literal.decode() for r in RULES.rules for loc in r.locators or ()})
_KEYWORDS = sorted({kw.decode() for r in RULES.rules for kw in r.keywords})
_piece = st.one_of(
    st.sampled_from(_LITERALS),
    st.sampled_from(_KEYWORDS),
    st.sampled_from(_LITERALS).map(str.upper),
    st.sampled_from(
        [
            " = ",
            ": ",
            '="',
            '"',
            "'",
            "\n",
            "\r\n",
            "\\n",
            " ",
            "\t",
            ",",
            ";",
            "=>",
            "-----BEGIN RSA PRIVATE KEY-----\n",
            "-----END RSA PRIVATE KEY-----",
            "kind: Secret\n",
            "data:\n  ",
            "curl -H 'Authorization: Bearer ",
            "\u212a",
            "\u017f",
            "é",
        ]
    ),
    st.text(alphabet=string.ascii_letters + string.digits, min_size=8, max_size=48),
    st.text(alphabet=string.ascii_letters + string.digits + "+/=_-.", min_size=1, max_size=24),
    st.text(alphabet=string.hexdigits, min_size=16, max_size=70),
)
_text = st.lists(_piece, max_size=30).map("".join)


@_SETTINGS
@given(text=_text)
def test_located_scan_equals_the_whole_text_definition(text):
    _same(text.encode("utf-8", "surrogatepass"))


@_SETTINGS
@given(text=st.text(max_size=400))
def test_located_scan_equals_the_definition_on_any_text(text):
    _same(text.encode("utf-8", "surrogatepass"))


def _generated(pattern: str):
    """Strings Python's re (hypothesis.from_regex) generates for a gitleaks pattern, where
    Python reads the pattern the way RE2 does; else None."""
    if "(?i)" in pattern[1:] or "\\z" in pattern or "(?s" in pattern:
        return None  # mid-pattern flags and \\z are RE2/Go syntax Python reads otherwise
    try:
        re.compile(pattern)
    except re.error:
        return None
    return st.from_regex(pattern, fullmatch=True)


_RULE_STRATEGIES = [(rule.id, _generated(rule.regex.pattern.decode())) for rule in RULES.rules]
_GENERATED = [(rid, strategy) for rid, strategy in _RULE_STRATEGIES if strategy is not None]


def test_most_rules_are_generated_from():
    assert len(_GENERATED) >= 150  # the property below covers most of the rule set


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data(), before=_text, after=_text, newline=st.booleans())
def test_strings_each_rule_matches_are_found_alike(data, before, after, newline):
    rid, strategy = data.draw(st.sampled_from(_GENERATED))
    match = data.draw(strategy)
    sep = "\n" if newline else " "
    text = f"{before}{sep}{match}{sep}{after}".encode("utf-8", "surrogatepass")
    _same(text)


@pytest.mark.parametrize(
    "text",
    [
        b"a" * 50_000,  # dropbox's literal "aaaaaaaaaa" at every byte: left out, rule runs whole
        b"s." * 30_000 + b"s.0123456789abcdefghijklmn ",  # vault's short literal, crowded out
        b"private " * 20_000 + b"private_ai_key = 0123456789abcdef0123456789abcdef\n",
        (b"ghp_" + b"A" * 36 + b" ") * 2_000,
        b"x" * 100_000 + b" ghp_" + b"a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8 ",  # one very long line
        b"\n".join([b"api_key = Zq8Wn4Lk2Jh6Gf1Ds5Ap9Om3Iu7Ye2"] * 500),
        b"kind: secret\ndata:\n  password: c2VjcmV0cGFzc3dvcmQxMjM=\n",
        "\u212aey = 'Zq8Wn4Lk2Jh6Gf1Ds5Ap9Om3Iu7Ye2'".encode(),  # Kelvin sign: (?i)k matches it
        # open-ended rules, searched from each hit to the end: BEGINs without an END, then keys
        b"-----BEGIN PRIVATE KEY-----\n" * 300
        + (b"-----BEGIN EC PRIVATE KEY-----\n" + b"MHcCAQEEIBk" * 12 + b"\n-----END EC PRIVATE KEY-----\n") * 3,
        b"curl -u admin:hunter2hunter2 https://x\n"
        + b"curl -H 'Authorization: Bearer abcdefgh12345678' https://y\n" * 40,
        # "glrt-t" is left out at its 67th hit, which also starts a "glrt-" token: the search
        # must go on from that hit for the shorter literal, not from the byte after it
        b"glrt-tX " * 66 + b"glrt-tA1b2C3d4E5f6G7h8I9j ",
    ],
    ids=[
        "one-literal",
        "short-literal",
        "keyword-without-literal",
        "many-hits",
        "long-line",
        "generic-lines",
        "k8s",
        "kelvin",
        "pem",
        "curl",
        "crowded-at-a-prefix",
    ],
)
def test_hostile_shapes_give_the_same_findings(text):
    _same(text)


# -- the analysis itself --------------------------------------------------------------------


def test_every_vendored_rule_is_analysed():
    for rule in RULES.rules:
        re2util.analyse(rule.regex.pattern.decode())  # Unsupported would be raised here
    assert RULES.located >= 190


@pytest.mark.parametrize(
    "pattern, literals, before, after",
    [
        (r"\bghp_[0-9a-zA-Z]{36}\b", {b"ghp_"}, 0, 36),
        (r"(?i)[\w.-]{0,50}?(?:adafruit)(?:[ \t]{0,2})=([a-z0-9]{32})", {b"adafruit"}, 50, 35),
        (r"(?:A3T[A-Z0-9]|AKIA|ASIA)[A-Z2-7]{16}", {b"a3t", b"akia", b"asia"}, 0, 16),
        (r"passw(?:or)?d=\w{4}", {b"passwd=", b"password="}, 0, 4),
        (r"x[\s\S]{2}(?i:SeCrEt)", {b"secret"}, 9, 0),  # [\s\S] may be 4 bytes of UTF-8 each
    ],
)
def test_locators_name_the_literal_and_the_reach(pattern, literals, before, after):
    shape = re2util.analyse(pattern)
    found = {loc.literal for loc in shape.locators}
    assert found == literals
    assert max(loc.before for loc in shape.locators) == before
    # after counts from the end of the shortest literal of a set
    assert min(loc.after for loc in shape.locators) <= after <= max(loc.after for loc in shape.locators)


@pytest.mark.parametrize("pattern", [r"[a-z]+\d", r"(?:abc|\d+)x", r"x?y?z?", r"(?:ab)*c"])
def test_patterns_without_a_needed_literal_have_no_locator(pattern):
    locs = re2util.analyse(pattern).locators
    assert not locs or min(len(loc.literal) for loc in locs) == 1


@pytest.mark.parametrize("pattern", [r"\pL+", r"\Qa.b\E", r"(a)\1", r"a{2}{3}", r"[[:foo:]]"])
def test_what_the_analysis_does_not_know_is_refused(pattern):
    with pytest.raises(re2util.Unsupported):
        re2util.analyse(pattern)


def test_kubernetes_secret_needs_all_three_words():
    rule = next(r for r in RULES.rules if r.id == "kubernetes-secret-yaml")
    needed = {frozenset(req) for req in rule.needs}
    assert {frozenset([b"secret"]), frozenset([b"kind:"]), frozenset([b"data:"])} <= needed


@_SETTINGS
@given(
    text=st.text(alphabet="ab\n", max_size=300),
    points=st.lists(st.integers(0, 300), max_size=20),
    lines=st.integers(0, 2),
)
def test_line_index_agrees_with_searching_each_time(text, points, lines):
    data = text.encode()
    n = len(data)
    points = sorted(min(p, n) for p in points)
    index = re2util.Lines(data)
    for at in points:
        pos = at
        for _ in range(lines + 1):
            pos = data.rfind(b"\n", 0, pos)
            if pos < 0:
                break
        assert index.start(at, lines) == (0 if pos < 0 else pos + 1)
    index = re2util.Lines(data)
    for at in points:
        pos, end = at, n
        for _ in range(lines + 1):
            nl = data.find(b"\n", pos)
            if nl < 0:
                end = n
                break
            end, pos = nl, nl + 1
        assert index.end(at, lines) == end


# -- allowlists: merged into RE2 Sets, asked once per line --------------------------------

_TOKEN = "Zq8Wn4Lk2Jh6Gf1Ds5Ap9Om3Iu7Ye2"


@pytest.mark.parametrize(
    "allowed, plain",
    [
        # line: a Docker secret mount (the line allowlist), twice on one line
        (
            f"RUN --mount=type=secret,id=x api_key={_TOKEN} token={_TOKEN}x\n",
            f"RUN --mount id=x api_key={_TOKEN} token={_TOKEN}x\n",
        ),
        # match: a public key is not a secret
        (f"public_key = {_TOKEN}\n", f"private_key = {_TOKEN}\n"),
        # secret: gitleaks' global (?i)^true|false|null$ reads as "holds false"
        (f"api_key = false{_TOKEN}\n", f"api_key = fa1se{_TOKEN}\n"),
    ],
    ids=["line", "match", "secret"],
)
def test_each_kind_of_allowlist_still_allows(allowed, plain):
    generic = lambda text: [f for f in RULES.scan(text.encode()) if f.kind == "generic-api-key"]  # noqa: E731
    assert generic(plain), "the example must be a finding without its allowlisted part"
    assert not generic(allowed)
    _same(allowed.encode())
    _same(plain.encode())


# -- rules found through their core ------------------------------------------------------
# Matches may cross three line ends after the keyword (\\s{0,3}), too many for windows
# around the literal, so these go through the core, as generic-api-key does. A match that
# starts with "b" is allowed, so where a match starts shows in the findings.

_CORE_RULES = """
[[rules]]
id = "lazy-prefix"
regex = '''(?i)[\\w.-]{0,12}?(?:token|key)[ \\t]{0,3}=\\s{0,3}([a-z0-9]{8,}|[a-z]{3}\\d+)(?:;|$)'''
keywords = ["token", "key"]
[[rules.allowlists]]
regexTarget = "match"
regexes = ['''^b''']

[[rules]]
id = "greedy-prefix"
regex = '''[\\w.-]{0,12}(?:secret|pass)[ \\t]{0,3}:\\s{0,3}([a-z0-9]{8,})\\b'''
keywords = ["secret", "pass"]
[[rules.allowlists]]
regexTarget = "match"
regexes = ['''^b''']
"""
_CORE_SET = load_rules(_CORE_RULES)
_core_piece = st.one_of(
    st.sampled_from(
        ["token", "key", "TOKEN", "secret", "pass", "=", " = ", ":", ": ", ";", "\n", " ", "_", ".", "-", "x"]
    ),
    st.text(alphabet="abcz0129_.-", min_size=1, max_size=14),
    st.text(alphabet="abz09_.-", min_size=10, max_size=30),  # prefixes longer than the rules allow
)


def test_both_core_paths_are_taken():
    lazy, greedy = _CORE_SET.rules
    assert lazy.core is not None and lazy.groups is not None  # matches read off the core
    assert greedy.core is not None and greedy.groups is None  # core windows, rule verified


@_SETTINGS
@given(text=st.lists(_core_piece, max_size=40).map("".join))
def test_rules_found_through_their_core_match_as_the_rule_does(text):
    data = text.encode()
    assert _findings(_CORE_SET.scan(data)) == _findings(_CORE_SET.scan_whole(data))


@pytest.mark.parametrize("run", range(0, 20))
def test_core_rules_where_the_class_run_before_the_keyword_is_long(run):
    for text in (
        f"b{'a' * run}token = abc12345;\n",
        f"x b{'a.' * run}secret: abcd1234efgh\n",
        f"b{'a' * run}pass:\n\nabcdefgh12\n",
    ):
        data = text.encode()
        assert _findings(_CORE_SET.scan(data)) == _findings(_CORE_SET.scan_whole(data))


@pytest.mark.parametrize("run", [0, 30, 49, 50, 51, 52, 80])
def test_generic_api_key_where_the_class_run_before_the_keyword_is_long(run):
    for text in (f"{'x' * run}api_key = Zq8Wn4Lk2Jh6Gf1Ds5Ap9Om3Iu7Ye2\n", f"{'a.' * run}_secret=\n  '{_TOKEN}'\n"):
        _same(text.encode())
