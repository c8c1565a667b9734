"""The `a2annotate` command line. Each command group lives in its own module here."""
from __future__ import annotations

import importlib

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
]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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
