"""`assay policy`: work in progress."""

import typer

app = typer.Typer(help="policy commands", no_args_is_help=True)
