"""What the screens are given to show, read from a ledger written the way the runtime writes it."""

from __future__ import annotations

from assay.ledger import RunStatus, utcnow
from assay.tui import views


def test_runs_carry_verdict_headline_and_duration(filled, tui):
    rows = {r.id: r for r in views.run_rows(filled, tui.NOW)}
    assert [r.id for r in views.arrange(list(rows.values()), "", 0)] == [
        tui.RUNNING,
        tui.WAITING,
        tui.FAILED,
        tui.PASSED,
    ]
    assert (rows[tui.PASSED].verdict, rows[tui.PASSED].headline, rows[tui.PASSED].duration_s) == ("PASS", "1.84x", 95.0)
    assert (rows[tui.FAILED].verdict, rows[tui.FAILED].headline) == ("FAIL", None)
    assert rows[tui.WAITING].verdict == ""
    # A run still going is timed up to now.
    assert rows[tui.RUNNING].duration_s == (tui.NOW - tui.at(45 * 60)).total_seconds()


def test_the_word_is_the_signed_outcome(tui):
    """The screens read the outcome the verifier signed; they judge no metric themselves."""
    busy = tui.passed_payload("r")
    busy.update(
        passed=False,
        outcome="inconclusive",
        reasons=["speed: 0.94x eager; inconclusive: the machine was too busy to time"],
    )
    busy["checks"][-1].update(passed=False)
    assert views.verdict_word(busy) == "INCONCLUSIVE"
    busy["outcome"] = "fail"
    assert views.verdict_word(busy) == "FAIL"
    # A verdict signed before outcomes existed reads by its `passed`.
    legacy = tui.passed_payload("r")
    del legacy["outcome"]
    assert views.verdict_word(legacy) == "PASS"
    assert views.verdict_word(tui.failed_payload("r")) == "FAIL"
    assert views.verdict_word(tui.passed_payload("r")) == "PASS"


def test_filter_words_and_sort_orders(filled, tui):
    rows = views.run_rows(filled, tui.NOW)
    assert [r.id for r in views.arrange(rows, "softmax", 0)] == [tui.WAITING, tui.PASSED]
    assert [r.id for r in views.arrange(rows, "softmax pass", 0)] == [tui.PASSED]
    assert [r.id for r in views.arrange(rows, "GPT-4O", 0)] == [tui.RUNNING]
    assert views.arrange(rows, "nothing-like-this", 0) == []
    assert [r.id for r in views.arrange(rows, "", 1)][0] == tui.PASSED  # oldest
    assert [r.id for r in views.arrange(rows, "", 4)][:2] == [
        tui.WAITING,
        tui.RUNNING,
    ]  # longest: unfinished, timed to now


def test_live_view_merges_decisions_calls_steps_and_approvals(filled, tui):
    v = views.live_view(filled, tui.WAITING, tui.NOW)
    assert [e.key for e in v.events] == [
        "call:1:c0",
        "step:step-1",
        "call:2:c0",
        "approval:approval-1",
        "step:step-2",
    ]
    gated = next(e for e in v.events if e.key == "call:2:c0")
    assert gated.decision == "ask #1"
    assert "needs human approval" in gated.detail and '"g++"' in gated.detail
    assert v.pending["id"] == "approval-1"
    assert v.activity is not None and not v.activity.busy and "approval-1" in v.activity.label
    assert v.steps_used == 2 and v.steps_budget == 40


def test_a_call_in_flight_shows_as_running_until_recorded(ledger, tui):
    run = ledger.create_run(job="softmax.toml", kind="kernel", brain="playbook", budget={"steps": 40})
    ledger.set_run_status(run.id, RunStatus.running)
    ledger.record_policy_decision(run.id, key="1:c0", tool="build", decision="allow", detail={"rule": "build#0"})
    v = views.live_view(ledger, run.id, utcnow())
    (e,) = v.events
    assert e.summary.startswith("running") and e.decision == "allow #0"
    assert v.activity.busy and "build 1:c0 running" in v.activity.label
    ledger.record_tool_call(
        run.id, key="1:c0", tool="build", arguments={"path": "k.cpp"}, decision="allow", result="built"
    )
    (e,) = views.live_view(ledger, run.id, tui.NOW).events
    assert e.summary.startswith("ok ") and '"k.cpp"' in e.detail


def test_pending_approvals_say_what_and_why(filled, tui):
    (p,) = views.pending_approvals(filled)
    assert (p.run_id, p.id, p.tool, p.rule) == (tui.WAITING, "approval-1", "exec", "exec#1")
    assert p.what == "g++ -O3 -fopenmp -shared kernel.cpp -o kernel.so  (timeout 120 s)"
    assert "long builds" in p.reason
    filled.record_approval(
        tui.WAITING,
        key="approval-1:denied",
        event="denied",
        request_key="approval-1",
        fingerprint="fp-build",
        tool="exec",
        actor="cli",
    )
    assert views.pending_approvals(filled) == []


def test_verdict_view_checks_signature_and_chain(filled, tui, _isolated_home):
    v = views.verdict_view(filled, tui.PASSED, _isolated_home)
    assert (
        v.signature == "valid"
        and v.payload["passed"]
        and [(b.label, b.value) for b in v.figures.bars] == [("eager", 1.84), ("compile", 1.21)]
    )
    chain = views.chain_status(filled, _isolated_home)
    assert chain.ok and views.chain_position(chain, v.verdict.id) == "in an intact chain"
    # Another machine, without this verifier's key: the screen must not call the verdict valid.
    other = _isolated_home / "elsewhere"
    assert views.verdict_view(filled, tui.PASSED, other).signature == "no-key"
    assert views.verdict_view(filled, tui.WAITING, _isolated_home).verdict is None
