"""What a tool sees of its session: the run, the workspace, the run's sandbox, its grants."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assay.tools.seam import ToolCall


@dataclass
class ToolContext:
    run_id: str
    role: str
    workspace: Path
    # Opens (or reuses from the warm pool) the run's sandbox; tools never run code elsewhere.
    sandbox: Callable[[], Any]
    ledger: Any = None
    job: dict[str, Any] = field(default_factory=dict)
    # Limits granted by the capability decision for this call (e.g. max_timeout_s).
    grants: dict[str, Any] = field(default_factory=dict)
    progress: Callable[[float, float | None, str | None], None] | None = None
    call: ToolCall | None = None

    def for_call(self, call: ToolCall, progress=None) -> ToolContext:
        return dataclasses.replace(self, call=call, grants=dict(call.grants), progress=progress or self.progress)

    def report(self, done: float, total: float | None = None, message: str | None = None) -> None:
        if self.progress is not None:
            self.progress(done, total, message)
