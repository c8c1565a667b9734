"""MAD-compatible export: MAST-labelled runs in the shape of MAST's `MAD_full_dataset.json`.

One record per run that is labelled under the MAST taxonomy (key ``mast``, the version given or
the latest) by ``annotator`` (default ``judge:mast-llm``, the judge the MAD importer creates),
and per run imported from a MAD full file::

    {"mas_name", "llm_name", "benchmark_name", "trace_id",
     "trace": {"key", "index", "trajectory"}, "mast_annotation": {"1.1": 0|1|null, ...}}

``mast_annotation``: 1 for each mode the annotator's submitted annotation marks, 0 for the other
modes, null for every mode when the annotator has no submitted annotation of the run. A run
imported from MAD keeps its record's fields (and its ``mast_annotation`` keys, nulls and odd
values where the labels cannot say otherwise) and its trajectory text exactly (the events are
slices of it), so importing the file gives back the same runs and labels.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.annotations.models import Annotation, Label
from app.auth.models import User
from app.ingest.readers.mad import JUDGE_SOURCE, trajectory_from_events
from app.runs.models import Agent, Event, Run
from app.taxonomies.models import Taxonomy

DEFAULT_ANNOTATOR = f"judge:{JUDGE_SOURCE}"
FILE_NAME = "MAD_full_dataset.json"


class MadExportError(ValueError):
    """The export cannot be made (unknown taxonomy)."""


def _taxonomy(session: Session, ref: str | None) -> Taxonomy:
    from app.taxonomies.service import resolve

    tax = resolve(session, ref or "mast")
    if tax is None:
        raise MadExportError(f"unknown taxonomy {ref or 'mast'!r}")
    return tax


def _marks(session: Session, tax: Taxonomy, annotator: str, annotation_filter: Any = None) -> dict[int, set[str]]:
    """run pk -> the modes `annotator` marked in its submitted annotation under `tax`."""
    stmt = (select(Annotation.id, Annotation.run_pk).join(User, User.id == Annotation.user_id)
            .where(Annotation.taxonomy_pk == tax.id, Annotation.status == "submitted", User.username == annotator))
    if annotation_filter is not None:
        stmt = stmt.where(annotation_filter)
    anns = {aid: pk for aid, pk in session.execute(stmt)}
    out: dict[int, set[str]] = {pk: set() for pk in anns.values()}
    if anns:
        for aid, mode in session.execute(select(Label.annotation_id, Label.mode)
                                         .where(Label.annotation_id.in_(list(anns)), Label.mode.is_not(None))):
            out[anns[aid]].add(mode)
    return out


def _record(session: Session, run: Run, codes: list[str], marked: set[str] | None) -> dict[str, Any]:
    events = [{"actor": a, "content": c} for a, c in session.execute(
        select(Event.actor, Event.content).where(Event.run_pk == run.id).order_by(Event.seq))]
    mad = (run.extra or {}).get("mad") if isinstance((run.extra or {}).get("mad"), dict) else None
    if mad is not None and mad.get("file") == "full":
        original = mad.get("mast_annotation")
        if isinstance(original, dict):
            annotation = {}
            for k, v in original.items():
                code = str(k).strip()
                if code in codes and v in (0, 1) and marked is not None:  # keeps a bool a bool
                    annotation[k] = type(v)(code in marked)
                else:
                    annotation[k] = v
        elif marked is not None and original is None:
            annotation = {c: int(c in marked) for c in codes}
        else:
            annotation = original
        trace = {"key": mad.get("trace_key"), "index": mad.get("trace_index"),
                 "trajectory": trajectory_from_events(events, mad.get("nul_offsets"))}
        trace.update(mad.get("trace_extra") or {})
        rec = {"mas_name": mad.get("mas_name"), "llm_name": mad.get("llm_name"),
               "benchmark_name": mad.get("benchmark_name"), "trace_id": mad.get("trace_id"), "trace": trace,
               "mast_annotation": annotation}
        rec.update((run.extra or {}).get("mad_extra") or {})
        return rec
    agent = session.execute(select(Agent.harness, Agent.model).where(Agent.run_pk == run.id)
                            .order_by(Agent.position)).first()
    text = "\n".join(f"{e['actor']}: {e['content'] or ''}" for e in events)
    return {"mas_name": (agent[0] if agent else None) or "a2annotate", "llm_name": agent[1] if agent else None,
            "benchmark_name": run.scenario_id, "trace_id": run.run_id,
            "trace": {"key": run.run_id, "index": run.id, "trajectory": text},
            "mast_annotation": {c: (None if marked is None else int(c in marked)) for c in codes}}


def iter_mad_records(session: Session, *, annotator: str = DEFAULT_ANNOTATOR, taxonomy: str | None = None,
                     annotation_filter: Any = None) -> Iterator[dict[str, Any]]:
    """Yields the MAD records (see the module docstring), in run id order."""
    from app.taxonomies.service import mode_codes

    tax = _taxonomy(session, taxonomy)
    codes = mode_codes(tax)
    marks = _marks(session, tax, annotator, annotation_filter)
    for run in session.execute(select(Run).order_by(Run.run_id)).scalars():
        mad = (run.extra or {}).get("mad")
        from_mad = isinstance(mad, dict) and mad.get("file") == "full"
        if run.id in marks or from_mad:
            yield _record(session, run, codes, marks.get(run.id))


def export_mad(engine: Engine, out_dir: str | Path, *, annotator: str = DEFAULT_ANNOTATOR,
               taxonomy: str | None = None) -> tuple[Path, int]:
    """Writes ``out_dir/MAD_full_dataset.json``; returns (path, number of records)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / FILE_NAME
    tmp = path.with_name(path.name + ".part")
    n = 0
    with Session(engine) as session, open(tmp, "w", encoding="utf-8") as fh:
        fh.write("[")
        for rec in iter_mad_records(session, annotator=annotator, taxonomy=taxonomy):
            fh.write(("\n" if n == 0 else ",\n") + json.dumps(rec, ensure_ascii=False))
            n += 1
        fh.write("\n]\n" if n else "]\n")
    tmp.replace(path)
    return path, n


def mad_json_stream(engine: Engine, *, annotator: str = DEFAULT_ANNOTATOR, taxonomy: str | None = None,
                    annotation_filter: Any = None) -> Iterator[bytes]:
    """The same file as bytes, one record at a time (for a streamed download)."""
    def generate() -> Iterator[bytes]:
        n = 0
        with Session(engine) as session:
            yield b"["
            for rec in iter_mad_records(session, annotator=annotator, taxonomy=taxonomy,
                                        annotation_filter=annotation_filter):
                yield (("\n" if n == 0 else ",\n") + json.dumps(rec, ensure_ascii=False)).encode("utf-8")
                n += 1
            yield b"\n]\n" if n else b"]\n"
    return generate()
