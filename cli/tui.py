"""`assay tui`: the terminal UI (see assay.tui). Textual is imported only when it opens."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer


def tui(
    job: Path | None = typer.Option(
        None, "--job", help="job file offered when starting a run (default: examples/kernel/softmax.toml if present)"
    ),
    poll: float = typer.Option(1.0, "--poll", min=0.1, max=60, help="seconds between ledger reads"),
) -> None:
    """Watch runs live, approve or deny gated calls, read verdicts: keyboard-first, 80x24 and up."""
    from assay.settings import settings
    from assay.tui.app import AssayApp
    from assay.tui.terminal import children_log_to

    # A bad ASSAY_* setting or an unwritable home is one clear line before the screen is taken.
    home = settings().ensure_home()
    with children_log_to(home / "logs" / "tui.log") as log:
        app = AssayApp(poll_s=poll, job_hint=str(job) if job else None, children_log=log)
        app.run()
    if app.driven:
        # Runs driven by this process stop here as a killed run would; their checkpoints and
        # ledger rows stay, and they resume from there. Exiting at once spares the daemon
        # threads a half-torn-down interpreter.
        ids = ", ".join(sorted(app.driven))
        print(f"assay: left running when the TUI closed, resume with `assay resume RUN`: {ids}", file=sys.stderr)
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(0)
