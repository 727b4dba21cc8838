"""The whole-text passes run ahead on a second core (re2bulk) change no finding.

The system's RE2 must list the same matches as google-re2's searches; a cursor over that list
must answer what a live search from any position would; and a redactor with the passes run
ahead must find, and write, exactly what one without them does, on the dense benchmark corpus
and on generated text long enough to take that path, also from several threads at once.
"""

from __future__ import annotations

import importlib.util
import os
import random
import re
import string
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.policies.redaction import Redactor, default_rules, re2bulk, re2native, re2util
from assay.policies.redaction import entropy as _entropy
from assay.policies.redaction import pii as _pii
from assay.policies.redaction.secret_rules import load_rules

_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _library(need, monkeypatch):
    need(
        re2bulk.library() is not None,
        f"re2bulk is not built ({re2bulk.unavailable()}): `make install` installs libre2-dev and builds it",
    )
    monkeypatch.setattr(re2bulk, "cores", lambda: 2)  # the worker is used on any machine here


def test_with_one_cpu_nothing_runs_on_a_worker(monkeypatch, corpus):
    monkeypatch.setattr(re2bulk, "cores", lambda: 1)
    data = corpus.text.encode()
    redactor = _redactor(corpus.known_values)
    assert redactor._engine._ahead(data, redactor._known) is None
    assert redactor._find(data) == _redactor(corpus.known_values)._find(data)


_PLACEHOLDER = re.compile(r"\[\[(SECRET|PII):([A-Za-z0-9._-]+):[0-9]+\]\]")


def canon(text: str) -> str:
    """`text` with its placeholders numbered 1, 2, 3 ... in order of first appearance: two
    redactors start their counters at random, so the same redaction differs only there."""
    seen: dict[str, int] = {}

    def number(m: re.Match) -> str:
        n = seen.setdefault(m.group(0), len(seen) + 1)
        return f"[[{m.group(1)}:{m.group(2)}:{n}]]"

    return _PLACEHOLDER.sub(number, text)


def _corpus():
    spec = importlib.util.spec_from_file_location(
        "assay_bench_redaction_corpus", ROOT / "bench" / "redaction_corpus.py"
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up there
    try:
        spec.loader.exec_module(mod)
        return mod.generate()
    finally:
        del sys.modules[spec.name]


@pytest.fixture(scope="module")
def corpus():
    return _corpus()


def _redactor(known=()) -> Redactor:
    redactor = Redactor(default_rules())
    for value in known:
        redactor.add_secret(value, "known")
    return redactor


def _passes(redactor: Redactor) -> list:
    """The passes that list one regex's matches (the rules' are whole walks: below)."""
    return [
        *redactor._known.passes(),
        (_entropy._CANDIDATE, re2bulk.Bulk.of(_entropy._CANDIDATE)),
        (_pii._PATTERN, re2bulk.Bulk.of(_pii._PATTERN)),
    ]


def _live(regex, data: bytes) -> list[int]:
    return [x for spans in re2util.match_spans(regex, data) for x in spans[0]]


_WORDS = [
    "api_key = ",
    "token: ",
    "AKIA",
    "ghp_",
    "-----BEGIN RSA PRIVATE KEY-----\n",
    "@example.com",
    "4111 1111 1111 1111",
    "192.0.2.7",
    "::1",
    "sha256:",
    "\u00e9",
]


def _texts(words: list[str]):
    return st.lists(
        st.one_of(
            st.text(alphabet=string.ascii_letters + string.digits + " _-./:=@+%\n\t\"'[]{}", max_size=40),
            st.sampled_from(words),
            st.text(alphabet=string.ascii_letters + string.digits + "+/=", min_size=16, max_size=60),
        ),
        max_size=12,
    ).map("".join)


# The Kelvin sign sends every rule over the whole text (secret_rules.scan): right, but slow on
# the long texts below, so only the short ones carry it.
_pieces = _texts(_WORDS + ["\u212a"])
_long_pieces = _texts(_WORDS)


# -- the system's RE2 lists google-re2's matches ---------------------------------------------


def test_every_pass_lists_the_same_matches_on_the_dense_corpus(corpus):
    redactor = _redactor(corpus.known_values)
    data = corpus.text.encode()
    passes = _passes(redactor)
    assert all(bulk is not None for _, bulk in passes), "a pass has no system-RE2 twin"
    for regex, bulk in passes:
        assert bulk.spans(data) == _live(regex, data), regex.pattern[:60]


@_SETTINGS
@given(text=_pieces, junk=st.binary(max_size=40))
def test_every_pass_lists_the_same_matches_on_generated_bytes(text, junk):
    data = text.encode("utf-8", "surrogatepass") + junk + text.encode()  # invalid UTF-8 too
    redactor = _redactor(["hunter2-canary-value", "sk-9f8e7d6c5b4a"])
    for regex, bulk in _passes(redactor):
        assert bulk.spans(data) == _live(regex, data)


def _findings(found) -> list:
    return sorted((f.start, f.end, f.kind) for f in found)


def _walked_natively(data: bytes) -> list:
    rules = default_rules()
    native = rules.native()
    assert native is not None and native.walks, re2bulk.unavailable()
    assert rules.passes() == [(walk, walk) for walk in native.walks.values()]
    found = []
    for walk in native.walks.values():
        rules._take(walk.spans(data), data, found)
    return _findings(found)


def _walked_in_python(data: bytes) -> list:
    rules = default_rules()
    found = []
    for rule in rules.rules:
        if rule.groups is not None:
            rules._judge(rule, data, rules._walk(rule, data), found)
    return _findings(found)


def test_the_native_walk_finds_what_the_python_walk_finds_on_the_dense_corpus(corpus):
    data = corpus.text.encode()
    found = _walked_natively(data)
    assert found == _walked_in_python(data)
    assert len(found) > 200


@_SETTINGS
@given(text=_pieces, junk=st.binary(max_size=40))
def test_the_native_walk_finds_what_the_python_walk_finds_on_generated_bytes(text, junk):
    data = text.encode("utf-8", "surrogatepass") + junk + text.encode()
    assert _walked_natively(data) == _walked_in_python(data)


def test_more_matches_than_one_call_returns():
    data = b"a1B2c3D4e5F6g7H8i9J0k " * (3 * re2bulk._CHUNK)
    bulk = re2bulk.Bulk.of(_entropy._CANDIDATE)
    assert len(bulk.spans(data)) == 2 * 3 * re2bulk._CHUNK
    assert bulk.spans(data) == _live(_entropy._CANDIDATE, data)


# -- a cursor answers what a live search would -----------------------------------------------


@_SETTINGS
@given(text=_pieces, steps=st.lists(st.integers(min_value=0, max_value=30), max_size=40))
def test_a_cursor_answers_as_a_live_search_from_any_position(text, steps):
    data = (text * 3).encode("utf-8", "surrogatepass")
    regex = _entropy._CANDIDATE
    cursor = re2bulk.Cursor(regex, data, re2bulk.Bulk.of(regex).spans(data))
    live = re2bulk.live_cursor(regex, data)
    pos = 0
    for step in steps:  # callers jump ahead, into matches or past them
        pos = min(pos + step, len(data))
        assert cursor.next(pos) == live(pos)


def test_a_cursor_searches_live_only_inside_a_listed_match():
    data = b"x aB3dE5gH7jK9mN1pQ3sT5 y cD4fG6hJ8kL0nP2rS4uV6 z"
    regex = _entropy._CANDIDATE
    spans = re2bulk.Bulk.of(regex).spans(data)
    cursor = re2bulk.Cursor(regex, data, spans)
    assert cursor.next(0) == (spans[0], spans[1]) and cursor.lives == 0
    assert cursor.next(spans[1]) == (spans[2], spans[3]) and cursor.lives == 0
    inside = spans[2] + 5
    assert cursor.next(inside) == re2bulk.live_cursor(regex, data)(inside)
    assert cursor.lives == 1


# -- redaction with the passes ahead is redaction without them -------------------------------


def test_the_dense_corpus_is_redacted_the_same_with_and_without(corpus):
    data = corpus.text.encode()
    redactor = _redactor(corpus.known_values)
    assert redactor._engine._ahead(data, redactor._known) is not None
    found, out = redactor._find(data), redactor.redact(corpus.text)
    with re2bulk.python_only():
        plain = _redactor(corpus.known_values)
        assert plain._engine._ahead(data, plain._known) is None
        assert plain._find(data) == found
        assert canon(plain.redact(corpus.text)) == canon(out)
    assert len(found) > 500


def test_python_only_takes_no_native_path(corpus, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a native path ran inside python_only()")

    for cls, name in [
        (re2native.Located, "scan"),
        (re2native.Located, "walk"),
        (re2native.Entropy, "find"),
        (re2native.Pii, "find"),
        (re2bulk, "prefetch"),
    ]:
        monkeypatch.setattr(cls, name, refuse)
    with re2bulk.python_only():
        assert "[[SECRET:" in _redactor(corpus.known_values).redact(corpus.text[:200_000])


def test_any_length_sends_short_texts_to_the_library(monkeypatch):
    # The switch the property tests use to hold short generated texts to the Python twin.
    ran = []

    def spy(real, name):
        return lambda self, *args: ran.append(name) or real(self, *args)

    for cls, name in [(re2native.Located, "scan"), (re2native.Entropy, "find"), (re2native.Pii, "find")]:
        monkeypatch.setattr(cls, name, spy(getattr(cls, name), name))
    text = "api_key = a1B2c3D4e5F6g7H8i9J0 x@example.com"
    _redactor().redact(text)
    assert ran == []
    with re2bulk.any_length():
        _redactor().redact(text)
    assert sorted(set(ran)) == ["find", "scan"] and ran.count("find") >= 2


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(_long_pieces, min_size=1, max_size=20), seed=st.integers(0, 2**32 - 1))
def test_long_generated_texts_are_redacted_the_same_with_and_without(parts, seed):
    rng = random.Random(seed)
    chunks, size = [], 0
    while size < re2bulk.MIN_BYTES:
        chunks.append(rng.choice(parts) + rng.choice(["\n", " ", "; ", ""]))
        size += len(chunks[-1])
    text = "".join(chunks)
    bulk = _redactor(["hunter2-canary-value"])
    assert bulk._engine._ahead(text.encode("utf-8", "surrogatepass"), bulk._known) is not None
    with_bulk = bulk.redact(text)
    with re2bulk.python_only():
        without = _redactor(["hunter2-canary-value"]).redact(text)
    assert canon(with_bulk) == canon(without)


def test_generic_api_key_groups_come_from_its_core_matches(corpus):
    # The one rule whose groups come from an anchored search over each core match.
    rules = default_rules()
    data = corpus.text.encode()
    ahead = re2bulk.prefetch(data, rules.passes())
    generic = [f for f in rules.scan(data, ahead) if f.kind.startswith("generic")]
    assert len(generic) > 100
    assert generic == [f for f in rules.scan(data) if f.kind.startswith("generic")]


def test_the_located_rules_find_natively_what_they_find_in_python(corpus):
    rules = default_rules()
    data = corpus.text.encode()
    assert rules.native() is not None, re2bulk.unavailable()
    native = _findings(rules.scan(data))
    with re2bulk.python_only():
        assert _findings(rules.scan(data)) == native
    assert native == _findings(rules.scan_whole(data))
    assert len(native) > 500


def test_a_native_search_that_cannot_run_falls_back_to_python(corpus, monkeypatch):
    rules = default_rules()
    data = corpus.text.encode()
    expected = _findings(rules.scan(data))
    monkeypatch.setattr(re2native.Located, "scan", lambda self, data, lowered: None)
    assert _findings(rules.scan(data)) == expected


def test_threads_redacting_at_once_agree(corpus):
    text = corpus.text[:300_000]
    expected = _redactor(corpus.known_values).redact(text)
    results: list[str] = []

    def run():
        results.append(_redactor(corpus.known_values).redact(text))

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [canon(r) for r in results] == [canon(expected)] * 3


def test_short_texts_never_load_the_library(tmp_path):
    # A gateway's usual result is a few KB: it must not pay for a build or a thread handoff.
    code = (
        "from assay.policies.redaction import Redactor\n"
        "from assay.policies.redaction import re2bulk\n"
        "r = Redactor(); r.add_secret('hunter2-canary-value')\n"
        "assert '[[' in r.redact('pw hunter2-canary-value api_key = a1B2c3D4e5F6g7H8i9J0 x@example.com')\n"
        "print(re2bulk.library.cache_info().currsize)\n"
    )
    out = subprocess.run(
        [sys.executable, "-P", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path)},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0"
    assert not (tmp_path / "assay").exists()


def test_switched_off_it_says_why_and_redaction_still_works(corpus):
    code = (
        "import sys\n"
        "from assay.policies.redaction import Redactor\n"
        "from assay.policies.redaction import re2bulk\n"
        "text = sys.stdin.read()\n"
        "out = Redactor().redact(text)\n"
        "print(re2bulk.unavailable()); print(out.count('[[SECRET:'))\n"
    )
    text = corpus.text[:200_000]
    env = {**os.environ, re2bulk.ENV: "0"}
    out = subprocess.run(
        [sys.executable, "-P", "-c", code], input=text, capture_output=True, text=True, timeout=120, env=env
    )
    assert out.returncode == 0, out.stderr
    why, count = out.stdout.split("\n")[:2]
    assert why == f"switched off ({re2bulk.ENV})"
    assert int(count) == Redactor().redact(text).count("[[SECRET:")


@contextmanager
def _worker_held():
    """A pass that keeps the worker busy until the block ends, so the passes queued after
    it are not started."""
    gate = threading.Event()

    class Held:
        def spans(self, data):
            gate.wait(30)
            return []

    try:
        yield Held()
    finally:
        gate.set()


def test_a_pass_the_worker_has_not_started_runs_on_the_calling_thread(corpus):
    data = corpus.text.encode()
    regex = _pii._PATTERN
    with _worker_held() as held:
        ahead = re2bulk.prefetch(data, [(object(), held), (regex, re2bulk.Bulk.of(regex))])
        assert ahead.spans(regex) == _live(regex, data)
        assert ahead.stolen == 1


def test_a_walk_whose_gate_is_closed_is_dropped_unstarted(corpus):
    rules = default_rules()
    data = corpus.text.encode()
    assert b"yandex" not in data.lower()
    yandex = next(i for i, r in enumerate(rules.rules) if r.id == "yandex-access-token")
    walk = rules.native().walks[yandex]
    with _worker_held() as held:
        ahead = re2bulk.prefetch(data, [(object(), held), (walk, walk)])
        rules.scan(data, ahead)
        assert id(walk) not in ahead._passes  # dropped, and its queued run cancelled


def test_a_failed_pass_falls_back_to_the_live_search(corpus, monkeypatch):
    # A way of going faster must never be a way of redacting less.
    text = corpus.text[:200_000]
    expected = _redactor(corpus.known_values).redact(text)

    def broken(self, data):
        raise MemoryError("no room for the match list")

    monkeypatch.setattr(re2bulk.Bulk, "spans", broken)
    monkeypatch.setattr(re2native.Walk, "spans", broken)
    redactor = _redactor(corpus.known_values)
    assert redactor._engine._ahead(text.encode(), redactor._known) is not None
    assert canon(redactor.redact(text)) == canon(expected)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_gets_its_own_worker(corpus):
    # The child inherits the pool but not its thread: handing work to it would wait forever.
    text = corpus.text[:200_000]
    expected = _redactor(corpus.known_values).redact(text)  # the parent's worker is started
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            ok = canon(_redactor(corpus.known_values).redact(text)) == canon(expected)
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)
    import select

    ready, _, _ = select.select([read], [], [], 60)
    os.waitpid(pid, 0) if ready else os.kill(pid, 9)
    assert ready, "the forked child's redaction hung"
    assert os.read(read, 1) == b"1"


# -- the native judge decides as RuleSet._judge does ------------------------------------------

_CUSTOM = """
[allowlist]
regexes = ['''^allowedsecret''']
stopwords = ["example"]

[[rules]]
id = "tie-token"
regex = '''\\btie_([a-z0-9]{16})\\b'''
keywords = ["tie_"]
entropy = 3.0

[[rules]]
id = "together-token"
regex = '''\\btog_([a-z0-9]{16})\\b'''
keywords = ["tog_"]
[[rules.allowlists]]
condition = "AND"
regexes = ['''^[a-z]+$''']
stopwords = ["zzz"]

[[rules]]
id = "lined-token"
regex = '''\\blin_([a-z0-9]{16})\\b'''
keywords = ["lin_"]
[[rules.allowlists]]
regexTarget = "line"
regexes = ['''# not a secret''']
"""


@pytest.fixture
def custom(monkeypatch):
    monkeypatch.setattr(re2bulk, "MIN_BYTES", 0)  # every text takes the native path
    rules = load_rules(_CUSTOM)
    assert rules.native() is not None, re2bulk.unavailable()
    return rules


def test_an_entropy_on_the_threshold_is_left_to_python(custom):
    # 8 bytes twice each: exactly 3.0 bits, not above the rule's 3.0; 10 distinct: 3.25.
    data = b"x tie_aabbccddeeffgghh y tie_abcdefghijabcdef z"
    _, _, records = custom.native().scan(data, data.lower())
    decided = {(records[k + 4], records[k + 5]): records[k + 1] for k in range(0, len(records), 6)}
    assert decided == {(6, 22): 0, (29, 45): 1}  # the tie undecided, the other a finding
    assert _findings(custom.scan(data)) == _findings(custom.scan_whole(data)) == [(29, 45, "tie-token")]


def test_allowlists_that_fire_only_together_are_asked_in_python(custom):
    data = b"tog_abcdefghzzzabcde tog_abcdefgh12345678 tog_abcdefghijklmnop\n"
    _, _, records = custom.native().scan(data, data.lower())
    assert records and not any(records[k + 1] for k in range(0, len(records), 6))
    found = _findings(custom.scan(data))
    assert found == _findings(custom.scan_whole(data))
    # letters only and holding "zzz": allowed; either alone is not enough
    assert [(s, e) for s, e, _ in found] == [(25, 41), (46, 62)]


def test_global_stopword_secret_and_line_allowlists_apply_natively(custom):
    lines = [
        b"lin_allowedsecret123",  # the secret allowlist: ^allowedsecret
        b"lin_abcexample123456",  # a stopword inside the secret
        b"lin_abcd1234efgh5678 # not a secret",  # the line allowlist
        b"lin_abcd1234efgh5679",  # kept
        b"lin_abcd1234efgh5670 and lin_abcd1234efgh5671 # not a secret",
    ]
    data = b"\n".join(lines) + b"\n"
    rule = next(r for r in custom.rules if r.id == "lined-token")
    assert len(list(re2util.match_spans(rule.regex, data))) == 6  # each one a match to judge
    found = _findings(custom.scan(data))
    assert found == _findings(custom.scan_whole(data))
    assert [data[s:e] for s, e, _ in found] == [b"abcd1234efgh5679"]
