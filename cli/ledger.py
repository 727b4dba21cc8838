"""`assay ledger`: work in progress."""

import typer

app = typer.Typer(help="ledger commands", no_args_is_help=True)
