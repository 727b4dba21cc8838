"""Per-call gateway overhead: the same read_file call through the whole gateway stack
(policy + redaction + audit, padding off) against the bare tool, interleaved in one run."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def overhead_figures(sizes=(1024, 10 * 1024, 100 * 1024), calls: int = 200, progress=None) -> dict:
    home = Path(tempfile.mkdtemp(prefix="assay-bench-gw-"))
    os.environ["ASSAY_HOME"] = str(home)
    from assay.settings import settings

    settings.cache_clear()
    env = {**os.environ, "ASSAY_HOME": str(home)}
    for cmd in (["policy", "keygen", "--if-missing"], ["policy", "sign", "--all-shipped"]):
        subprocess.run([sys.executable, "-m", "assay", *cmd], env=env, check=True, capture_output=True)
    from assay.tools.seam import ToolCall
    from assay.tools.session import Session, SessionConfig

    ws = Path(tempfile.mkdtemp(prefix="assay-bench-ws-"))  # never inside ASSAY_HOME: the session refuses that
    # Text shaped like tool output (code and logs), no secrets: the common case.
    line = b"for i in range(n): total += values[i] * weights[i]  # accumulate 2026-12-03 INFO step ok\n"
    for n in sizes:
        (ws / f"f{n}.txt").write_bytes((line * (n // len(line) + 1))[:n])
    session = Session(SessionConfig(workspace=ws, manifest="kernel-agent", kind="kernel"))
    bare = session.registry.handler(_ctx(session), "kernel")
    out: dict = {}

    async def run() -> None:
        for n in sizes:
            path = f"f{n}.txt"
            through, direct = [], []
            for i in range(20):  # warm-up: first-use costs (imports, statement caches) are not per-call overhead
                await session.gateway(ToolCall("read_file", {"path": path}, key=f"w{n}-{i}"))
                await bare(ToolCall("read_file", {"path": path}, key=f"v{n}-{i}"))
            for i in range(calls):
                t0 = time.perf_counter_ns()
                await session.gateway(ToolCall("read_file", {"path": path}, key=f"b{n}-{i}"))
                t1 = time.perf_counter_ns()
                await bare(ToolCall("read_file", {"path": path}, key=f"d{n}-{i}"))
                t2 = time.perf_counter_ns()
                through.append((t1 - t0) / 1e6)
                direct.append((t2 - t1) / 1e6)
                if progress:
                    progress()
            label = f"{n // 1024}kb"
            out[label] = {
                "overhead_ms_p50": round(statistics.median(through) - statistics.median(direct), 3),
                "overhead_ms_p95": round(_pct(through, 0.95) - _pct(direct, 0.95), 3),
                "gateway_ms_p50": round(statistics.median(through), 3),
                "bare_ms_p50": round(statistics.median(direct), 3),
            }

    anyio.run(run)
    # What Session.call adds for a folder served by `assay mcp -w` (tools/view.py): the user's
    # edits pulled into the redacted view before the call, the agent's pushed back after.
    if session.view is not None:
        sync = []
        for _ in range(calls):
            t0 = time.perf_counter_ns()
            session.view.pull()
            session.view.push()
            sync.append((time.perf_counter_ns() - t0) / 1e6)
        out["view_sync_ms_p50"] = round(statistics.median(sync), 3)
        out["view_files"] = len(sizes)
    session.close()
    return out


def _ctx(session):
    from assay.tools.context import ToolContext

    return ToolContext(
        run_id=session.run_id,
        role=session.manifest.role,
        workspace=session.workspace,
        sandbox=lambda: session.pool.get(session.spec),
        ledger=session.ledger,
    )
