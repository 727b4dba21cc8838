"""`assay verdicts --json` shows each verdict's signature and chain status, and shows tampering:
a verdict row changed with raw SQL (the append-only triggers dropped first, as an attacker with
the database file would) is flagged, and so is a row signed by someone else's key."""

from __future__ import annotations

import base64
import json

import pytest
from agent_helpers import assay, install_brain, write_job
from scripted_brains import idle, quick


def verdicts_json(env=None) -> dict:
    out = assay("verdicts", "--json", env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def raw(url: str | None, *sql: str) -> None:
    """Statements straight on the database, the append-only triggers dropped first (opening the
    ledger puts missing guards back, so both happen on one connection)."""
    from assay.ledger import Ledger

    if url and url.startswith("postgresql"):
        drops = [
            "DROP TRIGGER IF EXISTS verdicts_append_only ON verdicts",
            "DROP TRIGGER IF EXISTS verdicts_no_truncate ON verdicts",
        ]
    else:
        drops = ["DROP TRIGGER IF EXISTS verdicts_no_update", "DROP TRIGGER IF EXISTS verdicts_no_delete"]
    with Ledger.open(url) as ledger, ledger.engine.begin() as conn:
        for stmt in [*drops, *sql]:
            conn.exec_driver_sql(stmt)


def signed_verdicts(home, n: int) -> list[str]:
    """n chained verdicts signed with the verifier's key, each for a run of its own."""
    from assay.ledger import Ledger
    from assay.verifiers import signing

    key = signing.load_or_create_key(home)
    ids = []
    with Ledger.open() as ledger:
        for i in range(n):
            run = ledger.create_run(job=f"job-{i}.toml", kind="kernel", brain="playbook")
            payload = {
                "run_id": run.id,
                "kind": "kernel",
                "passed": False,
                "reasons": [f"reason {i}"],
                "checks": [],
                "metrics": {},
                "criteria": "kernel-default",
                "criteria_hash": "a" * 64,
                "submission": None,
                "submission_hash": None,
                "verifier_version": "0.1.0",
                "verified_at": "2026-01-01T00:00:00Z",
            }
            ledger.append_verdict(run.id, payload, signing.sign(key, payload), key="verdict:none")
            ids.append(run.id)
    return ids


@pytest.mark.slow
def test_real_verdicts_then_a_flipped_result(home, tmp_path, monkeypatch):
    from assay.agents.job import load_job
    from assay.agents.runner import start_run

    install_brain(monkeypatch, quick)
    first = start_run(load_job(write_job(tmp_path / "a")))
    install_brain(monkeypatch, idle)
    second = start_run(load_job(write_job(tmp_path / "b")))

    doc = verdicts_json()
    assert doc["chain_ok"] is True
    assert [(v["run_id"], v["signature"], v["chain"]) for v in doc["verdicts"]] == [
        (first.run_id, "valid", "ok"),
        (second.run_id, "valid", "ok"),
    ]
    assert all(v["passed"] is False for v in doc["verdicts"])
    assert assay("ledger", "verify", timeout=60).returncode == 0

    # Flip the first verdict to a pass, straight in the database.
    raw(None, "UPDATE verdicts SET payload = json_set(payload, '$.passed', json('true')) WHERE id = 1")
    doc = verdicts_json()
    assert doc["chain_ok"] is False
    v1, v2 = doc["verdicts"]
    assert v1["passed"] is True  # what the row now says...
    assert v1["signature"] == "invalid" and v1["chain"] == "broken here"  # ...and that it is not the verifier's
    assert v2["signature"] == "valid" and v2["chain"] == "after a break"
    out = assay("ledger", "verify", timeout=60)
    assert out.returncode == 1 and "1" in out.stdout + out.stderr
    # Filtered to one run, the chain status is still the whole ledger's.
    one = json.loads(assay("verdicts", "--run", second.run_id, "--json", timeout=60).stdout)
    assert one["chain_ok"] is False and [v["chain"] for v in one["verdicts"]] == ["after a break"]


@pytest.mark.parametrize("db", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_tampering_is_flagged(home, request, monkeypatch, db):
    url = None
    if db == "postgresql":
        url = request.getfixturevalue("pg_url")
        monkeypatch.setenv("ASSAY_LEDGER_URL", url)
    env = {"ASSAY_LEDGER_URL": url} if url else None
    runs = signed_verdicts(home, 3)
    assert [v["signature"] for v in verdicts_json(env)["verdicts"]] == ["valid"] * 3

    # Re-signed by an attacker's own ed25519 key, row hash recomputed: the chain holds, the
    # signature does not.
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from assay.ledger import Ledger, chain
    from assay.verifiers import signing

    mallory = Ed25519PrivateKey.generate()
    with Ledger.open(url) as ledger:
        v3 = ledger.verdicts(runs[2])[0]
        forged = dict(v3.payload, passed=True, reasons=[])
        sig = signing.sign(mallory, forged)
        new_hash = chain.row_hash(
            v3.prev_hash, run_id=v3.run_id, key=v3.key, created_at=v3.created_at, payload=forged, signature=sig
        )
    raw(
        url,
        f"UPDATE verdicts SET payload = '{json.dumps(chain.normalize_payload(forged))}', signature = '{sig}', "
        f"row_hash = '{new_hash}' WHERE id = 3",
    )
    doc = verdicts_json(env)
    assert [v["signature"] for v in doc["verdicts"]] == ["valid", "valid", "unknown-key"]
    assert doc["chain_ok"] is False and doc["verdicts"][2]["chain"] == "broken here"

    # The verifier's key id with a signature that is not the verifier's.
    bad = base64.b64encode(b"\0" * 64).decode()
    with Ledger.open(url) as ledger:
        kid = ledger.verdicts(runs[1])[0].signature.split(":")[1]
    raw(url, f"UPDATE verdicts SET signature = 'ed25519:{kid}:{bad}' WHERE id = 2")
    doc = verdicts_json(env)
    assert [v["signature"] for v in doc["verdicts"]] == ["valid", "invalid", "unknown-key"]
    assert [v["chain"] for v in doc["verdicts"]] == ["ok", "broken here", "after a break"]

    # A verdict deleted from the middle.
    raw(url, "DELETE FROM verdicts WHERE id = 1")
    doc = verdicts_json(env)
    assert doc["chain_ok"] is False and [v["id"] for v in doc["verdicts"]] == [2, 3]
    assert doc["verdicts"][0]["chain"] == "broken here"
    assert assay("ledger", "verify", env=env, timeout=60).returncode == 1
