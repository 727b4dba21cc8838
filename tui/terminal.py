"""Keep child processes off the screen Textual draws.

Textual draws on file descriptor 2. The processes a run started here brings up (the run's
MCP server, whose stderr is inherited) write their complaints to the same descriptor, right
across the screen. While the TUI runs, descriptor 2 points at a log file under ASSAY_HOME
and Textual gets a handle of its own on the terminal; the log is where the TUI looks for the
reason when a run dies with nothing but "connection closed".
"""

from __future__ import annotations

import os
import sys
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def children_log_to(log: Path) -> Generator[Path | None]:
    """Yield the log path, or None when stderr is no terminal (tests, pipes: nothing to guard)."""
    if not os.isatty(2):
        yield None
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    tty = os.dup(2)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    saved = sys.stderr, sys.__stderr__
    term = os.fdopen(tty, "w", buffering=1, encoding=sys.stderr.encoding or "utf-8", errors="replace", closefd=False)
    try:
        os.dup2(fd, 2)
        # Textual's driver writes to sys.__stderr__: the terminal, through the duplicate.
        sys.stderr = sys.__stderr__ = term
        yield log
    finally:
        term.flush()
        os.dup2(tty, 2)
        sys.stderr, sys.__stderr__ = saved
        os.close(fd)
        os.close(tty)


def said_since(log: Path | None, offset: int) -> str | None:
    """The last thing an assay process reported in the log after `offset`: its `assay: error:`
    line if there is one, the last line otherwise."""
    if log is None or not log.exists():
        return None
    with log.open("rb") as fh:
        fh.seek(offset)
        lines = [ln.strip() for ln in fh.read(1 << 20).decode("utf-8", "replace").splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("assay: error:")]
    if errors:
        return errors[-1].removeprefix("assay: error:").strip()
    return lines[-1][:500] if lines else None


def size(log: Path | None) -> int:
    try:
        return log.stat().st_size if log is not None else 0
    except OSError:
        return 0
