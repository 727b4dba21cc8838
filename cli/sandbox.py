"""`assay sandbox`: work in progress."""

import typer

app = typer.Typer(help="sandbox commands", no_args_is_help=True)
