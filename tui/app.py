"""`assay tui`: the door for an engineer watching agents live.

The app holds the ledger connection, the runs this process drives, and the way errors are
shown; the screens (runs, live run, approvals, verdict) read the ledger for everything else.

Runs started or resumed here run on daemon threads under async Textual workers rather than
on Textual's thread workers: those live in the event loop's default executor, which the
loop waits for on exit, so quitting would hang until a ten-minute run ended. A daemon
thread instead dies with the app, exactly as a killed `assay run` would, and the run
resumes from its checkpoint (`R` here, or `assay resume RUN`).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from textual.app import App
from textual.binding import Binding
from textual.notifications import SeverityLevel

from assay.errors import UserError
from assay.ledger import Ledger, RunStatus, utcnow

# How long a decided approval may stay unanswered before the TUI says nobody drives the run.
PICKUP_S = 3.0
# A second `q` within this long quits even though runs are being driven here.
QUIT_CONFIRM_S = 5.0


def _in_daemon_thread(fn: Callable[[], Any]) -> asyncio.Future[Any]:
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[Any] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if not fut.done():
            (fut.set_result if ok else fut.set_exception)(value)

    def target() -> None:
        try:
            result, ok = fn(), True
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting worker
            result, ok = exc, False
        try:
            loop.call_soon_threadsafe(settle, ok, result)
        except RuntimeError:
            pass  # the app has closed; the run stays in the ledger as far as it got

    threading.Thread(target=target, daemon=True, name="assay-run").start()
    return fut


def _warm_up() -> None:
    # The approvals and live views ask the runtime what is pending, and the runtime brings
    # LangGraph and pydantic-ai with it: seconds of imports, paid here at start-up, off the
    # UI thread, instead of when a person first presses `a`.
    import assay.agents.workflow  # noqa: F401


def message(exc: BaseException) -> str:
    """What a person sees: a UserError as written, anything else named by its type."""
    if isinstance(exc, UserError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class AssayApp(App[None]):
    TITLE = "assay"
    CSS_PATH = "app.tcss"
    # The command palette's footer entry would crowd out real bindings at 80 columns.
    ENABLE_COMMAND_PALETTE = False
    BINDINGS = [Binding("q", "quit_app", "Quit", priority=False)]

    def __init__(
        self,
        *,
        poll_s: float = 1.0,
        clock: Callable[[], datetime] = utcnow,
        start: Callable[..., Any] | None = None,
        resume: Callable[..., Any] | None = None,
        job_hint: str | None = None,
        children_log: Path | None = None,
    ) -> None:
        super().__init__()
        # Where the processes a run starts write their stderr while the TUI runs (terminal.py).
        self.children_log = children_log
        self.poll_s = poll_s
        self.clock = clock
        self._start = start
        self._resume = resume
        self.job_hint = job_hint
        self._ledger: Ledger | None = None
        self._ledger_lock = threading.Lock()
        # Runs a thread of this process is driving: not ledger data but who is holding the
        # wheel, so an approval here knows the run will go on by itself.
        self.driven: set[str] = set()
        self._last_error: str | None = None
        self._quit_armed = 0.0

    def on_mount(self) -> None:
        self.run_worker(_warm_up, thread=True, group="warm-up", exit_on_error=False)

    def get_default_screen(self):
        from assay.tui.runs import RunsScreen

        return RunsScreen()

    # --- the ledger (called from worker threads) ------------------------------------------

    def ledger(self) -> Ledger:
        with self._ledger_lock:
            if self._ledger is None:
                # A ledger is created on first use, as the first run would create it anyway.
                self._ledger = Ledger.open()
            return self._ledger

    @property
    def home(self) -> Path:
        from assay.settings import settings

        return settings().home

    def ledger_label(self) -> str:
        """Where the ledger is, with ASSAY_HOME abbreviated so the line fits (and is stable)."""
        from assay.settings import settings

        s = settings()
        if s.ledger_url:
            from assay.ledger.schema import hide_password

            return hide_password(s.ledger_url)
        return "$ASSAY_HOME/ledger.db"

    def on_unmount(self) -> None:
        with self._ledger_lock:
            if self._ledger is not None and not self.driven:
                self._ledger.close()
                self._ledger = None

    # --- errors -----------------------------------------------------------------------------

    def report(self, exc: BaseException, *, repeat: bool = True, timeout: float = 10) -> None:
        """Every failure ends here as a notification. Polls pass repeat=False so a ledger
        that stays unreachable says so once, not every second."""
        text = message(exc)
        if not repeat and text == self._last_error:
            return
        self._last_error = text
        self.notify(text, title="error", severity="error", timeout=timeout, markup=False)

    def say(self, text: str, *, severity: SeverityLevel = "information", timeout: float = 5) -> None:
        self.notify(text, severity=severity, timeout=timeout, markup=False)

    # --- driving runs -------------------------------------------------------------------------

    def _runner_event(self, run_ids: list[str]) -> Callable[[str, dict[str, Any]], None]:
        """The runner's on_event, called on the run's thread; steps and verification need no
        relay (the screens read them from the ledger), a new run and an approval do."""

        def on_event(kind: str, data: dict[str, Any]) -> None:
            try:
                if kind == "run":
                    run_ids.append(data["run_id"])
                    self.call_from_thread(self._run_started, data["run_id"])
                elif kind == "approval":
                    rid = run_ids[-1] if run_ids else "?"
                    self.call_from_thread(
                        self.say,
                        f"run {rid} needs approval {data.get('id')} for {data.get('tool')}: press a",
                        severity="warning",
                        timeout=15,
                    )
            except RuntimeError:
                pass  # the app closed under a running run

        return on_event

    def _run_started(self, run_id: str) -> None:
        from assay.tui.live import LiveScreen
        from assay.tui.runs import RunsScreen

        self.driven.add(run_id)
        self.say(f"run {run_id} started")
        if isinstance(self.screen, RunsScreen):
            self.push_screen(LiveScreen(run_id))

    def start_job(self, path: str, brain: str | None = None) -> None:
        self.run_worker(self._start_job(path, brain), group="runs", exit_on_error=False, name=f"start {path}")

    async def _start_job(self, path: str, brain: str | None) -> None:
        from assay.agents.job import load_job

        run_ids: list[str] = []

        def work() -> Any:
            job = load_job(path)
            if brain:
                from assay.agents.brains import parse_brain

                parse_brain(brain)
                job = job.model_copy(update={"brain": brain})
            if self._start is None:
                from assay.agents.runner import start_run
            else:
                start_run = self._start
            return start_run(job, wait=True, on_event=self._runner_event(run_ids), ledger=self.ledger())

        await self._drive(work, run_ids)

    def resume(self, run_id: str) -> None:
        if run_id in self.driven:
            self.say(f"run {run_id} is already being driven here")
            return
        self.driven.add(run_id)
        self.run_worker(self._resume_run(run_id), group="runs", exit_on_error=False, name=f"resume {run_id}")

    async def _resume_run(self, run_id: str) -> None:
        run_ids = [run_id]

        def work() -> Any:
            if self._resume is None:
                from assay.agents.runner import resume_run
            else:
                resume_run = self._resume
            return resume_run(run_id, wait=True, on_event=self._runner_event(run_ids), ledger=self.ledger())

        self.say(f"resuming run {run_id}")
        await self._drive(work, run_ids)

    async def _drive(self, work: Callable[[], Any], run_ids: list[str]) -> None:
        from assay.tui import terminal

        offset = terminal.size(self.children_log)
        try:
            outcome = await _in_daemon_thread(work)
        except Exception as exc:  # noqa: BLE001 - a failed run is a notification, not a crash
            # A tool server that refuses to start (an unsigned manifest, say) says why on its
            # stderr; the runner only sees the connection close.
            said = terminal.said_since(self.children_log, offset)
            if said and said not in str(exc):
                # The server's own line first: it names the cause and its fix, and a toast is narrow.
                why = exc.problem if isinstance(exc, UserError) else message(exc)
                exc = UserError(f"tool server said: {said}; {why}")
            # Stays up longer: a run that dies is worth reading in full.
            self.report(exc, timeout=60)
            outcome = None
        finally:
            self.driven.difference_update(run_ids)
        if outcome is not None:
            status = getattr(outcome, "status", "?")
            sev = "information" if status == RunStatus.passed.value else "warning"
            self.say(f"run {getattr(outcome, 'run_id', '?')} ended: {status}", severity=sev, timeout=10)

    # --- approvals ----------------------------------------------------------------------------

    def decide(self, run_id: str, approval_id: str, decision: str) -> None:
        self.run_worker(
            lambda: self._decide(run_id, approval_id, decision), thread=True, group="decide", exit_on_error=False
        )

    def _decide(self, run_id: str, approval_id: str, decision: str) -> None:
        from assay.agents.runner import decide_approval

        try:
            try:
                ledger = self.ledger()
                key = decide_approval(run_id, decision, approval_id=approval_id, actor="tui", ledger=ledger)
                before = ledger.get_run(run_id)
            except Exception as exc:  # noqa: BLE001
                self.call_from_thread(self.report, exc)
                return
            self.call_from_thread(self.say, f"{decision} {key} of run {run_id}")
            if run_id in self.driven or before is None or before.status != RunStatus.waiting_approval.value:
                return  # driven here, or the run has not paused yet: its driver will see it
            # A driver waiting on this run (here, `assay run`, another TUI) moves it on within
            # a second; if none does, the run's process is gone and someone must resume it.
            deadline = time.monotonic() + PICKUP_S
            while time.monotonic() < deadline:
                time.sleep(0.25)
                run = ledger.get_run(run_id)
                if run is None or run.status != RunStatus.waiting_approval.value or run_id in self.driven:
                    return
            self.call_from_thread(
                self.say,
                f"no process is driving run {run_id}: press R to resume it here",
                severity="warning",
                timeout=15,
            )
        except RuntimeError:
            pass

    # --- leaving ------------------------------------------------------------------------------

    def action_quit_app(self) -> None:
        if self.driven and time.monotonic() - self._quit_armed > QUIT_CONFIRM_S:
            self._quit_armed = time.monotonic()
            n = len(self.driven)
            self.say(
                f"{n} run{'s' * (n != 1)} driven here will stop and can resume later (R, or assay resume): press q again to quit",
                severity="warning",
                timeout=QUIT_CONFIRM_S,
            )
            return
        self.exit()
