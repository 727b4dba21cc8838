"""The `assay` command. Sub-commands live one module per room; heavy imports stay inside them."""

from __future__ import annotations

import sys

import typer

from assay.errors import UserError

app = typer.Typer(
    name="assay",
    help="assay: LLM agents do ML-systems work in a zero-trust sandbox; only verifiers declare success.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _register() -> None:
    from assay.cli import ledger, mcp, policy, run, sandbox, tui, verify

    run.register(app)
    app.command(name="mcp")(mcp.mcp)
    app.command("tui")(tui.tui)
    app.add_typer(sandbox.app, name="sandbox")
    app.add_typer(ledger.app, name="ledger")
    app.add_typer(policy.app, name="policy")
    verify.register(app)


_register()


def main(argv: list[str] | None = None) -> None:
    """Entry point: user errors are one line on stderr and exit code 2, never a traceback."""
    try:
        app(args=argv, standalone_mode=True)
    except UserError as exc:
        print(f"assay: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("assay: interrupted", file=sys.stderr)
        sys.exit(130)
