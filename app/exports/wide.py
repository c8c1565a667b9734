"""The wide labels file: one row per run, one column per annotator and mode.

Columns: ``run_id``, ``family``, ``title``, ``n_annotators`` (submitted annotations of the run),
then ``<annotator>.<mode>`` for every annotator (sorted by name; judges and dataset sources
included, named as they are) and every mode of the taxonomy (in taxonomy order): 1 when the
annotator's submitted annotation has a label of that mode, 0 when it does not, empty (null) when
the annotator submitted no annotation of the run. Runs nobody submitted are left out. This is the
shape statistics packages want for agreement or prevalence per rater.

`wide_rows` is the pure part (plain data in, rows out); `labels_wide` reads the database.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import select
from sqlmodel import Session

from app.annotations.models import Annotation, Label
from app.auth.models import User
from app.runs.models import Run, Scenario
from app.taxonomies.models import Taxonomy


def wide_columns(annotators: Sequence[str], modes: Sequence[str]) -> list[str]:
    """The column names, in order."""
    return ["run_id", "family", "title", "n_annotators"] + [f"{a}.{m}" for a in annotators for m in modes]


def wide_rows(runs: Iterable[tuple[str, str | None, str | None]],
              marks: dict[tuple[str, str], set[str]], modes: Sequence[str]) -> tuple[list[str], list[dict[str, Any]]]:
    """`runs` are (run_id, family, title) in output order; `marks` maps (run_id, annotator) to
    the set of modes that annotator's submitted annotation labels (an empty set: submitted with
    no label of these modes). Returns (columns, rows); runs without any submitted annotation are
    left out."""
    annotators = sorted({a for _, a in marks})
    cols = wide_columns(annotators, modes)
    out = []
    for run_id, family, title in runs:
        given = {a: marks[(run_id, a)] for a in annotators if (run_id, a) in marks}
        if not given:
            continue
        row: dict[str, Any] = {"run_id": run_id, "family": family, "title": title, "n_annotators": len(given)}
        for a in annotators:
            got = given.get(a)
            for m in modes:
                row[f"{a}.{m}"] = None if got is None else int(m in got)
        out.append(row)
    return cols, out


def labels_wide(session: Session, tax: Taxonomy, *, annotation_filter: Any = None,
                run_filter: Any = None) -> tuple[list[str], list[dict[str, Any]]]:
    """The wide file of the submitted annotations under `tax` (see the module doc).
    `annotation_filter` is a SQL condition on Annotation (blind mode), `run_filter` a run-id
    subquery (a batch: `app.exports.service.batch_filter`)."""
    modes = [m["code"] for m in tax.definition.get("modes", [])]
    stmt = (select(Annotation.id, Run.run_id, User.username)
            .join(Run, Run.id == Annotation.run_pk).join(User, User.id == Annotation.user_id)
            .where(Annotation.taxonomy_pk == tax.id, Annotation.status == "submitted"))
    if annotation_filter is not None:
        stmt = stmt.where(annotation_filter)
    if run_filter is not None:
        stmt = stmt.where(Run.id.in_(run_filter))
    anns = session.execute(stmt).all()
    marks: dict[tuple[str, str], set[str]] = {(run_id, user): set() for _, run_id, user in anns}
    by_id = {ann_id: (run_id, user) for ann_id, run_id, user in anns}
    ids = list(by_id)
    for start in range(0, len(ids), 500):
        for ann_id, mode in session.execute(select(Label.annotation_id, Label.mode)
                                            .where(Label.annotation_id.in_(ids[start:start + 500]))):
            if mode:
                marks[by_id[ann_id]].add(mode)
    run_ids = sorted({r for r, _ in marks})
    about: dict[str, tuple[str | None, str | None]] = {}
    for start in range(0, len(run_ids), 500):
        for run_id, family, title in session.execute(
                select(Run.run_id, Scenario.family, Scenario.title).join(Scenario, Scenario.id == Run.scenario_id)
                .where(Run.run_id.in_(run_ids[start:start + 500]))):
            about[run_id] = (family, title)
    return wide_rows(((r, *about.get(r, (None, None))) for r in run_ids), marks, modes)
