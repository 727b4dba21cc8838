"""`assay ledger`: prepare a ledger, check its verdict chain, see what it holds.

verify and info only read: they never create a ledger file or a table, so pointing them at
a wrong URL leaves nothing behind. Only init writes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    help="The ledger: every run, step, tool call, policy decision and verdict, with verdicts hash-chained.",
    no_args_is_help=True,
)

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="Ledger database URL (sqlite:///path or postgresql+psycopg://user:pw@host/db). "
        "Default: ASSAY_LEDGER_URL, else ledger.db under ASSAY_HOME.",
        show_default=False,
    ),
]


@app.command()
def init(url: UrlOption = None) -> None:
    """Create the ledger's tables and append-only triggers where missing.

    Runs do this themselves; use it to prepare a shared PostgreSQL database, or to put back
    triggers someone dropped. Safe to repeat.
    """
    from assay.ledger import Ledger

    with Ledger.open(url, create=True) as ledger:
        typer.echo(f"ledger ready: {ledger.url}")


@app.command()
def verify(
    url: UrlOption = None,
    head: Annotated[
        str | None,
        typer.Option(
            "--head",
            help="A row_hash you recorded earlier; verify also fails if that row has been cut off the end of the chain.",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as one JSON object.")] = False,
    receipts_dir: Annotated[
        Path | None,
        typer.Option(
            "--receipts",
            help="A folder of verdict receipts (assay run writes them beside its reports): each receipt's verdict must still be in the chain.",
            show_default=False,
        ),
    ] = None,
    hash_only: Annotated[
        bool,
        typer.Option(
            "--hash-only",
            help="Check the hash chain without the verifier's signatures (where its public key is not at hand).",
        ),
    ] = False,
) -> None:
    """Walk the verdict chain and the record: exit 0 if intact, 1 naming what is wrong.

    A verdict row is bad if it was changed, deleted, reordered, linked to the wrong predecessor
    or copied in from another run behind the ledger's back, or if the verifier's key did not
    sign it: the chain's hashes need no key, so whoever can write the database could re-link a
    forged row, and only the signature tells. The chain must still hold the head the verifier
    signed for this ledger (rows cut off the end, or an older copy restored, show there); each
    verified run's steps, tool calls, policy decisions, approvals and submissions must be what
    its verdict sealed; a finished run must have its verdict; with --receipts, every receipt's
    verdict must still be in the chain. Exit 2 if there is no ledger, or verdicts but no public
    key to check their signatures with.
    """
    from assay.errors import UserError
    from assay.ledger import Ledger
    from assay.settings import settings
    from assay.verifiers.signing import check, load_public_key

    with Ledger.open(url, create=False) as ledger:  # a bad URL is the first thing to hear about
        signatures = None
        if not hash_only and ledger.counts().get("verdicts"):
            public = load_public_key(settings().home)
            if public is None:
                raise UserError(
                    f"no verifier public key under {settings().home / 'keys'}: signatures cannot be checked",
                    "copy the verifier's keys/verifier-ed25519.pub there, or pass --hash-only to check the hash chain alone",
                )
            signatures = lambda payload, signature: check(public, payload, signature) == "valid"  # noqa: E731
        report = ledger.verify_chain(expected_head=head, signature_check=signatures)
        unguarded = [t for t, ok in ledger.guards().items() if not ok]
        where = ledger.url
        problems = _record_problems(ledger, report.count, hash_only, receipts_dir)
    ok = report.ok and not problems
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "ok": report.ok,
                    "count": report.count,
                    "head": report.head,
                    "problem": report.problem,
                    "row_id": report.row_id,
                    "detail": report.detail,
                    "url": where,
                    "unguarded_tables": unguarded,
                    "record_ok": not problems,
                    "record_problems": problems,
                }
            )
        )
    else:
        line = f"{report.summary()} ({where})"
        if unguarded:
            line += f"; WARNING: append-only triggers missing on {', '.join(unguarded)}"
        typer.echo(line)
        for p in problems:
            typer.echo(f"  RECORD: {p}")
    raise typer.Exit(0 if ok else 1)


def _record_problems(ledger, count: int, hash_only: bool, receipts_dir: Path | None) -> list[str]:
    """The signed head, the runs' seals and finished runs' verdicts, and the receipts."""
    from assay.errors import UserError
    from assay.settings import settings
    from assay.verifiers import receipts
    from assay.verifiers.signing import load_public_key

    home = settings().home
    public = load_public_key(home)
    problems = []
    if not hash_only:
        why = receipts.check_head(home, public, ledger.url, ledger.verdict_hash, count)
        if why:
            problems.append(why)
    problems += ledger.audit_record()
    if receipts_dir is not None:
        if not receipts_dir.is_dir():
            raise UserError(
                f"--receipts {receipts_dir} is not a folder", "give the folder assay run wrote its receipts to"
            )
        for path in sorted(receipts_dir.glob("receipt-*.json")):
            try:
                doc = json.loads(path.read_text())
            except (OSError, ValueError):
                problems.append(f"receipt {path.name} is unreadable")
                continue
            why = receipts.check_receipt(public, doc, ledger.url, ledger.verdict_hash, count)
            if why:
                problems.append(f"receipt {path.name}: {why}")
    return problems


@app.command()
def info(
    url: UrlOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Show which database holds the ledger, its row counts, and its append-only triggers."""
    from assay.ledger import Ledger, NoLedger

    try:
        ledger = Ledger.open(url, create=False)
    except NoLedger as exc:
        if as_json:
            typer.echo(json.dumps({"exists": False, "detail": exc.problem}))
        else:
            typer.echo(f"ledger: {exc.problem}")
        return
    with ledger:
        counts, guards, where, dialect = ledger.counts(), ledger.guards(), ledger.url, ledger.dialect
    if as_json:
        typer.echo(json.dumps({"exists": True, "url": where, "dialect": dialect, "counts": counts, "guards": guards}))
        return
    typer.echo(f"ledger: {where} ({dialect})")
    typer.echo("rows: " + ", ".join(f"{name} {n}" for name, n in counts.items()))
    missing = [t for t, ok in guards.items() if not ok]
    typer.echo("append-only triggers: " + (f"MISSING on {', '.join(missing)}" if missing else "in place"))
