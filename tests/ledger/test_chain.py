"""The verdict chain, attacked the way issue 2 says: triggers dropped, rows changed, deleted
and reordered with raw SQL behind the ledger's back; `assay ledger verify` must name the
first bad row, on SQLite and on PostgreSQL."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC

import pytest
import sqlalchemy as sa

from assay.ledger import Ledger, canonical_json

KEY = b"test-verifier-key"


def sign(payload: dict) -> str:
    # A stand-in for the verifier's ed25519 key: the ledger only needs a callable to check it.
    return hmac.new(KEY, canonical_json(payload), hashlib.sha256).hexdigest()


def check(payload: dict, signature: str) -> bool:
    return hmac.compare_digest(sign(payload), signature)


def independent_hash(prev: str, run_id: str, key: str, created_at, payload: dict, signature: str) -> str:
    """The formula from ledger/chain.py's docstring, written out again without assay's code."""
    ts = created_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    content = {"run_id": run_id, "key": key, "created_at": ts, "payload": payload, "signature": signature}
    canon = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(prev.encode() + b"\n" + canon.encode()).hexdigest()


@pytest.fixture
def chained(ledger_url):
    """Five verdicts over two runs; returns (url, dialect, verdicts)."""
    with Ledger.open(ledger_url) as led:
        runs = [led.create_run(job=f"job{i}", kind="kernel", brain="playbook") for i in range(2)]
        for i in range(5):
            payload = {"passed": i % 2 == 0, "metrics": {"speedup": 1.5 + i / 10}, "reasons": [f"r{i}"], "ünï": "✓"}
            led.append_verdict(runs[i % 2].id, payload, sign(payload), key=f"verdict-{i}")
        yield ledger_url, led.dialect, led.verdicts()


def attack(url: str, dialect: str, *statements: str) -> None:
    """Drop the guards as an attacker with database access would, then run raw SQL."""
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        if dialect == "sqlite":
            conn.exec_driver_sql("DROP TRIGGER verdicts_no_update")
            conn.exec_driver_sql("DROP TRIGGER verdicts_no_delete")
        else:
            conn.exec_driver_sql("DROP TRIGGER verdicts_append_only ON verdicts")
            conn.exec_driver_sql("DROP TRIGGER verdicts_no_truncate ON verdicts")
        for stmt in statements:
            conn.execute(sa.text(stmt))
    engine.dispose()


def verify(url: str, **kw):
    with Ledger.open(url, create=False) as led:
        return led.verify_chain(**kw)


def test_intact_chain_verifies_and_matches_the_documented_formula(chained, cli):
    url, _, verdicts = chained
    prev = "0" * 64
    for v in verdicts:
        assert v.prev_hash == prev
        assert v.row_hash == independent_hash(prev, v.run_id, v.key, v.created_at, v.payload, v.signature)
        prev = v.row_hash
    assert [v.id for v in verdicts] == [1, 2, 3, 4, 5]

    report = verify(url, signature_check=check, expected_head=verdicts[-1].row_hash)
    assert report.ok and report.count == 5 and report.head == verdicts[-1].row_hash

    res = cli("ledger", "verify", "--hash-only", "--url", url)
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("\n") == 1 and "ledger intact: 5 verdicts" in res.stdout
    assert "WARNING" not in res.stdout


def test_appending_the_same_key_again_returns_the_chained_verdict(chained):
    url, _, verdicts = chained
    with Ledger.open(url) as led:
        again = led.append_verdict(verdicts[2].run_id, {"passed": False}, "other", key="verdict-2")
        assert again.id == 3 and again.row_hash == verdicts[2].row_hash
        assert led.counts()["verdicts"] == 5
        assert len(led.verdicts(run_id=verdicts[0].run_id)) == 3


def _created_at_plus_a_second(dialect: str, row: int) -> str:
    if dialect == "sqlite":
        return f"UPDATE verdicts SET created_at = datetime(created_at, '+1 second') || '.000000' WHERE id = {row}"
    return f"UPDATE verdicts SET created_at = created_at + interval '1 second' WHERE id = {row}"


def _swap(a: int, b: int) -> tuple[str, ...]:
    return (
        f"UPDATE verdicts SET id = -1 WHERE id = {a}",
        f"UPDATE verdicts SET id = {a} WHERE id = {b}",
        f"UPDATE verdicts SET id = {b} WHERE id = -1",
    )


TAMPERS = {
    # name: (statements for a dialect, expected problem, expected row, words in the detail)
    "payload changed": (
        lambda d: ["UPDATE verdicts SET payload = '{\"passed\": true}' WHERE id = 3"],
        "changed",
        3,
        "contents",
    ),
    "signature changed": (
        lambda d: ["UPDATE verdicts SET signature = 'forged' WHERE id = 2"],
        "changed",
        2,
        "contents",
    ),
    "run reassigned": (
        lambda d: ["UPDATE verdicts SET run_id = (SELECT run_id FROM verdicts WHERE id = 2) WHERE id = 1"],
        "changed",
        1,
        "contents",
    ),
    "timestamp moved": (lambda d: [_created_at_plus_a_second(d, 4)], "changed", 4, "contents"),
    "middle row deleted": (lambda d: ["DELETE FROM verdicts WHERE id = 3"], "gap", 4, "row 3 missing"),
    "first rows deleted": (lambda d: ["DELETE FROM verdicts WHERE id <= 2"], "gap", 3, "rows 1-2 missing"),
    "rows swapped": (lambda d: _swap(2, 3), "reordered", 2, "links to row 3, not to row 1"),
    "first row moved": (lambda d: _swap(1, 4), "reordered", 1, "links to row 3, but is first"),
    "deleted and renumbered": (
        lambda d: [
            "DELETE FROM verdicts WHERE id = 2",
            "UPDATE verdicts SET id = id - 1 WHERE id = 3",
            "UPDATE verdicts SET id = id - 1 WHERE id = 4",
            "UPDATE verdicts SET id = id - 1 WHERE id = 5",
        ],
        "bad_link",
        2,
        "row 1's row_hash",
    ),
    "forged row inserted": (
        lambda d: [
            "UPDATE verdicts SET id = id + 10 WHERE id >= 3",
            "UPDATE verdicts SET id = id - 9 WHERE id >= 13",
            "INSERT INTO verdicts (id, run_id, key, created_at, payload, signature, prev_hash, row_hash) "
            "SELECT 3, run_id, 'forged', created_at, payload, signature, row_hash, '"
            + "a" * 64
            + "' FROM verdicts WHERE id = 2",
        ],
        "changed",
        3,
        "contents",
    ),
}


@pytest.mark.parametrize("name", list(TAMPERS))
def test_verify_names_the_first_bad_row(chained, cli, name):
    url, dialect, _ = chained
    statements, problem, row, words = TAMPERS[name]
    attack(url, dialect, *statements(dialect))

    report = verify(url)
    assert (report.problem, report.row_id) == (problem, row), report
    assert words in report.detail

    res = cli("ledger", "verify", "--hash-only", "--url", url)
    assert res.returncode == 1, (res.stdout, res.stderr)
    assert f"TAMPERED at verdict row {row}: {problem.replace('_', ' ')}" in res.stdout
    assert "Traceback" not in res.stderr
    assert "WARNING: append-only triggers missing on verdicts" in res.stdout


def test_a_rewritten_row_with_a_recomputed_hash_breaks_the_next_link(chained, cli):
    url, dialect, verdicts = chained
    v = verdicts[1]
    assert v.payload["passed"] is False
    forged = {**v.payload, "passed": True}
    new_hash = independent_hash(v.prev_hash, v.run_id, v.key, v.created_at, forged, v.signature)
    attack(url, dialect, f"UPDATE verdicts SET payload = '{json.dumps(forged)}', row_hash = '{new_hash}' WHERE id = 2")

    report = verify(url)
    assert (report.problem, report.row_id) == ("bad_link", 3)
    # The link catches it at the next row; the verifier's signature catches the row itself.
    assert (verify(url, signature_check=check).problem, verify(url, signature_check=check).row_id) == (
        "bad_signature",
        2,
    )
    res = cli("ledger", "verify", "--hash-only", "--url", url, "--json")
    assert res.returncode == 1
    assert json.loads(res.stdout)["problem"] == "bad_link" and json.loads(res.stdout)["row_id"] == 3


def test_a_cut_off_tail_is_caught_only_against_a_pinned_head(chained, cli):
    url, dialect, verdicts = chained
    head = verdicts[-1].row_hash
    attack(url, dialect, "DELETE FROM verdicts WHERE id = 5")

    assert verify(url).ok  # a hash chain alone cannot see its newest rows cut off
    report = verify(url, expected_head=head)
    assert report.problem == "gap" and "pinned head" in report.detail
    res = cli("ledger", "verify", "--hash-only", "--url", url, "--head", head)
    assert res.returncode == 1 and "pinned head" in res.stdout


def test_an_appended_forgery_with_a_valid_link_fails_the_signature_hook(chained):
    url, dialect, verdicts = chained
    last = verdicts[-1]
    payload = {"passed": True, "metrics": {"speedup": 99.0}}
    with Ledger.open(url) as led:  # the attacker writes through the ledger itself
        forged = led.append_verdict(last.run_id, payload, "not-a-signature", key="forged")
    assert verify(url).ok
    report = verify(url, signature_check=check)
    assert (report.problem, report.row_id) == ("bad_signature", forged.id)
    raising = verify(url, signature_check=lambda p, s: 1 / 0)
    assert (raising.problem, raising.row_id) == ("bad_signature", 1)


def test_unreadable_values_are_reported_not_raised(tmp_path, cli):
    # SQLite only: PostgreSQL's JSON and timestamptz columns refuse such values outright.
    ledger_url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with Ledger.open(ledger_url) as led:
        run = led.create_run(job="j", kind="kernel", brain="playbook")
        for i in range(3):
            led.append_verdict(run.id, {"i": i}, "s", key=str(i))
    attack(
        ledger_url,
        "sqlite",
        "UPDATE verdicts SET payload = 'not json' WHERE id = 2",
        "UPDATE verdicts SET created_at = 'yesterday' WHERE id = 3",
    )
    report = verify(ledger_url)
    assert (report.problem, report.row_id) == ("changed", 2)
    res = cli("ledger", "verify", "--hash-only", "--url", ledger_url)
    assert res.returncode == 1 and "Traceback" not in res.stderr


def test_empty_ledger_verifies(ledger_url, cli, tmp_path):
    Ledger.open(ledger_url).close()
    res = cli("ledger", "verify", "--hash-only", "--url", ledger_url)
    assert res.returncode == 0 and "ledger intact: 0 verdicts chained, empty" in res.stdout
    # No verdict, no signature to check: a home without the verifier's key is fine.
    res = cli("ledger", "verify", "--url", ledger_url, env={"ASSAY_HOME": str(tmp_path)})
    assert res.returncode == 0 and "ledger intact: 0 verdicts chained, empty" in res.stdout, res.stderr


@pytest.fixture
def verifier_home(tmp_path):
    from assay.verifiers import signing

    home = tmp_path / "verifier-home"
    home.mkdir()
    return home, signing.load_or_create_key(home)


def test_verify_checks_the_verifiers_signatures_by_default(ledger_url, cli, verifier_home, tmp_path):
    """The hashes need no key: whoever can write the database can append a forged PASS through
    the ledger's own API and the chain links it. Only the signature tells (red-team finding:
    `assay ledger verify` did not check signatures and reported such a ledger intact)."""
    from assay.verifiers import signing

    home, key = verifier_home
    env = {"ASSAY_HOME": str(home)}
    with Ledger.open(ledger_url) as led:
        run = led.create_run(job="j", kind="kernel", brain="playbook")
        good = {"run_id": run.id, "key": "verdict:a", "passed": False}
        led.append_verdict(run.id, good, signing.sign(key, good), key="verdict:a")
    assert cli("ledger", "verify", "--url", ledger_url, env=env).returncode == 0
    with Ledger.open(ledger_url) as led:
        forged = {"run_id": run.id, "key": "verdict:b", "passed": True}
        led.append_verdict(run.id, forged, "ed25519:" + signing.key_id(key.public_key()) + ":AAAA", key="verdict:b")
    res = cli("ledger", "verify", "--url", ledger_url, env=env)
    assert res.returncode == 1 and "row 2: bad signature" in res.stdout, res.stdout + res.stderr
    assert (
        cli("ledger", "verify", "--hash-only", "--url", ledger_url, env=env).returncode == 0
    )  # hashes alone cannot tell
    keyless = cli("ledger", "verify", "--url", ledger_url, env={"ASSAY_HOME": str(tmp_path)})
    assert keyless.returncode == 2 and "no verifier public key" in keyless.stderr and "--hash-only" in keyless.stderr


def test_a_genuine_verdict_copied_into_another_run_is_caught(ledger_url, cli, verifier_home):
    """The signature covers the payload, which names its run and key; a genuine PASS copied,
    signature and all, into another run's row must not read as that run's verdict."""
    from assay.verifiers import signing

    home, key = verifier_home
    with Ledger.open(ledger_url) as led:
        passed, victim = (led.create_run(job=j, kind="kernel", brain="playbook") for j in ("a", "c"))
        payload = {"run_id": passed.id, "key": "verdict:s1", "passed": True}
        signature = signing.sign(key, payload)
        led.append_verdict(passed.id, payload, signature, key="verdict:s1")
        led.append_verdict(victim.id, payload, signature, key="verdict:s1")
        report = led.verify_chain(signature_check=signing.chain_check(home))
        copied = led.verdicts(victim.id)[0]
    assert (report.problem, report.row_id) == ("misplaced", 2)
    public = signing.load_public_key(home)
    assert signing.check(public, copied.payload, copied.signature) == "valid"  # the signature alone is fine
    assert signing.check_row(public, copied.run_id, copied.key, copied.payload, copied.signature) == "misplaced"
    res = cli("ledger", "verify", "--url", ledger_url, env={"ASSAY_HOME": str(home)})
    assert res.returncode == 1 and "misplaced" in res.stdout
