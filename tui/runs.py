"""The Runs screen: every run in the ledger, newest first; filter, sort, open, start one."""

from __future__ import annotations

from datetime import datetime

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Header, Input, Static

from assay.ledger import Ledger
from assay.tui import views
from assay.tui.polling import PollingScreen

STATUS_STYLE = {
    "created": "dim",
    "running": "cyan",
    "waiting_approval": "bold yellow",
    "verifying": "magenta",
    "passed": "green",
    "failed": "red",
    "error": "bold red",
}
# Short enough for the column at 80 columns; the word stays recognisable.
STATUS_WORD = {"waiting_approval": "approval?"}


def status_text(status: str) -> Text:
    return Text(STATUS_WORD.get(status, status), style=STATUS_STYLE.get(status, ""))


def verdict_text(row: views.RunRow) -> Text:
    if not row.verdict:
        return Text("")
    t = Text(row.verdict, style={"PASS": "bold green", "INCONCLUSIVE": "bold yellow"}.get(row.verdict, "bold red"))
    if row.headline is not None:
        t.append(f" {row.headline}", style="")
    return t


class RunsScreen(PollingScreen):
    TITLE = "assay"
    SUB_TITLE = "runs"
    BINDINGS = [
        # priority: shown in the footer and answered even while the table has focus.
        Binding("enter", "open", "Open", priority=True),
        Binding("v", "verdict", "Verdict"),
        Binding("a", "approvals", "Approvals"),
        Binding("n", "new_run", "New run"),
        Binding("slash", "filter", "Filter"),
        Binding("s", "sort", "Sort"),
        Binding("R", "resume", "Resume"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._sort = 0
        self._rows: list[views.RunRow] = []
        self._shown: list[views.RunRow] | None = None

    def compose(self) -> ComposeResult:
        yield Header(icon="")
        yield Input(placeholder="/ filter: words match run, job, brain, status, verdict", id="filter")
        table = DataTable(id="runs", cursor_type="row", zebra_stripes=True)
        table.add_column("run", width=22, key="run")
        table.add_column("job", width=12, key="job")
        table.add_column("brain", width=8, key="brain")
        table.add_column("status", width=9, key="status")
        table.add_column("verdict", width=10, key="verdict")
        table.add_column("time", width=6, key="time")
        yield table
        yield Static(id="runs-status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#runs", DataTable).focus()

    # --- data ---------------------------------------------------------------------------

    def read(self, ledger: Ledger, now: datetime) -> list[views.RunRow]:
        return views.run_rows(ledger, now)

    def show(self, rows: list[views.RunRow]) -> None:
        self._rows = rows
        self._lay_out()

    def _lay_out(self) -> None:
        text = self.query_one("#filter", Input).value
        shown = views.arrange(self._rows, text, self._sort)
        table = self.query_one("#runs", DataTable)
        if shown != self._shown:
            keep = self.selected()
            table.clear()
            for r in shown:
                table.add_row(
                    r.id,
                    views.one_line(views.short_job(r.job), 12),
                    views.one_line(r.brain, 8),
                    status_text(r.status),
                    verdict_text(r),
                    views.seconds(r.duration_s),
                    key=r.id,
                )
            if keep is not None and keep in {r.id for r in shown}:
                table.move_cursor(row=table.get_row_index(keep), animate=False)
            self._shown = shown
        label = views.SORTS[self._sort % len(views.SORTS)][0]
        count = f"{len(shown)} of {len(self._rows)} runs" if text else f"{len(self._rows)} runs"
        waiting = sum(1 for r in self._rows if r.status == "waiting_approval")
        line = Text(f"{count} · sort: {label}")
        if waiting:
            line.append(f" · {waiting} waiting for approval (a)", style="bold yellow")
        if not self._rows:
            line.append(" · no runs yet: press n to start one")
        line.append(f" · {self.app.ledger_label()}")
        self.query_one("#runs-status", Static).update(line)

    def selected(self) -> str | None:
        table = self.query_one("#runs", DataTable)
        if table.row_count == 0:
            return None
        try:
            key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        except Exception:  # noqa: BLE001 - no cursor yet
            return None
        return key.value

    def _need_selected(self) -> str | None:
        rid = self.selected()
        if rid is None:
            self.app.say("no run selected")
        return rid

    # --- actions ------------------------------------------------------------------------

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    def action_open(self) -> None:
        from assay.tui.live import LiveScreen

        if self.query_one("#filter", Input).has_focus:
            self.query_one("#runs", DataTable).focus()
            return
        if (rid := self._need_selected()) is not None:
            self.app.push_screen(LiveScreen(rid))

    def action_verdict(self) -> None:
        from assay.tui.verdict import VerdictScreen

        if (rid := self._need_selected()) is not None:
            self.app.push_screen(VerdictScreen(rid))

    def action_approvals(self) -> None:
        from assay.tui.approvals import ApprovalsScreen

        self.app.push_screen(ApprovalsScreen(self.selected()))

    def action_new_run(self) -> None:
        from assay.tui.newrun import NewRunScreen

        def started(choice: tuple[str, str] | None) -> None:
            if choice is not None:
                self.app.start_job(*choice)

        self.app.push_screen(NewRunScreen(self.app.job_hint), started)

    def action_resume(self) -> None:
        if (rid := self._need_selected()) is not None:
            self.app.resume(rid)

    def action_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_sort(self) -> None:
        self._sort = (self._sort + 1) % len(views.SORTS)
        self._lay_out()

    def action_clear_filter(self) -> None:
        f = self.query_one("#filter", Input)
        if f.has_focus:
            self.query_one("#runs", DataTable).focus()
        elif f.value:
            f.value = ""

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self._lay_out()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            self.query_one("#runs", DataTable).focus()
