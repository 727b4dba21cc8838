"""`assay sandbox`: is a sandbox available here, and does it hold?"""

from __future__ import annotations

import enum

import typer

app = typer.Typer(help="Sandbox backends: availability, self-test, clean-up.", no_args_is_help=True)


class BackendChoice(str, enum.Enum):
    auto = "auto"
    docker = "docker"
    bwrap = "bwrap"
    all = "all"


@app.command()
def check(
    backend: BackendChoice = typer.Option(
        BackendChoice.auto,
        "--backend",
        "-b",
        help="auto (docker if a daemon answers, else bwrap), docker, bwrap, or all.",
    ),
) -> None:
    """Show each backend's availability and attack the chosen one(s); exit 0 only if every check passes."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
    from rich.table import Table

    from assay.sandbox.backends import BACKENDS, availability, resolve_backend
    from assay.sandbox.cgroups import support
    from assay.sandbox.selftest import CHECKS, run_selftest

    out, err = Console(), Console(stderr=True)
    avail = availability()
    if backend is BackendChoice.all:
        chosen = list(BACKENDS)
        for name in chosen:
            if not avail[name][0]:
                raise _unavailable(name, avail[name][1])
    elif backend is BackendChoice.auto:
        chosen = [resolve_backend("auto")]
    else:
        if not avail[backend.value][0]:
            raise _unavailable(backend.value, avail[backend.value][1])
        chosen = [backend.value]

    kind, cg_detail = support()
    limits = {
        "docker": "docker cgroups (memory, pids, cpu)",
        "bwrap": cg_detail if kind else f"rlimits only, weaker: {cg_detail}",
    }
    table = Table(title="sandbox backends")
    for col in ("backend", "available", "detail", "limits"):
        table.add_column(col)
    for name in BACKENDS:
        ok, detail = avail[name]
        table.add_row(name, "[green]yes[/]" if ok else "[red]no[/]", detail, limits[name] if ok else "")
    out.print(table)

    failed = 0
    for name in chosen:
        results = Table(title=f"self-test: {name}")
        for col in ("check", "result", "detail"):
            results.add_column(col)
        with Progress(
            TextColumn(f"{name}: {{task.description}}"), BarColumn(), MofNCompleteColumn(), console=err, transient=True
        ) as progress:
            task = progress.add_task("starting", total=len(CHECKS))

            def advance(c, task=task, progress=progress):
                progress.update(task, advance=1, description=c.name)

            checks = run_selftest(name, on_check=advance)
        for c in checks:
            results.add_row(c.name, "[green]pass[/]" if c.ok else "[red]FAIL[/]", c.detail)
            failed += not c.ok
        out.print(results)
    if kind is None and "bwrap" in chosen:
        out.print("[yellow]note:[/] bwrap limits are rlimits only here (no writable cgroup): weaker containment")
    if failed:
        out.print(f"[red]{failed} check(s) failed[/]")
        raise typer.Exit(1)
    out.print(f"[green]all checks passed[/] ({', '.join(chosen)})")


def _unavailable(name: str, detail: str):
    from assay.errors import UserError

    problem, _, fix = detail.partition("; ")
    if not fix:
        if name == "docker":
            from assay.sandbox.docker import _fix_for

            fix = _fix_for(detail)
        else:
            from assay.sandbox.bwrap import INSTALL_FIX

            fix = INSTALL_FIX
    return UserError(f"{name} sandbox is not available: {problem}", fix)


@app.command()
def prune() -> None:
    """Remove sandbox containers and cgroups left behind by assay processes that died."""
    import os

    from rich.console import Console

    from assay.sandbox import cgroups, docker

    removed = 0
    ok, _ = docker.availability()
    if ok:
        api = docker.client().api
        for c in api.containers(all=True, filters={"label": docker.LABEL}):
            owner = c.get("Labels", {}).get("assay.owner-pid", "")
            if owner.isdigit() and os.path.exists(f"/proc/{owner}"):
                continue  # its assay process still runs
            api.remove_container(c["Id"], force=True)
            removed += 1
    removed += cgroups.prune()
    Console().print(f"removed {removed} leftover sandbox(es)")
