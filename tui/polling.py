"""The one way a screen learns anything: it polls the ledger, off the UI thread.

A screen says what to read (`read`, in a worker thread) and how to lay it out (`show`, on
the UI thread). Nothing the screen shows is kept anywhere but in the widgets: the next poll
rebuilds it from the ledger, so a run written by another process, an approval given with
`assay approve`, or a verdict appended by the verifier all appear the same way.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from textual.css.query import NoMatches
from textual.screen import Screen
from textual.timer import Timer
from textual.worker import get_current_worker

if TYPE_CHECKING:
    from assay.ledger import Ledger
    from assay.tui.app import AssayApp


class PollingScreen(Screen):
    app: AssayApp

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._timer: Timer | None = None
        # A read still under way when the timer fires again is not doubled: on a slow or big
        # ledger reads would otherwise pile up behind each other.
        self._reading = False

    def read(self, ledger: Ledger, now: datetime) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def show(self, view: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def on_mount(self) -> None:
        # Textual calls every on_mount along the class's MRO: subclasses add their own
        # without calling this one.
        self._timer = self.set_interval(self.app.poll_s, self.poll)
        self.poll()

    def on_screen_suspend(self) -> None:
        # A screen under another one need not read: it polls again when it is back on top.
        if self._timer is not None:
            self._timer.pause()

    def on_screen_resume(self) -> None:
        if self._timer is not None:
            self._timer.resume()
        self.poll()

    def poll(self) -> None:
        if self._reading:
            return
        self._reading = True
        self.run_worker(self._read, thread=True, group="poll", exit_on_error=False)

    def _read(self) -> None:
        try:
            try:
                view = self.read(self.app.ledger(), self.app.clock())
            except Exception as exc:  # noqa: BLE001 - every failure becomes a notification
                self.app.call_from_thread(self.app.report, exc, repeat=False)
                return
            if not get_current_worker().is_cancelled:
                self.app.call_from_thread(self._show, view)
        except RuntimeError:
            pass  # the app closed while this read was under way
        finally:
            self._reading = False

    def _show(self, view: Any) -> None:
        if not self.is_attached:
            return
        try:
            self.show(view)
        except NoMatches:
            pass  # the screen is being taken down
        except Exception as exc:  # noqa: BLE001 - a view that cannot be drawn is reported, not fatal
            self.app.report(exc, repeat=False)
