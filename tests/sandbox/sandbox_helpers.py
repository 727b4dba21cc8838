"""Helpers shared by the sandbox tests (imported by name: conftest puts this folder on sys.path)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from assay.sandbox import SandboxLimits

# Tight limits: bombs hit them fast, and a test that waits for one stays short.
TIGHT = SandboxLimits(timeout_s=5.0, memory_mb=256, pids=64, cpus=1.0, output_bytes=64 << 10)
SLACK_S = 1.0  # contained = over within its limit plus this


def py(code: str, *args: str) -> list[str]:
    return ["python3", "-I", "-c", code, *args]


def host_processes_with(marker: str) -> list[int]:
    """Host pids whose command line carries `marker` (sandboxed processes are host processes too)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                found.append(int(entry))
        except OSError:
            pass
    return found


def host_responsive() -> float:
    """Seconds the host takes to start a process now; a bomb that got out would show here."""
    t0 = time.monotonic()
    subprocess.run(["/bin/true"], check=True, timeout=10)
    return time.monotonic() - t0
