"""The Verdict screen: what the verifier decided about a run, and whether to believe it
(the verifier's signature over the verdict, and the ledger's hash chain around it)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Footer, Header, Static

from assay.ledger import Ledger
from assay.reports.charts import figure_chart
from assay.tui import views
from assay.tui.polling import PollingScreen

SIGNATURE_WORDS = {
    "valid": ("valid", "green"),
    "invalid": ("INVALID: the verdict or its signature was changed", "bold red"),
    "unknown-key": ("signed by a key this machine does not hold", "yellow"),
    "no-key": ("cannot be checked: no verifier public key under ASSAY_HOME/keys", "yellow"),
    "-": ("-", "dim"),
}


def _scalar(v: Any) -> str | None:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (int, str)):
        return str(v)
    return None


class VerdictScreen(PollingScreen):
    SUB_TITLE = "verdict"
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("l", "live", "Live run"),
        Binding("c", "check_chain", "Check chain"),
    ]

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id
        self._verdict_id: int | None = None
        self._chain: views.ChainStatus | None = None
        self._view: views.VerdictView | None = None

    def compose(self) -> ComposeResult:
        yield Header(icon="")
        with VerticalScroll(id="verdict-body"):
            yield Static(f"run {self.run_id}", id="verdict-result")
            yield Static("", id="verdict-seal")
            yield Static("", id="verdict-checks")
            yield Static("", id="verdict-chart")
            yield Static("", id="verdict-metrics")
            yield Static("", id="verdict-trust")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#verdict-body").focus()

    def read(self, ledger: Ledger, now: datetime) -> views.VerdictView | None:
        return views.verdict_view(ledger, self.run_id, self.app.home)

    def show(self, view: views.VerdictView | None) -> None:
        self._view = view
        result = self.query_one("#verdict-result", Static)
        if view is None:
            result.update(f"no run {self.run_id} in the ledger")
            return
        v = view.verdict
        if v is None:
            result.update(
                Text.assemble(
                    ("no verdict yet", "bold"),
                    f" for run {self.run_id} ({view.run.status})\n",
                    ("only the verifier writes verdicts; it runs when the agent submits or its budget ends", "dim"),
                )
            )
            return
        p = view.payload
        passed = bool(p.get("passed"))
        word = views.verdict_word(p)
        head = Text.assemble(
            (
                {"PASS": " PASS ", "INCONCLUSIVE": " FAIL (inconclusive: too busy to time) "}.get(word, " FAIL "),
                {"PASS": "bold white on green", "INCONCLUSIVE": "bold black on yellow"}.get(word, "bold white on red"),
            ),
            f"  run {view.run.id} · verdict #{v.id}",
            (f" (newest of {view.count})" if view.count > 1 else "", "dim"),
            f" · criteria {p.get('criteria', '-')}\n",
        )
        reasons = p.get("reasons") or []
        for r in reasons:
            head.append(f"  - {r}\n", style="red" if not passed else "")
        if not reasons:
            head.append("  every check passed\n" if passed else "  no reason given\n", style="dim")
        result.update(head)
        checks = self.query_one("#verdict-checks", Static)
        checks.display = bool(p.get("checks"))
        checks.update(self._checks(p.get("checks") or []))
        chart = self.query_one("#verdict-chart", Static)
        figures = view.figures
        chart.display = figures is not None
        if figures is not None:
            chart.update(figure_chart(figures, width=36))
        shown = {b.metric for b in figures.bars if b.metric} if figures is not None else set()
        metrics = self._metrics(p.get("metrics") or {}, shown)
        box = self.query_one("#verdict-metrics", Static)
        box.display = isinstance(metrics, Table)
        box.update(metrics)
        if v.id != self._verdict_id:
            # A new verdict (or the first): the chain is walked again, once, in a worker.
            self._verdict_id = v.id
            self.action_check_chain()
        self._trust()

    @staticmethod
    def _checks(checks: list[dict[str, Any]]) -> Table | Text:
        if not checks:
            return Text("")
        t = Table(title="checks", title_justify="left", box=None, pad_edge=False, show_header=False)
        t.add_column("check", no_wrap=True)
        t.add_column("result", no_wrap=True)
        t.add_column("detail", overflow="fold")
        for c in checks:
            ok = bool(c.get("passed"))
            t.add_row(
                str(c.get("name")),
                Text("pass" if ok else "FAIL", style="green" if ok else "bold red"),
                str(c.get("detail", "")),
            )
        return t

    @staticmethod
    def _metrics(metrics: dict[str, Any], charted: set[str]) -> Table | Text:
        rows = [(k, s) for k, v in sorted(metrics.items()) if k not in charted and (s := _scalar(v)) is not None]
        if not rows:
            return Text("")
        t = Table(title="metrics", title_justify="left", box=None, pad_edge=False, show_header=False)
        t.add_column("metric", no_wrap=True, style="dim")
        t.add_column("value", overflow="fold")
        for k, s in rows:
            t.add_row(k, s)
        return t

    def _trust(self) -> None:
        view = self._view
        if view is None or view.verdict is None:
            return
        p, v = view.payload, view.verdict
        words, style = SIGNATURE_WORDS.get(view.signature, (view.signature, "yellow"))
        # One line near the top says whether to believe the verdict; the evidence is below.
        if self._chain is None:
            chain = Text("chain: checking...", style="dim")
        else:
            chain = Text(
                "chain intact" if self._chain.ok else "chain TAMPERED", style="green" if self._chain.ok else "bold red"
            )
        self.query_one("#verdict-seal", Static).update(
            Text.assemble(
                ("signature ", "dim"),
                ("valid" if view.signature == "valid" else view.signature, style),
                ("  ·  ", "dim"),
                chain,
            )
        )
        t = Table.grid(padding=(0, 1))
        t.add_column(style="dim", no_wrap=True)
        t.add_column(overflow="fold")
        t.add_row("", Text("hashes are sha256", style="dim"))
        t.add_row("criteria", str(p.get("criteria_hash") or "-"))
        t.add_row("submission", str(p.get("submission_hash") or "-"))
        t.add_row("row hash", v.row_hash)
        t.add_row(
            "signature",
            Text.assemble(
                (words, style), (f" (verifier key {view.key_id})" if view.signature == "valid" else "", "dim")
            ),
        )
        if self._chain is None:
            t.add_row("chain", Text("checking...", style="dim"))
        else:
            ok = self._chain.ok
            t.add_row("chain", Text(views.chain_position(self._chain, v.id), style="green" if ok else "bold red"))
            t.add_row("", Text(self._chain.summary, style="" if ok else "red"))
        self.query_one("#verdict-trust", Static).update(t)

    def action_check_chain(self) -> None:
        self._chain = None
        self._trust()
        self.run_worker(self._walk_chain, thread=True, group="chain", exclusive=True, exit_on_error=False)

    def _walk_chain(self) -> None:
        try:
            try:
                status = views.chain_status(self.app.ledger(), self.app.home)
            except Exception as exc:  # noqa: BLE001
                self.app.call_from_thread(self.app.report, exc)
                return
            self.app.call_from_thread(self._chain_done, status)
        except RuntimeError:
            pass

    def _chain_done(self, status: views.ChainStatus) -> None:
        if self.is_attached:
            self._chain = status
            self._trust()

    def action_live(self) -> None:
        from assay.tui.live import LiveScreen

        self.app.push_screen(LiveScreen(self.run_id))
