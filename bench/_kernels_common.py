"""Shared plumbing for the kernel benchmarks: a sandbox for the suite, rich progress on
stderr, and the "## Kernels" section of bench/RESULTS.md (only that section is touched)."""

from __future__ import annotations

import contextlib
import os
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "kernel"
RESULTS = ROOT / "bench" / "RESULTS.md"
err = Console(stderr=True)


def suite() -> list[Path]:
    return sorted(p for p in EXAMPLES.glob("*.py") if (p.with_suffix(".toml")).exists())


def corpus() -> list[Path]:
    """The KernelBench-style corpus: examples/kernel/corpus, one family per file-name prefix."""
    return sorted((EXAMPLES / "corpus").glob("*.py"))


@contextlib.contextmanager
def kernel_sandbox(backend: str = "auto", workspace: Path | None = None):
    from assay.kernels import kernel_binds
    from assay.sandbox import SandboxLimits, SandboxSpec, open_sandbox

    with contextlib.ExitStack() as stack:
        if workspace is None:
            workspace = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="assay-kbench-")))
        workspace.mkdir(parents=True, exist_ok=True)
        os.chmod(workspace, 0o777)  # whichever uid the backend runs as builds in here
        limits = SandboxLimits(
            timeout_s=900, memory_mb=12288, pids=512, cpus=float(os.cpu_count() or 1), output_bytes=8 << 20
        )
        spec = SandboxSpec(workspace=workspace, limits=limits, ro_binds=kernel_binds() + ((EXAMPLES, "/tasks"),))
        sb = open_sandbox(spec, backend)
        stack.callback(sb.close)
        yield sb


def progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=err,
        transient=False,
    )


def machine() -> dict:
    model = ""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        m = re.search(r"^Model name:\s*(.+)$", out, re.M)
        model = m.group(1).strip() if m else ""
        flags = re.search(r"^Flags:\s*(.+)$", out, re.M)
        isa = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_tile") if flags and f in flags.group(1).split()]
    except (OSError, subprocess.SubprocessError):
        isa = []
    import torch

    return {
        "cpu": model or platform.processor(),
        "isa": isa,
        "nproc": os.cpu_count(),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


def write_section(body: str, heading: str = "## Kernels") -> None:
    """Replace (or append) our section of RESULTS.md, leaving every other heading alone."""
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.rstrip() == heading), None)
    block = heading + "\n\n" + body.strip() + "\n\n"
    if start is None:
        new = text.rstrip() + "\n\n" + block
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        new = "".join(lines[:start]) + block + "".join(lines[end:])
    RESULTS.write_text(new)


def subsection(existing_heading: str, body: str) -> str:
    """Keep the other ### subsections of the Kernels section when rewriting one of them."""
    text = RESULTS.read_text() if RESULTS.exists() else ""
    m = re.search(r"^## Kernels\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    parts: dict[str, str] = {}
    order: list[str] = []
    preamble = ""
    if m:
        for chunk in re.split(r"(?=^### )", m.group(1), flags=re.M):
            chunk = chunk.strip()
            if chunk and not chunk.startswith("### "):
                preamble = chunk  # hand-written notes above the subsections stay
            elif chunk.startswith("### "):
                head = chunk.splitlines()[0]
                parts[head] = chunk
                order.append(head)
    if existing_heading not in parts:
        order.append(existing_heading)
    parts[existing_heading] = existing_heading + "\n\n" + body.strip()
    return "\n\n".join(([preamble] if preamble else []) + [parts[h] for h in order])


def geomean(xs):
    import math

    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def die(msg: str) -> None:
    err.print(f"[red]{msg}[/red]")
    sys.exit(2)
