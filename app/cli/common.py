"""Helpers shared by CLI commands: one-line failures, the engine with a schema check."""
from __future__ import annotations

import functools
import sys

import click
from sqlalchemy.engine import Engine

from app.core.db import get_engine
from app.core.migrate import SchemaOutOfDate, check_schema


def one_line_errors(fn):
    """Turn any exception into `Error: <one line>` and exit status 1 (click's usage errors stay 2)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except SchemaOutOfDate as exc:
            raise click.ClickException(str(exc)) from None
        except Exception as exc:  # noqa: BLE001
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise click.ClickException(f"{text}") from None

    return wrapper


def study_scope_of(session, ref: str | None):
    """(study, its run-id subquery) for `--study` (None, None without one); unknown: a one-line error."""
    from app.studies.service import StudyNotFound, optional_study, study_run_ids

    try:
        st = optional_study(session, ref)
    except StudyNotFound as exc:
        raise click.ClickException(str(exc)) from None
    return st, study_run_ids(session, st)


def checked_engine() -> Engine:
    engine = get_engine()
    check_schema(engine)
    return engine


def echo_err(msg: str) -> None:
    click.echo(msg, err=True)


def is_tty() -> bool:
    return sys.stderr.isatty()
