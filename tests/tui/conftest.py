"""A small ledger with fixed ids and timestamps, written through the Ledger API the way the
runtime, the gateway and the verifier write it, so screens (and their snapshots) come out
the same on every machine."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from assay.ledger import Approval, Ledger, PolicyDecision, Run, Step, ToolCall

T0 = datetime(2025, 3, 14, 9, 0, 0, tzinfo=UTC)
NOW = T0 + timedelta(hours=1)

PASSED = "20250314-090000-a1b2c3"
FAILED = "20250314-091500-d4e5f6"
WAITING = "20250314-093000-0a0b0c"
RUNNING = "20250314-094500-ffeedd"

BUDGET = {"steps": 40, "minutes": 10.0, "tokens": None}


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def fixed_key(home: Path) -> Ed25519PrivateKey:
    """The verifier key, fixed so signatures (and the key id on screen) never change."""
    key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    d = home / "keys"
    d.mkdir(parents=True, exist_ok=True)
    (d / "verifier-ed25519.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    (d / "verifier-ed25519.pub").write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return key


class Writer:
    """Writes the rows a run leaves behind, each with the time it is given."""

    def __init__(self, ledger: Ledger):
        self.ledger = ledger

    def run(
        self,
        run_id: str,
        job: str,
        status: str,
        *,
        start: float,
        end: float | None = None,
        brain: str = "playbook",
        used: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> Run:
        return self.ledger.insert_once(
            Run(
                id=run_id,
                job=job,
                kind="kernel",
                brain=brain,
                status=status,
                created_at=at(start),
                updated_at=at(end if end is not None else start + 5),
                started_at=at(start + 1),
                finished_at=at(end) if end is not None else None,
                budget=dict(BUDGET),
                spec={},
                budget_used=used or {},
                error=error,
            ),
            unique=("id",),
        )

    def step(self, run_id: str, n: int, t: float, calls: list[str], final: str | None = None) -> None:
        payload = {"tool_calls": [{"tool": c, "id": f"call-{n}-{i}"} for i, c in enumerate(calls)], "final": final}
        self.ledger.insert_once(
            Step(run_id=run_id, key=f"step-{n}", name="agent", payload=payload, created_at=at(t)),
            unique=("run_id", "key"),
        )

    def decision(
        self,
        run_id: str,
        key: str,
        tool: str,
        t: float,
        decision: str = "allow",
        rule: str = "",
        reason: str = "",
        fingerprint: str = "fp",
    ) -> None:
        self.ledger.insert_once(
            PolicyDecision(
                run_id=run_id,
                key=key,
                tool=tool,
                decision=decision,
                reason=reason or f"allowed by rule {rule}",
                detail={"rule": rule, "fingerprint": fingerprint},
                created_at=at(t),
            ),
            unique=("run_id", "key"),
        )

    def call(
        self,
        run_id: str,
        key: str,
        tool: str,
        args: dict[str, Any],
        t: float,
        *,
        ms: float = 120.0,
        decision: str = "allow",
        rule: str = "",
        text: str = "ok",
        error: str | None = None,
    ) -> None:
        self.decision(run_id, key, tool, t, decision, rule)
        data = text.encode()
        self.ledger.insert_once(
            ToolCall(
                run_id=run_id,
                key=key,
                tool=tool,
                arguments=args,
                decision=decision,
                result_digest="sha256:" + "ab" * 32,
                result_size=len(data),
                started_at=at(t),
                finished_at=at(t + ms / 1000),
                duration_ms=ms,
                error=error,
                fingerprint="fp",
                outcome={
                    "text": text,
                    "structured": None,
                    "is_error": error is not None,
                    "rule": rule,
                    "duration_ms": ms,
                },
                created_at=at(t + ms / 1000),
            ),
            unique=("run_id", "key"),
        )

    def approval(
        self,
        run_id: str,
        key: str,
        event: str,
        t: float,
        *,
        request_key: str,
        tool: str = "exec",
        args: dict[str, Any] | None = None,
        reason: str = "",
        actor: str = "gateway",
        fingerprint: str = "fp-build",
    ) -> None:
        self.ledger.insert_once(
            Approval(
                run_id=run_id,
                key=key,
                event=event,
                request_key=request_key,
                fingerprint=fingerprint,
                tool=tool,
                arguments=args or {},
                reason=reason,
                actor=actor,
                created_at=at(t),
            ),
            unique=("run_id", "key"),
        )


BUILD_ARGS = {"command": ["g++", "-O3", "-fopenmp", "-shared", "kernel.cpp", "-o", "kernel.so"], "timeout_s": 120}
BUILD_REASON = (
    "rule exec#1 (long builds) needs human approval: a build over 30 s holds a sandbox for long; a human decides"
)


def passed_payload(run_id: str) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "kind": "kernel",
        "passed": True,
        "outcome": "pass",
        "reasons": [],
        "checks": [
            {"name": "loads", "passed": True, "detail": "ModelNew builds and loads"},
            {"name": "correctness", "passed": True, "detail": "max abs error 2.4e-07 over 5 held-out inputs"},
            {"name": "speed", "passed": True, "detail": "1.84x eager, 1.21x compile"},
        ],
        "metrics": {
            "speedup_vs_eager": 1.84,
            "speedup_vs_compile": 1.21,
            "max_abs_error": 2.4e-07,
            "time_candidate_s": 0.00131,
        },
        "headline": {"name": "speedup vs eager", "value": 1.84, "unit": "x"},
        "figures": {
            "title": "speedup (candidate vs baseline; | marks 1.0x)",
            "unit": "x",
            "mark": 1.0,
            "bars": [
                {"label": "eager", "value": 1.84, "metric": "speedup_vs_eager"},
                {"label": "compile", "value": 1.21, "metric": "speedup_vs_compile"},
            ],
        },
        "criteria": "kernel-default",
        "criteria_hash": "c" * 64,
        "submission": "submit-1",
        "submission_hash": "5" * 64,
        "task_hash": "7" * 64,
        "candidate_hash": "9" * 64,
        "verifier_version": "0.1.0",
        "verified_at": "2025-03-14T09:01:35Z",
    }


def failed_payload(run_id: str) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "kind": "kernel",
        "passed": False,
        "outcome": "fail",
        "headline": None,
        "figures": None,
        "reasons": ["correctness: max abs error 0.31 on held-out input 2 (limit 1e-05)"],
        "checks": [
            {"name": "loads", "passed": True, "detail": "ModelNew builds and loads"},
            {"name": "correctness", "passed": False, "detail": "max abs error 0.31 on held-out input 2 (limit 1e-05)"},
        ],
        "metrics": {"max_abs_error": 0.31},
        "criteria": "kernel-default",
        "criteria_hash": "c" * 64,
        "submission": "submit-1",
        "submission_hash": "6" * 64,
        "verifier_version": "0.1.0",
        "verified_at": "2025-03-14T09:17:00Z",
    }


def fill(ledger: Ledger, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    w = Writer(ledger)
    key = fixed_key(home)
    # The chain stamps a verdict with the time it is appended; fixed here so row hashes are too.
    clock = iter(at(s) for s in (95, 16 * 60))
    with monkeypatch.context() as mp:
        mp.setattr("assay.ledger.store.utcnow", lambda: next(clock))
        _fill(w, ledger, key)


def _fill(w: Writer, ledger: Ledger, key: Ed25519PrivateKey) -> None:
    from assay.verifiers.signing import sign

    w.run(
        PASSED,
        "/work/examples/kernel/softmax.toml",
        "passed",
        start=0,
        end=95,
        used={"steps": 4, "requests": 4, "tokens": 0, "seconds": 94.0},
    )
    w.call(
        PASSED,
        "1:c0",
        "write_file",
        {"path": "kernel.cpp", "content": "[[SECRET:api_key_1]] ..."},
        2,
        rule="write_file#0",
    )
    w.step(PASSED, 1, 2.5, ["write_file"])
    w.call(PASSED, "2:c0", "build", {"path": "kernel.cpp"}, 3, ms=14200, rule="build#0", text="built kernel.so")
    w.step(PASSED, 2, 18, ["build"])
    w.call(PASSED, "3:c0", "quick_test", {}, 19, ms=3100, rule="quick_test#0", text="max abs error 2.4e-07")
    w.call(
        PASSED,
        "3:c1",
        "exec",
        {"command": ["curl", "example.com"]},
        23,
        decision="deny",
        rule="exec#default",
        text="denied: exec#default: no rule admits this call",
        error="denied: exec#default",
    )
    w.step(PASSED, 3, 24, ["quick_test", "exec"])
    w.call(PASSED, "4:c0", "submit", {"entry": "kernel.py"}, 25, rule="submit#0", text="submitted submit-1")
    w.step(PASSED, 4, 26, ["submit"], final="submitted a cpp softmax, 1.8x over eager")
    ledger.append_verdict(PASSED, passed_payload(PASSED), sign(key, passed_payload(PASSED)), key="verdict:submit-1")

    w.run(
        FAILED,
        "/work/examples/kernel/layernorm.toml",
        "failed",
        start=15 * 60,
        end=15 * 60 + 62,
        used={"steps": 3, "requests": 3, "tokens": 0, "seconds": 61.0},
        error="submitted",
    )
    w.call(FAILED, "1:c0", "build", {"path": "kernel.cpp"}, 15 * 60 + 5, ms=9000, rule="build#0")
    w.step(FAILED, 1, 15 * 60 + 15, ["build"])
    ledger.append_verdict(FAILED, failed_payload(FAILED), sign(key, failed_payload(FAILED)), key="verdict:submit-1")

    w.run(
        WAITING,
        "/work/examples/kernel/softmax.toml",
        "waiting_approval",
        start=30 * 60,
        used={"steps": 2, "requests": 2, "tokens": 0, "seconds": 40.0},
    )
    w.call(WAITING, "1:c0", "write_file", {"path": "kernel.cpp", "content": "..."}, 30 * 60 + 3, rule="write_file#0")
    w.step(WAITING, 1, 30 * 60 + 4, ["write_file"])
    # What the gateway writes when the manifest says `approve`: the decision, the refusal the
    # agent reads, and the request a person answers.
    w.decision(WAITING, "2:c0", "exec", 30 * 60 + 6, "approve", "exec#1", BUILD_REASON, fingerprint="fp-build")
    w.approval(
        WAITING, "approval-1", "requested", 30 * 60 + 6, request_key="approval-1", args=BUILD_ARGS, reason=BUILD_REASON
    )
    w.call(
        WAITING,
        "2:c0",
        "exec",
        BUILD_ARGS,
        30 * 60 + 6,
        ms=2,
        decision="approve",
        rule="exec#1",
        text="needs human approval (...); approval approval-1 is pending",
        error="needs human approval",
    )
    w.step(WAITING, 2, 30 * 60 + 7, ["exec"])

    w.run(
        RUNNING,
        "/work/examples/kernel/gelu.toml",
        "running",
        start=45 * 60,
        brain="openai-chat:gpt-4o",
        used={"steps": 1, "requests": 1, "tokens": 5312, "seconds": 9.0},
    )
    w.call(RUNNING, "1:c0", "read_file", {"path": "task.py"}, 45 * 60 + 3, rule="read_file#0", text="import torch ...")
    w.step(RUNNING, 1, 45 * 60 + 4, ["read_file"])


@pytest.fixture
def ledger(_isolated_home):
    with Ledger.open() as led:
        yield led


@pytest.fixture
def filled(ledger, _isolated_home, monkeypatch):
    fill(ledger, _isolated_home, monkeypatch)
    return ledger


async def until(pilot, check, timeout: float = 10.0, what: str = "condition") -> None:
    """Let the app run until `check()` holds; the app polls the ledger on its own clock."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception:  # noqa: BLE001 - widgets may not be mounted yet
            pass
        await pilot.pause(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def text(app, selector: str) -> str:
    """What a widget of the current screen draws, as plain text (rich tables and all)."""
    from textual.geometry import Region

    w = app.screen.query_one(selector)
    return "\n".join(strip.text for strip in w.render_lines(Region(0, 0, w.size.width, w.size.height)))


async def see(pilot, selector: str, *needles: str, timeout: float = 10.0) -> None:
    """Wait until the widget draws every needle: a widget sized for its old content shows
    its new content a frame later."""
    await until(
        pilot, lambda: all(n in text(pilot.app, selector) for n in needles), timeout, f"{needles} in {selector}"
    )


async def settle(pilot) -> None:
    """Every read in flight done and drawn: what a snapshot needs."""
    for _ in range(3):
        await pilot.pause()
        await pilot.app.workers.wait_for_complete()
        await asyncio.sleep(0)
    await pilot.pause()


@pytest.fixture
def tui():
    """The fixed ids, times and helpers, for tests (conftest modules cannot be imported)."""
    import types

    return types.SimpleNamespace(
        T0=T0,
        NOW=NOW,
        PASSED=PASSED,
        FAILED=FAILED,
        WAITING=WAITING,
        RUNNING=RUNNING,
        at=at,
        Writer=Writer,
        BUILD_ARGS=BUILD_ARGS,
        BUILD_REASON=BUILD_REASON,
        passed_payload=passed_payload,
        failed_payload=failed_payload,
        fixed_key=fixed_key,
        until=until,
        settle=settle,
        text=text,
        see=see,
    )


@pytest.fixture
def anyio_backend():
    return "asyncio"  # Textual runs on asyncio
