"""`assay run`, `resume`, `approve`, `deny`, `verdicts`: the unattended door and the audit door.

Exit codes pipelines can trust: 0 only when every verdict passes, 1 when any fails (or the
run is left waiting for approval), 2 for usage or configuration errors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from assay.errors import UserError

err = Console(stderr=True)
out = Console()


def _progress(total_steps: int):
    """A progress bar over the step budget; the live line names what the run is doing."""
    prog = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} steps"),
        TimeElapsedColumn(),
        console=err,
        transient=False,
    )
    task = prog.add_task("starting", total=total_steps)

    def on_event(kind: str, data: dict[str, Any]) -> None:
        if kind == "run":
            prog.update(task, description=f"run {data['run_id']}")
        elif kind == "step":
            prog.update(task, completed=data["step"], description=f"agent step {data['step']}")
        elif kind == "verify":
            prog.update(task, description="verifying (fresh sandboxes, held-out inputs)")
        elif kind == "approval":
            prog.update(task, description=f"waiting for approval {data['id']}: {data['tool']} ({data['reason']})")
            err.print(
                f"[yellow]approval needed[/]: {data['tool']} {json.dumps(data['arguments'])[:200]}\n"
                f"  reason: {data['reason']}\n  decide with: assay approve RUN  or  assay deny RUN  (or in assay tui)"
            )

    return prog, on_event


def _reports(
    outcomes: list, json_path: Path | None, junit: Path | None, sarif: Path | None, quiet: bool = False
) -> int:
    from assay.ledger import Ledger
    from assay.reports.verdicts import print_summary, summary, write_json, write_junit, write_sarif

    rows = []
    with Ledger.open() as ledger:
        for o in outcomes:
            run = ledger.get_run(o.run_id)
            if run is None:  # the run's row is gone (ledger verify says so): report what is known
                rows.append(summary({"id": o.run_id, "status": o.status}, o.verdict))
                continue
            rows.append(summary(run.model_dump(mode="json"), o.verdict))
    for r in rows:
        if not quiet:
            print_summary(out, r)
    if json_path:
        write_json(json_path, rows)
    if junit:
        write_junit(junit, rows)
    if sarif:
        write_sarif(sarif, rows)
    folder = next((p.parent for p in (json_path, junit, sarif) if p is not None), None)
    if folder is not None:
        _write_receipts(folder, outcomes)
    waiting = [o for o in outcomes if o.waiting]
    for o in waiting:
        err.print(
            f"run {o.run_id} is paused, waiting for approval {o.waiting['id']}; continue with `assay approve {o.run_id}` then `assay resume {o.run_id}`"
        )
    if rows and not waiting and all(r["passed"] or r["inconclusive"] for r in rows):
        return 0 if all(r["passed"] for r in rows) else 3
    return 1


def _write_receipts(folder: Path, outcomes: list) -> None:
    """A signed receipt per verdict beside the reports (verifiers/receipts.py): `assay ledger
    verify --receipts FOLDER` later proves each verdict is still in the chain."""
    from assay.ledger import Ledger
    from assay.settings import settings
    from assay.verifiers import receipts, signing

    with Ledger.open() as ledger:
        for o in outcomes:
            if not o.verdict:
                continue
            doc = o.verdict.get("receipt")
            if doc is None:  # a finished run resumed: its receipt made again, from the chained row
                rows = [v for v in ledger.verdicts(o.run_id) if v.id == o.verdict.get("id")]
                if not rows:
                    continue
                doc = receipts.receipt(signing.load_or_create_key(settings().ensure_home()), ledger.url, rows[0])
            (folder / f"receipt-{o.run_id}.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


ReportOpts = dict(
    json_path=typer.Option(None, "--json", help="write a JSON report here"),
    junit=typer.Option(None, "--junit", help="write a JUnit XML report here"),
    sarif=typer.Option(None, "--sarif", help="write a SARIF 2.1.0 report here"),
)


def run(
    job_file: Path = typer.Argument(..., help="job file, e.g. examples/kernel/softmax.toml"),
    brain: str | None = typer.Option(
        None, "--brain", help="override the job's brain: playbook, local, provider:model, MODEL@URL"
    ),
    wait: bool = typer.Option(True, "--wait/--no-wait", help="wait for approvals (default) or leave the run paused"),
    json_path: Path | None = ReportOpts["json_path"],
    junit: Path | None = ReportOpts["junit"],
    sarif: Path | None = ReportOpts["sarif"],
) -> None:
    """Run a job to a signed verdict. Exit 0 only if every verdict passes; 1 if one fails; 3 if
    the only failures are speed checks timed on a machine too busy to time (retry elsewhere)."""
    from assay.agents.job import load_job

    # Everything a user can get wrong is checked before the runtime (seconds of imports) loads.
    job = load_job(job_file)
    if brain:
        job = job.model_copy(update={"brain": brain})
        from assay.agents.brains import parse_brain

        parse_brain(brain)
    _check_outputs(json_path, junit, sarif)
    from assay.agents.runner import check_manifest, start_run

    check_manifest(job)  # one line and no run row for a manifest the server would refuse

    prog, on_event = _progress(job.budget.steps)
    with prog:
        outcome = start_run(job, wait=wait, on_event=on_event)
    raise typer.Exit(_reports([outcome], json_path, junit, sarif))


def resume(
    run_id: str = typer.Argument(..., help="the run to continue"),
    wait: bool = typer.Option(True, "--wait/--no-wait"),
    json_path: Path | None = ReportOpts["json_path"],
    junit: Path | None = ReportOpts["junit"],
    sarif: Path | None = ReportOpts["sarif"],
) -> None:
    """Continue a run whose process died or that waited for approval, from its last checkpoint."""
    from assay.agents.runner import resume_run
    from assay.ledger import Ledger

    _check_outputs(json_path, junit, sarif)
    with Ledger.open(create=False) as ledger:
        run = ledger.get_run(run_id)
        steps = int((run.budget or {}).get("steps", 40)) if run else 40
    prog, on_event = _progress(steps)
    with prog:
        outcome = resume_run(run_id, wait=wait, on_event=on_event)
    raise typer.Exit(_reports([outcome], json_path, junit, sarif))


def approve(
    run_id: str = typer.Argument(..., help="the run whose pending call to approve"),
    approval: str | None = typer.Option(None, "--id", help="approval id (default: the pending one)"),
) -> None:
    """Approve the pending gated call of a run; the waiting run continues (or `assay resume RUN`)."""
    from assay.agents.runner import decide_approval

    key = decide_approval(run_id, "approved", approval_id=approval, actor="cli")
    out.print(f"approved {key} of run {run_id}")


def deny(
    run_id: str = typer.Argument(..., help="the run whose pending call to deny"),
    approval: str | None = typer.Option(None, "--id", help="approval id (default: the pending one)"),
) -> None:
    """Deny the pending gated call of a run; the agent is told and carries on without it."""
    from assay.agents.runner import decide_approval

    key = decide_approval(run_id, "denied", approval_id=approval, actor="cli")
    out.print(f"denied {key} of run {run_id}")


def verdicts(
    run_id: str | None = typer.Option(None, "--run", help="only this run's verdicts"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """List verdicts with their signature and chain status."""
    from rich.table import Table

    from assay.ledger import Ledger
    from assay.settings import settings
    from assay.verifiers.signing import check, check_row, load_public_key

    with Ledger.open(create=False) as ledger:
        rows = ledger.verdicts(run_id)
        public = load_public_key(settings().home)
        chain = ledger.verify_chain(signature_check=lambda p, s: check(public, p, s) == "valid")
    bad_from = chain.row_id if not chain.ok else None
    items = []
    for v in rows:
        items.append(
            {
                "id": v.id,
                "run_id": v.run_id,
                "passed": bool(v.payload.get("passed")),
                "kind": v.payload.get("kind"),
                "reasons": v.payload.get("reasons", []),
                "metrics": v.payload.get("metrics", {}),
                "criteria_hash": v.payload.get("criteria_hash"),
                "submission_hash": v.payload.get("submission_hash"),
                "signature": check_row(public, v.run_id, v.key, v.payload, v.signature),
                "chain": "ok"
                if bad_from is None or v.id < bad_from
                else ("broken here" if v.id == bad_from else "after a break"),
                "created_at": v.created_at.isoformat(),
            }
        )
    if as_json:
        print(json.dumps({"chain_ok": chain.ok, "chain": chain.summary(), "verdicts": items}, indent=2))
        return
    t = Table(title=f"verdicts ({chain.summary()})")
    for col in ("id", "run", "result", "signature", "chain", "reasons"):
        t.add_column(col, overflow="fold")
    for i in items:
        t.add_row(
            str(i["id"]),
            i["run_id"],
            "[green]PASS[/]" if i["passed"] else "[red]FAIL[/]",
            i["signature"],
            i["chain"],
            "; ".join(i["reasons"])[:80],
        )
    out.print(t)


def _check_outputs(*paths: Path | None) -> None:
    for p in paths:
        if p is not None and not p.parent.exists():
            raise UserError(f"report folder {p.parent} does not exist", "create it or give another path")


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command("resume")(resume)
    app.command("approve")(approve)
    app.command("deny")(deny)
    app.command("verdicts")(verdicts)
