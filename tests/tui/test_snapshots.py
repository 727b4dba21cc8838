"""Each screen at 80x24 against a picture a person has looked at (pytest-textual-snapshot).

The ledger has fixed ids, times and a fixed verifier key, and the app a fixed clock, so the
pictures change only when the screens do. After an intended change, look at the report and
accept with `pytest tests/tui --snapshot-update`.
"""

from __future__ import annotations

import pytest

from assay.tui.app import AssayApp

SIZE = (80, 24)


@pytest.fixture
def app(filled, tui):
    # No second poll: the first read of each screen is the picture.
    return AssayApp(poll_s=3600, clock=lambda: tui.NOW)


def keys(tui, *press: str):
    async def run_before(pilot) -> None:
        await tui.settle(pilot)
        for k in press:
            await pilot.press(k)
            await tui.settle(pilot)

    return run_before


def test_runs_screen(snap_compare, app, tui):
    assert snap_compare(app, terminal_size=SIZE, run_before=keys(tui))


def test_live_run_screen_waiting_for_approval(snap_compare, app, tui):
    assert snap_compare(app, terminal_size=SIZE, run_before=keys(tui, "down", "enter", "up"))


def test_approvals_screen(snap_compare, app, tui):
    assert snap_compare(app, terminal_size=SIZE, run_before=keys(tui, "a"))


def test_verdict_screen(snap_compare, app, tui):
    assert snap_compare(app, terminal_size=SIZE, run_before=keys(tui, "ctrl+end", "v"))


def test_failed_verdict_screen(snap_compare, app, tui):
    assert snap_compare(app, terminal_size=SIZE, run_before=keys(tui, "down", "down", "v"))


def test_new_run_dialog(snap_compare, app, tui):
    app.job_hint = "examples/kernel/softmax.toml"
    assert snap_compare(app, terminal_size=SIZE, run_before=keys(tui, "n"))
