"""Several processes writing one ledger at once, and a writer killed with SIGKILL and resumed:
the chain never forks, and no row is lost or duplicated."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from assay.ledger import Ledger

WRITER = Path(__file__).with_name("ledger_writer.py")
EVENT_TABLES = ("steps", "tool_calls", "policy_decisions", "verdicts")


def writer(url: str, run_id: str, go: Path, keys: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(WRITER), url, run_id, str(go), *keys],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_concurrent_writers_keep_one_chain(ledger_url, tmp_path):
    go = tmp_path / "go"
    Ledger.open(ledger_url).close()  # schema first, so the race below is about rows
    # Four processes; most keys are written by two of them at once, so idempotency races too.
    # Without the chain lock, writers collide on the next id (checked by hand: about a third
    # of appends fail), so a clean exit from every writer is itself the test.
    keys = [f"k{i:02d}" for i in range(16)]
    procs = [writer(ledger_url, "run-shared", go, keys[(w * 4) % 16 :][:8] or keys[:8]) for w in range(4)]
    time.sleep(1.0)  # let every writer open the ledger and reach the gate
    go.touch()
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err

    with Ledger.open(ledger_url, create=False) as led:
        counts = led.counts()
        verdicts = led.verdicts()
        report = led.verify_chain()
    written = sorted({k for w in range(4) for k in (keys[(w * 4) % 16 :][:8] or keys[:8])})
    assert report.ok, report.summary()
    assert sorted(v.key for v in verdicts) == written
    assert [v.id for v in verdicts] == list(range(1, len(written) + 1))
    for table in EVENT_TABLES:
        assert counts[table] == len(written), table


@pytest.mark.parametrize("kill_after", [3, 11])
def test_killed_writer_resumes_without_loss_or_duplicates(ledger_url, tmp_path, kill_after):
    go = tmp_path / "go"
    go.touch()
    keys = [f"e{i:03d}" for i in range(40)]
    p = writer(ledger_url, "run-killed", go, keys)
    done = 0
    while done < kill_after:
        line = p.stdout.readline()
        assert line, p.stderr.read()
        done += 1
    os.kill(p.pid, signal.SIGKILL)  # mid-stream: possibly between two of a key's four writes
    p.wait(timeout=30)
    assert p.returncode == -signal.SIGKILL

    with Ledger.open(ledger_url, create=False) as led:
        partial = led.counts()
    assert kill_after <= partial["verdicts"] < len(keys)

    resumed = writer(ledger_url, "run-killed", go, keys)  # the resume replays every key
    out, err = resumed.communicate(timeout=240)
    assert resumed.returncode == 0, err

    with Ledger.open(ledger_url, create=False) as led:
        counts = led.counts()
        report = led.verify_chain()
        verdicts = led.verdicts()
        steps = led.steps("run-killed")
    assert report.ok and report.count == len(keys), report.summary()
    assert [v.key for v in verdicts] == keys
    assert [s.key for s in steps] == keys
    for table in EVENT_TABLES:
        assert counts[table] == len(keys), table
    assert counts["runs"] == 1
