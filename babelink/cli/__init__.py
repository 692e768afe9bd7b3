"""Command line: one module per command group, each parsing arguments and calling the library."""

from __future__ import annotations

import sys

import typer

from babelink.cli import build, evaluate, link, normalize, serve, train
from babelink.errors import BabelinkError
from babelink.fsutil import exit_on_signals

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Cross-lingual biomedical entity linking.")
app.command()(build.build)
app.command()(build.update)
app.command()(normalize.normalize)
app.command()(link.link)
app.command()(evaluate.evaluate)
app.command()(serve.info)
app.command()(serve.verify)
app.command()(serve.serve)
app.add_typer(train.app, name="train")


def main() -> None:
    """Entry point: babelink errors become one line on stderr and exit status 1."""
    exit_on_signals()
    try:
        app()
    except BabelinkError as error:
        typer.echo(f"babelink: error: {error}", err=True)
        sys.exit(1)
    except BrokenPipeError:
        sys.exit(141)
    except OSError as error:
        typer.echo(f"babelink: error: {error.filename or ''}: {error.strerror or error}", err=True)
        sys.exit(1)
