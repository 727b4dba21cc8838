"""The Live run screen: a run's steps, tool calls (with the policy decision and its rule)
and approval events as the ledger receives them, its budget, and what it is busy with."""

from __future__ import annotations

from datetime import datetime

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import DataTable, Footer, Header, Label, ProgressBar, Static

from assay.ledger import Ledger
from assay.tui import views
from assay.tui.polling import PollingScreen
from assay.tui.runs import status_text

COLUMNS = (("time", 6), ("tool", 15), ("decision", 16), ("summary", None))
# Fixed columns plus DataTable's one-cell padding each side and the scrollbar.
FIXED = sum(w or 0 for _, w in COLUMNS) + 2 * len(COLUMNS) + 2


def decision_text(decision: str) -> Text:
    word = decision.split(" ", 1)[0]
    style = {
        "allow": "green",
        "deny": "red",
        "ask": "yellow",
        "requested": "yellow",
        "approved": "green",
        "denied": "red",
        "used": "dim",
    }.get(word, "")
    return Text(decision, style=style)


class LiveScreen(PollingScreen):
    SUB_TITLE = "live run"
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("a", "approvals", "Approvals"),
        Binding("v", "verdict", "Verdict"),
        Binding("R", "resume", "Resume"),
        Binding("f", "follow", "Follow"),
    ]

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id
        self._rows: dict[str, views.Event] = {}
        # Follow the newest line (like tail -f) until the person moves the cursor up.
        self._follow = True
        self._width = 0

    def compose(self) -> ComposeResult:
        yield Header(icon="")
        yield Static(f"run {self.run_id}", id="live-summary")
        with Horizontal(id="live-budget"):
            yield Label("steps", id="steps-label")
            yield ProgressBar(id="steps-bar", show_eta=False, show_percentage=False)
            yield Label("", id="budget-label")
        with Horizontal(id="live-activity"):
            yield Label("", id="activity-label")
            yield ProgressBar(id="activity-bar", show_eta=False, show_percentage=False)
        table = DataTable(id="timeline", cursor_type="row")
        for name, width in COLUMNS:
            table.add_column(name, width=width, key=name)
        yield table
        with VerticalScroll(id="live-detail"):
            yield Static("", id="detail")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#timeline", DataTable).focus()
        self.query_one("#live-activity").display = False

    def read(self, ledger: Ledger, now: datetime) -> views.LiveView | None:
        return views.live_view(ledger, self.run_id, now)

    def show(self, view: views.LiveView | None) -> None:
        if view is None:
            self.query_one("#live-summary", Static).update(f"no run {self.run_id} in the ledger")
            return
        run = view.run
        head = Text.assemble(
            ("run ", "dim"),
            (run.id, "bold"),
            "  ",
            status_text(run.status),
            "  ",
            (views.seconds(view.elapsed_s), ""),
            "\n",
            (f"{views.short_job(run.job)} · {run.kind} · brain {run.brain}", ""),
            (f" · {view.submissions} submission{'s' * (view.submissions != 1)}" if view.submissions else "", ""),
            (f" · {view.verdicts} verdict{'s' * (view.verdicts != 1)} (v)" if view.verdicts else "", "green"),
            (f"\n{run.error}" if run.error else "", "red"),
        )
        self.query_one("#live-summary", Static).update(head)
        bar = self.query_one("#steps-bar", ProgressBar)
        budget = view.steps_budget or max(view.steps_used, 1)
        bar.update(total=budget, progress=min(view.steps_used, budget))
        self.query_one("#steps-label", Label).update(f"steps {view.steps_used}/{view.steps_budget or '-'}")
        self.query_one("#budget-label", Label).update(view.budget_line)
        self._show_activity(view.activity)
        self._show_events(view.events)

    def _show_activity(self, activity: views.Activity | None) -> None:
        box = self.query_one("#live-activity")
        box.display = activity is not None
        if activity is None:
            return
        self.query_one("#activity-label", Label).update(f"{activity.label} {views.seconds(activity.elapsed)}")
        bar = self.query_one("#activity-bar", ProgressBar)
        bar.display = activity.busy
        # No total: the bar moves to say work is under way; no tool reports how far it is
        # through the ledger, so a percentage here would be invented.
        bar.update(total=None)

    def _cells(self, e: views.Event, width: int) -> tuple:
        tool = (
            Text(e.tool, style="bold")
            if e.what == "step"
            else Text(e.tool, style="yellow" if e.what == "approval" else "")
        )
        return (
            views.offset(e.at),
            views.one_line(tool, 15),
            decision_text(e.decision),
            views.one_line(e.summary, width),
        )

    def _show_events(self, events: list[views.Event]) -> None:
        table = self.query_one("#timeline", DataTable)
        width = max(16, table.size.width - FIXED)
        if width != self._width:
            # The summary column is cut to the table's width (no sideways scrolling at 80
            # columns); a new width redraws every line.
            table.clear()
            self._rows = {}
            self._width = width
        at_end = table.row_count == 0 or table.cursor_row >= table.row_count - 1
        for e in events:
            old = self._rows.get(e.key)
            if old is None:
                table.add_row(*self._cells(e, width), key=e.key)
            elif old != e:
                for (column, _), value in zip(COLUMNS, self._cells(e, width), strict=False):
                    # update_width: a call's line grows from "running 3s" to its result.
                    table.update_cell(e.key, column, value, update_width=True)
            self._rows[e.key] = e
        if self._follow and at_end and table.row_count:
            table.move_cursor(row=table.row_count - 1, animate=False)
        self._show_detail()

    def on_resize(self) -> None:
        self.poll()

    def _show_detail(self) -> None:
        table = self.query_one("#timeline", DataTable)
        detail = self.query_one("#detail", Static)
        if table.row_count == 0:
            detail.update(
                Text("nothing recorded yet: steps and tool calls appear here as the run makes them", style="dim")
            )
            return
        key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        e = self._rows.get(key.value or "")
        detail.update(Text(e.detail) if e else "")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        table = self.query_one("#timeline", DataTable)
        # Moving up stops following; moving back to the last line starts again.
        self._follow = event.cursor_row >= table.row_count - 1
        self._show_detail()

    def action_follow(self) -> None:
        table = self.query_one("#timeline", DataTable)
        self._follow = True
        if table.row_count:
            table.move_cursor(row=table.row_count - 1, animate=False)

    def action_approvals(self) -> None:
        from assay.tui.approvals import ApprovalsScreen

        self.app.push_screen(ApprovalsScreen(self.run_id))

    def action_verdict(self) -> None:
        from assay.tui.verdict import VerdictScreen

        self.app.push_screen(VerdictScreen(self.run_id))

    def action_resume(self) -> None:
        # A finished run resumes to its verdict at once; the runner says so, not this screen.
        self.app.resume(self.run_id)
