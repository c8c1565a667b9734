"""The `a2annotate` command line. Each command group lives in its own module here."""
from __future__ import annotations

import importlib
import sys
from typing import Any

import click

#: modules exposing click commands to register (module, attribute)
COMMANDS = [
    ("app.cli.db", "db"),
    ("app.cli.imports", "import_cmd"),
    ("app.cli.labels", "import_labels"),
    ("app.cli.users", "users"),
    ("app.cli.users", "tokens"),
    ("app.cli.demo", "demo"),
    ("app.cli.serve", "serve"),
    ("app.cli.taxonomy", "taxonomy"),
    ("app.cli.export", "export"),
    ("app.cli.report", "report"),
    ("app.cli.agreement", "agreement"),
    ("app.cli.detect", "detect"),
    ("app.cli.record", "record"),
    ("app.cli.inspect", "inspect_cmd"),
    ("app.cli.estimate", "estimate"),
]


class OneLineUsageError(click.UsageError):
    """A usage error shown as one line: `Error: <reason> (see 'a2annotate CMD --help')`."""

    def show(self, file: Any = None) -> None:
        hint = f" (see '{self.ctx.command_path} --help')" if self.ctx is not None else ""
        click.echo(f"Error: {self.format_message()}{hint}", file=file or sys.stderr)


def _one_line(exc: click.UsageError) -> click.UsageError:
    if isinstance(exc, (OneLineUsageError, click.exceptions.NoArgsIsHelpError)):
        return exc  # a bare group name still prints its help
    new = OneLineUsageError(exc.format_message(), exc.ctx)
    new.exit_code = exc.exit_code
    return new


class OneLineErrorsGroup(click.Group):
    """The top-level group: usage errors of any command (bad option, missing argument, bad
    value) print one line and exit 2, instead of click's usage block."""

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except click.UsageError as exc:
            raise _one_line(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            raise _one_line(exc) from None


@click.group(cls=OneLineErrorsGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="a2annotate")
def cli() -> None:
    """a2annotate: label A2A runs against a failure taxonomy, measure agreement, report outcomes.

    The database is DATABASE_URL (default: SQLite file ./a2annotate.db).
    """


def _register() -> None:
    for module_name, attr in COMMANDS:
        cli.add_command(getattr(importlib.import_module(module_name), attr))


_register()


def main() -> None:
    cli()
