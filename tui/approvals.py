"""The Approvals screen: each call waiting for a person, what it would run and why the
manifest wants a person to decide; `y` approves, `n` denies, and the waiting run goes on."""

from __future__ import annotations

from datetime import datetime

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Footer, Header, Static

from assay.ledger import Ledger
from assay.tui import views
from assay.tui.polling import PollingScreen

# run, approval and tool columns, one cell of padding each side of all four, the scrollbar.
FIXED = 22 + 11 + 8 + 2 * 4 + 2


class ApprovalsScreen(PollingScreen):
    SUB_TITLE = "approvals"
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("y", "decide('approved')", "Approve"),
        Binding("n", "decide('denied')", "Deny"),
        Binding("enter", "open", "Open run", priority=True),
        Binding("R", "resume", "Resume"),
    ]

    def __init__(self, run_id: str | None = None) -> None:
        super().__init__()
        # The run the person came from: its approval is selected first.
        self.run_id = run_id
        self._pending: dict[str, views.PendingApproval] = {}
        self._order: list[str] = []
        self._width = 0
        # The run last decided on here: once decided, its approval leaves the list, and R
        # must still know which run to resume.
        self._decided: str | None = None

    def compose(self) -> ComposeResult:
        yield Header(icon="")
        table = DataTable(id="pending", cursor_type="row")
        table.add_column("run", width=22, key="run")
        table.add_column("approval", width=11, key="approval")
        table.add_column("tool", width=8, key="tool")
        table.add_column("would run", key="what")
        yield table
        with VerticalScroll(id="approval-detail"):
            yield Static("", id="explain")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#pending", DataTable).focus()

    def read(self, ledger: Ledger, now: datetime) -> list[views.PendingApproval]:
        return views.pending_approvals(ledger)

    @staticmethod
    def row_key(p: views.PendingApproval) -> str:
        return f"{p.run_id}/{p.id}"

    def show(self, pending: list[views.PendingApproval]) -> None:
        table = self.query_one("#pending", DataTable)
        order = [self.row_key(p) for p in pending]
        first = not self._order and table.row_count == 0
        # "would run" is cut to the table's width: no sideways scrolling at 80 columns.
        width = max(16, table.size.width - FIXED)
        if order != self._order or width != self._width:
            keep = self.selected()
            table.clear()
            for p in pending:
                table.add_row(p.run_id, p.id, p.tool, views.one_line(p.what, width), key=self.row_key(p))
            self._width = width
            target = keep if keep in order else None
            if first and self.run_id is not None:
                target = next((k for k in order if k.startswith(self.run_id + "/")), target)
            if target is not None:
                table.move_cursor(row=order.index(target), animate=False)
            self._order = order
        self._pending = {self.row_key(p): p for p in pending}
        self._explain()

    def selected(self) -> str | None:
        table = self.query_one("#pending", DataTable)
        if table.row_count == 0:
            return None
        key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        return key.value

    def _explain(self) -> None:
        out = self.query_one("#explain", Static)
        key = self.selected()
        p = self._pending.get(key or "")
        if p is None:
            out.update(Text("No call is waiting for approval.", style="dim"))
            return
        t = Table.grid(padding=(0, 1))
        t.add_column(style="bold", no_wrap=True)
        t.add_column(overflow="fold", ratio=1)
        t.add_row("would run", Text(f"{p.tool}: {p.what}", style="bold"))
        t.add_row("why", p.reason or "the manifest asks a person to decide")
        if p.rule:
            t.add_row("rule", p.rule)
        t.add_row("run", f"{p.run_id} ({views.short_job(p.job)}, {p.run_status})")
        t.add_row("asked", f"{p.asked_at:%Y-%m-%d %H:%M:%S} UTC")
        t.add_row("arguments", Text(views.pretty(p.arguments)))
        t.add_row("", Text("redacted, as the gateway recorded them; y approves exactly these, n denies", style="dim"))
        out.update(t)

    def on_resize(self) -> None:
        self.poll()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._explain()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    def action_decide(self, decision: str) -> None:
        p = self._pending.get(self.selected() or "")
        if p is None:
            self.app.say("no approval selected")
            return
        self._decided = p.run_id
        self.app.decide(p.run_id, p.id, decision)

    def action_open(self) -> None:
        from assay.tui.live import LiveScreen

        p = self._pending.get(self.selected() or "")
        if p is not None:
            self.app.push_screen(LiveScreen(p.run_id))

    def action_resume(self) -> None:
        p = self._pending.get(self.selected() or "")
        run_id = p.run_id if p is not None else (self._decided or self.run_id)
        if run_id is None:
            self.app.say("no run to resume here")
            return
        self.app.resume(run_id)
