"""`assay <kind> verify TASK SUBMISSION`: one kind's verifier, run directly (pipelines, tests),
through one generic path for every registered kind.

    assay kernel verify TASK.py CANDIDATE.py [--criteria NAME] [--json] [--backend auto|docker|bwrap]

The kind's options (its job's [<kind>] table, e.g. a port's --target) become options here, one
per field of the verifier's options model. Exit codes are `assay run`'s: 0 pass, 1 fail, 2 bad
input, 3 inconclusive (failed only on a figure the machine's load decided: verify again when it
is quieter).
"""

from __future__ import annotations

import inspect
import json
import sys
import typing
from pathlib import Path
from typing import Any, Literal

import typer

from assay.errors import UserError

# The options every kind's verify has; a kind's own option of the same name gets its kind's prefix.
GENERIC_FLAGS = ("--criteria", "--json", "--backend", "--help")
OPTION = "option_"


def register(app: typer.Typer) -> None:
    """A sub-command group per job kind the verifier knows."""
    from assay.verifiers.kinds import names

    for name in names():
        app.add_typer(kind_app(name), name=name)


def kind_app(name: str) -> typer.Typer:
    group = typer.Typer(help=f"{name} jobs: verify a submission against its task", no_args_is_help=True)

    @group.callback()
    def _group() -> None:
        """A group, so `verify` stays a sub-command when more commands join it."""

    group.command("verify")(_verify_command(name))
    return group


def _options_model(name: str):
    from assay.verifiers.kinds import verifier_kind

    try:
        return verifier_kind(name).options_model
    except UserError:
        return None  # a broken plugin kind: `verify` says why when it is run


def _default_criteria(name: str) -> str:
    from assay.agents.kinds import agent_kind

    try:
        return agent_kind(name).default_criteria
    except UserError:
        return f"{name}-default"


def _option_type(annotation: Any) -> tuple[type, str]:
    """The CLI type of an options field, and the words its help adds (a Literal's choices)."""
    if typing.get_origin(annotation) is Literal:
        return str, "one of: " + ", ".join(str(a) for a in typing.get_args(annotation))
    if annotation in (bool, int, float, str):
        return annotation, ""
    return str, ""


def _verify_command(name: str):
    model = _options_model(name)
    fields = dict(model.model_fields) if model is not None else {}

    def command(**kw: Any) -> None:
        options = {k.removeprefix(OPTION): kw.pop(k) for k in list(kw) if k.startswith(OPTION)}
        _verify(name, {k: v for k, v in options.items() if v is not None}, **kw)

    params = [
        inspect.Parameter(
            "task",
            inspect.Parameter.KEYWORD_ONLY,
            annotation=Path,
            default=typer.Argument(..., help="the task file (Model, get_inputs, get_init_inputs, ...)"),
        ),
        inspect.Parameter(
            "submission",
            inspect.Parameter.KEYWORD_ONLY,
            annotation=Path,
            default=typer.Argument(..., help="the submission's entry file, or a folder holding it"),
        ),
        inspect.Parameter(
            "criteria",
            inspect.Parameter.KEYWORD_ONLY,
            annotation=str,
            default=typer.Option(_default_criteria(name), "--criteria", help="criteria profile name"),
        ),
        inspect.Parameter(
            "as_json",
            inspect.Parameter.KEYWORD_ONLY,
            annotation=bool,
            default=typer.Option(
                False, "--json", help="print one JSON object: outcome, reasons, checks, metrics, headline"
            ),
        ),
        inspect.Parameter(
            "backend",
            inspect.Parameter.KEYWORD_ONLY,
            annotation=str,
            default=typer.Option("auto", "--backend", help="sandbox backend: auto, docker or bwrap"),
        ),
    ]
    for field_name, info in fields.items():
        kind, choices = _option_type(info.annotation)
        flag = "--" + field_name.replace("_", "-")
        if flag in GENERIC_FLAGS:  # the kind's own [kernel] backend is not the sandbox's --backend
            flag = f"--{name}-{field_name.replace('_', '-')}"
        words = " ".join(w for w in (info.description or "", choices) if w)
        params.append(
            inspect.Parameter(
                OPTION + field_name,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=kind | None,
                default=typer.Option(None, flag, help=f"[{name}] {field_name}: {words}".strip()),
            )
        )
    # typer builds the command's options from its signature, so the kind's fields become flags
    command.__signature__ = inspect.Signature(params)
    command.__annotations__ = {p.name: p.annotation for p in params}
    command.__doc__ = (
        f"Verify a {name} SUBMISSION against TASK in fresh sandboxes. Exit 0 if it passes, 1 if it "
        "fails, 2 for bad input, 3 if inconclusive (verify again when the machine is quieter)."
    )
    return command


def _verify(
    name: str, options: dict[str, Any], *, task: Path, submission: Path, criteria: str, as_json: bool, backend: str
) -> None:
    try:
        outcome, used = _judge(name, options, task, submission, criteria, backend, progress=not as_json)
    except UserError as exc:
        print(f"assay: error: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    if as_json:
        doc = {
            "kind": name,
            "criteria": used,
            **outcome.verdict_fields(),
            "inconclusive": outcome.outcome == "inconclusive",
        }
        sys.stdout.write(json.dumps(doc, default=str) + "\n")
    else:
        _show(name, used, outcome)
    raise typer.Exit(outcome.exit_code)


def _judge(
    name: str, options: dict[str, Any], task: Path, submission: Path, criteria: str, backend: str, *, progress: bool
):
    from assay.sandbox.backends import CHOICES
    from assay.verifiers.kinds import VerifyRequest, verifier_kind
    from assay.verifiers.process import judge

    if backend not in CHOICES:
        raise UserError(f"unknown sandbox backend {backend!r}", f"use one of: {', '.join(CHOICES)}")
    kind = verifier_kind(name)
    entry = submission / kind.entry if submission.is_dir() else submission
    request = VerifyRequest(
        kind=name, task_path=task, entry=entry, criteria=criteria, options=options, sandbox_backend=backend
    )
    if not progress:
        return judge(kind, request)
    return _with_progress(lambda report: judge(kind, request, report))


def _with_progress(work):
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    with Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), TimeElapsedColumn(), console=console, transient=True
    ) as bar:
        tid = bar.add_task("verifying", total=1.0)
        return work(lambda stage, fraction: bar.update(tid, description=stage, completed=fraction))


def _show(name: str, criteria: str, outcome) -> None:
    from rich.console import Console
    from rich.table import Table

    from assay.reports.charts import figure_chart

    console = Console()
    table = Table(title=f"{name} verification", show_lines=False)
    table.add_column("check")
    table.add_column("result")
    table.add_column("detail", overflow="fold")
    for c in outcome.checks:
        table.add_row(c.name, "[green]pass[/]" if c.passed else "[red]FAIL[/]", c.detail[:300])
    console.print(table)
    if outcome.figures is not None:
        console.print(figure_chart(outcome.figures))
    if outcome.headline is not None:
        console.print(f"{outcome.headline.name}: {outcome.headline.text()}")
    verdict = {"pass": "[green]PASSED[/]", "inconclusive": "[yellow]FAILED (inconclusive: too busy to time)[/]"}.get(
        outcome.outcome, "[red]FAILED[/]"
    )
    console.print(
        f"{verdict}  criteria {criteria} ({(outcome.criteria_hash or '')[:12]}), "
        f"submission {(outcome.candidate_hash or '')[:12]}"
    )
    for reason in outcome.reasons:
        console.print(f"  - {reason[:400]}")
