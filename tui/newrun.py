"""Start a run: a job file (and, if wanted, another brain). The job is read and validated
when the run starts, in a worker; a bad file comes back as the job loader's own message."""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Input, Label

DEFAULT_JOB = "examples/kernel/softmax.toml"


def job_files(root: Path) -> list[str]:
    """Job files a person might mean, for completion; a bounded look, not a crawl."""
    found = [p.name for p in sorted(root.glob("*.toml")) if p.name != "pyproject.toml"]
    for base in ("examples", "jobs"):
        d = root / base
        if d.is_dir():
            found += sorted(str(p.relative_to(root)) for p in d.glob("**/*.toml"))[:200]
    return list(dict.fromkeys(found))


class NewRunScreen(ModalScreen[tuple[str, str] | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, hint: str | None = None) -> None:
        super().__init__()
        self.hint = hint

    def compose(self) -> ComposeResult:
        cwd = Path.cwd()
        default = self.hint or (DEFAULT_JOB if (cwd / DEFAULT_JOB).is_file() else "")
        with Vertical(id="new-run"):
            yield Label("[b]Start a run[/b]  (enter starts, escape cancels)")
            yield Label("job file")
            yield Input(
                value=default,
                placeholder="path/to/job.toml",
                id="job-path",
                suggester=SuggestFromList(job_files(cwd), case_sensitive=True),
            )
            yield Label("brain (empty: the job's own)")
            yield Input(placeholder="playbook | local | provider:model", id="job-brain")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        path = self.query_one("#job-path", Input).value.strip()
        if not path:
            self.app.notify("give a job file, e.g. " + DEFAULT_JOB, severity="warning", markup=False)
            return
        self.dismiss((path, self.query_one("#job-brain", Input).value.strip()))

    def action_cancel(self) -> None:
        self.dismiss(None)
