"""`assay kernel`: verify a kernel candidate against its task with the kernel verifier.

    assay kernel verify TASK.py CANDIDATE.py [--criteria NAME] [--json] [--backend auto|docker|bwrap]

Exit code 0 when the candidate passed, 1 when it failed, 2 for bad input (a missing or
unreadable file, an unknown criteria profile, a task without Model/get_inputs).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from assay.errors import UserError

app = typer.Typer(help="kernel jobs: verify a candidate kernel against its task", no_args_is_help=True)


@app.callback()
def kernel() -> None:
    """Kernel jobs (a group, so `verify` stays a sub-command when more commands join it)."""


@app.command()
def verify(
    task: Path = typer.Argument(..., help="the task file (KernelBench format: Model, get_inputs, get_init_inputs)"),
    candidate: Path = typer.Argument(..., help="the candidate file (defines ModelNew)"),
    criteria: str = typer.Option("kernel-default", "--criteria", help="criteria profile name"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object: passed, inconclusive, reasons, checks, metrics"),
    backend: str = typer.Option("auto", "--backend", help="sandbox backend: auto, docker or bwrap"),
) -> None:
    """Check correctness, anti-gaming rules and speed of CANDIDATE against TASK, in sandboxes.
    Exit 0 if it passes, 1 if it fails, 3 if it failed only on speed timed on a machine too busy
    to time (verify again when it is quieter)."""
    from assay.sandbox.backends import CHOICES
    from assay.verifiers.criteria import load_criteria
    from assay.verifiers.kernel import verify_kernel

    try:
        if backend not in CHOICES:
            raise UserError(f"unknown sandbox backend {backend!r}", f"use one of: {', '.join(CHOICES)}")
        profile = load_criteria(criteria)
        if as_json:
            report = verify_kernel(task, candidate, profile, backend=backend)
        else:
            report = _with_progress(lambda progress: verify_kernel(task, candidate, profile, backend=backend,
                                                                   progress=progress))
    except UserError as exc:
        print(f"assay: error: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    if as_json:
        sys.stdout.write(json.dumps(report.to_json(), default=str) + "\n")
    else:
        _show(report)
    raise typer.Exit(0 if report.passed else 3 if report.inconclusive else 1)


def _with_progress(work):
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        tid = bar.add_task("verifying", total=1.0)
        return work(lambda stage, fraction: bar.update(tid, description=stage, completed=fraction))


def _show(report) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title="kernel verification", show_lines=False)
    table.add_column("check")
    table.add_column("result")
    table.add_column("detail", overflow="fold")
    for c in report.checks:
        table.add_row(c.name, "[green]pass[/]" if c.passed else "[red]FAIL[/]", c.detail[:300])
    console.print(table)
    m = report.metrics
    if "speedup_vs_eager" in m:
        times = [("eager", m["time_eager_s"]), ("torch.compile", m["time_compile_s"]),
                 ("copy (bound)", m["time_copy_s"]), ("candidate", m["time_candidate_s"])]
        slowest = max(t for _, t in times) or 1.0
        speed = Table(title="time per call (same run, interleaved rounds)")
        speed.add_column("subject")
        speed.add_column("ms", justify="right")
        speed.add_column("")
        for name, t in times:
            speed.add_row(name, f"{t * 1e3:.3f}", "#" * max(1, round(30 * t / slowest)))
        console.print(speed)
        console.print(f"speedup: {m['speedup_vs_eager']:.3f}x eager, {m['speedup_vs_compile']:.3f}x torch.compile; "
                      f"{m['candidate_bandwidth_gbs']} GB/s of {m['copy_bandwidth_gbs']} GB/s copy bandwidth")
    verdict = ("[green]PASSED[/]" if report.passed else
               "[yellow]FAILED (inconclusive: too busy to time)[/]" if report.inconclusive else "[red]FAILED[/]")
    console.print(f"{verdict}  criteria {report.criteria} ({report.criteria_sha256[:12]}), "
                  f"candidate {report.candidate_sha256[:12]}")
    for reason in report.reasons:
        console.print(f"  - {reason[:400]}")
