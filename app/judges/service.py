"""Judges as plain service functions taking a session: register, select, estimate, plan, launch,
cancel, list, results, score; and the runner's storage steps.

Judge labels are annotations by the non-human user ``judge:<name>`` (kind "judge", like imported
judge labels, so blind mode, agreement "humans vs judges", reports and exports treat them alike),
origin ``judge``, ``source_version`` the judge version, each label's ``note`` its rationale and
``confidence`` the vote fraction. The annotation holds the labels of the latest version that judged
the run; every version's own answers stay in ``judge_result`` (never overwritten by another
version), and calibration reads those. Judge labels are never turned into gold: adjudication
shows them as machine suggestions only (`app.agreement.adjudication`).
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import threading
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import orjson
from sqlalchemy import Text, bindparam, cast, delete, func, insert, update
from sqlmodel import Session, select

from app.annotations.models import Annotation, Assignment, GoldLabel, GoldRun, Label
from app.auth.models import User
from app.judges.models import JudgeCache, JudgeCall, JudgeResult, JudgeRun, JudgeVersion
from app.judges.schema import JudgeDef, JudgeFileError, parse_judge_text, split_ref
from app.runs.models import Run, utcnow
from app.taxonomies.models import Taxonomy

log = logging.getLogger("a2annotate.judges")

ORIGIN = "judge"
HEARTBEAT_STALE = timedelta(seconds=30)


class JudgeError(ValueError):
    """A bad judge request (unknown judge, run, batch; a run already going; over the cost cap)."""


# --------------------------------------------------------------------------- judge files and versions

def _taxonomy(session: Session, ref: str) -> Taxonomy:
    from app.taxonomies.service import resolve

    tax = resolve(session, ref)
    if tax is None:
        raise JudgeFileError(f"taxonomy: no taxonomy {ref!r} is registered")
    return tax


def check_text(session: Session | None, text: str, where: str = "judge file") -> JudgeDef:
    """Parse and check a judge file; with a session, the taxonomy is resolved and pinned too."""
    jd = parse_judge_text(text, where)
    if session is None:
        return jd
    tax = _taxonomy(session, jd.definition["taxonomy"])
    jd = parse_judge_text(text, where, taxonomy_hash=tax.content_hash, taxonomy_ref=f"{tax.key}@{tax.version}")
    if jd.definition.get("modes"):
        from app.taxonomies.service import mode_codes

        codes = {c.upper() for c in mode_codes(tax)}
        bad = [m for m in jd.definition["modes"] if m.upper() not in codes]
        if bad:
            raise JudgeFileError(f"{where}: modes: {bad[0]!r} is no mode of {tax.key}@{tax.version}")
    return jd


def register(session: Session, text: str, where: str = "judge file") -> tuple[JudgeVersion, bool]:
    """Store a judge file as a version of its judge (created: True when the version is new). The
    same version registered again keeps its results; its operational settings (endpoint address,
    limits, prices, description) are updated. The caller commits."""
    from app.core.db import begin_write

    jd = check_text(session, text, where)
    tax = _taxonomy(session, jd.definition["taxonomy"])
    begin_write(session)
    row = session.exec(select(JudgeVersion).where(JudgeVersion.name == jd.name,
                                                  JudgeVersion.version == jd.version)).first()
    if row is not None:
        row.definition = jd.definition
        row.source = text
        session.add(row)
        session.flush()
        return row, False
    row = JudgeVersion(name=jd.name, version=jd.version, content_hash=jd.content_hash, taxonomy_pk=tax.id,
                       definition=jd.definition, source=text)
    session.add(row)
    session.flush()
    return row, True


def resolve_judge(session: Session, ref: str) -> JudgeVersion:
    """``name`` (its latest version) or ``name@version`` (a version prefix is enough)."""
    name, version = split_ref(ref.strip())
    q = select(JudgeVersion).where(JudgeVersion.name == name)
    if version:
        q = q.where(JudgeVersion.version.startswith(version))
    rows = session.exec(q.order_by(JudgeVersion.id.desc())).all()
    if not rows:
        raise JudgeError(f"no judge {ref!r} is registered (a2annotate judge list)")
    if version and len({r.version for r in rows}) > 1:
        raise JudgeError(f"{ref!r} names {len(rows)} versions; give more of the version")
    return rows[0]


def list_judges(session: Session) -> list[dict[str, Any]]:
    """Every judge with its versions (newest first), runs judged and last judge run."""
    counts = {(v, s): n for v, s, n in session.execute(
        select(JudgeResult.judge_version_id, JudgeResult.state, func.count()).group_by(
            JudgeResult.judge_version_id, JudgeResult.state))}
    out: dict[str, dict[str, Any]] = {}
    for jv in session.exec(select(JudgeVersion).order_by(JudgeVersion.name, JudgeVersion.id.desc())).all():
        d = out.setdefault(jv.name, {"name": jv.name, "versions": []})
        d["versions"].append({"version": jv.version, "created_at": jv.created_at.isoformat(),
                              "strategy": jv.definition["strategy"], "model": jv.definition["endpoint"]["model"],
                              "taxonomy": jv.definition["taxonomy"], "judged": counts.get((jv.id, "done"), 0),
                              "errors": counts.get((jv.id, "error"), 0)})
    return list(out.values())


def version_to_api(jv: JudgeVersion) -> dict[str, Any]:
    return {"name": jv.name, "version": jv.version, "content_hash": jv.content_hash,
            "created_at": jv.created_at.isoformat(), "definition": jv.definition}


# --------------------------------------------------------------------------- selection, estimate, plan

def select_pending(session: Session, jv: JudgeVersion, *, run_ids: Iterable[str] | None = None,
                   batch: str | None = None, limit: int | None = None,
                   scope: Any = None) -> tuple[list[tuple[int, str, str]], int]:
    """The runs to judge: ``[(run_pk, run_id, content_hash)]`` of the selection (every stored run,
    `run_ids`, or the runs of assignment batch `batch`; within a study's run-id subquery `scope`)
    that this version has not judged at their current content hash, at most `limit` of them; and
    how many were skipped as already judged."""
    q = select(Run.id, Run.run_id, Run.content_hash).order_by(Run.run_id)
    if scope is not None:
        q = q.where(Run.id.in_(scope))
    if run_ids:
        ids = list(dict.fromkeys(run_ids))
        found = set(session.exec(select(Run.run_id).where(Run.run_id.in_(ids))).all())
        missing = [r for r in ids if r not in found]
        if missing:
            raise JudgeError(f"no run {missing[0]!r}")
        q = q.where(Run.run_id.in_(ids))
    if batch:
        pks = select(Assignment.run_pk).where(Assignment.batch == batch)
        if session.exec(pks.limit(1)).first() is None:
            raise JudgeError(f"no assignment batch {batch!r}")
        q = q.where(Run.id.in_(pks))
    rows = session.exec(q).all()
    done = {(pk, h) for pk, h in session.execute(
        select(JudgeResult.run_pk, JudgeResult.run_hash).where(JudgeResult.judge_version_id == jv.id,
                                                               JudgeResult.state == "done"))}
    pending = [(pk, rid, h) for pk, rid, h in rows if (pk, h) not in done]
    skipped = len(rows) - len(pending)
    if limit is not None:
        pending = pending[:limit]
    return pending, skipped


def _setup_vars(session: Session, jv: JudgeVersion) -> dict[str, Any]:
    from app.core.config import get_settings
    from app.judges.prompts import taxonomy_vars

    tax = session.get(Taxonomy, jv.taxonomy_pk)
    return {"definition": jv.definition, "taxonomy_vars": taxonomy_vars(tax.definition, tax.key, tax.version,
                                                                        jv.definition.get("modes")),
            "threshold": get_settings().success_threshold, "taxonomy_pk": tax.id}


def _json_text(col):
    """A JSON column read as its text (decoded by `_loads`: orjson, much faster than the driver's json)."""
    return cast(col, Text)


def _loads(text: str | bytes | None) -> Any:
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:  # what orjson refuses and json reads (NaN, integers past 64 bits)
        return json.loads(text)


def prompt_runs(session: Session, run_pks: list[int]) -> dict[int, dict[str, Any]]:
    """What a prompt shows of each run (run id, status, scenario, principals, agents, events, in
    the canonical shape), read for many runs in one query per table (Core rows, JSON columns as
    text decoded with orjson)."""
    from app.runs.models import Agent, Event, Principal, Scenario

    if not run_pks:
        return {}
    conn = session.connection()
    rows = conn.execute(select(Run.id, Run.run_id, Run.status, Run.scenario_id,
                               _json_text(Run.scenario_override)).where(Run.id.in_(run_pks))).all()
    wanted = list({sc_id for _, _, _, sc_id, override in rows if override is None or _loads(override) is None})
    scenarios: dict[str, dict[str, Any]] = {sc_id: {"id": sc_id} for sc_id in wanted}
    for start in range(0, len(wanted), 500):
        for sc_id, family, alignment, title, description, extra in conn.execute(
                select(Scenario.id, Scenario.family, Scenario.alignment, Scenario.title, Scenario.description,
                       _json_text(Scenario.extra)).where(Scenario.id.in_(wanted[start:start + 500]))):
            scenarios[sc_id] = {"id": sc_id, "family": family, "alignment": alignment, "title": title,
                                "description": description, "metadata": dict(_loads(extra) or {})}
    out: dict[int, dict[str, Any]] = {}
    for pk, rid, status, sc_id, override in rows:
        over = _loads(override)
        out[pk] = {"run_id": rid, "status": status, "scenario": dict(over) if over is not None
                   else scenarios[sc_id], "principals": [], "agents": [], "events": []}
    for pk, pid, name, kind, objective, constraints in conn.execute(
            select(Principal.run_pk, Principal.principal_id, Principal.name, Principal.kind, Principal.objective,
                   _json_text(Principal.constraints)).where(Principal.run_pk.in_(run_pks))
            .order_by(Principal.run_pk, Principal.position)):
        out[pk]["principals"].append({"id": pid, "name": name, "kind": kind, "objective": objective,
                                      "constraints": list(_loads(constraints) or [])})
    for pk, aid, principal, role, model, state in conn.execute(
            select(Agent.run_pk, Agent.agent_id, Agent.principal_id, Agent.role, Agent.model,
                   _json_text(Agent.private_state)).where(Agent.run_pk.in_(run_pks))
            .order_by(Agent.run_pk, Agent.position)):
        out[pk]["agents"].append({"id": aid, "principal": principal, "role": role, "model": model,
                                  "private_state": dict(_loads(state) or {})})
    for pk, seq, kind, actor, recips, vis, content, data in conn.execute(
            select(Event.run_pk, Event.seq, Event.kind, Event.actor, _json_text(Event.recipients), Event.visibility,
                   Event.content, _json_text(Event.data)).where(Event.run_pk.in_(run_pks))
            .order_by(Event.run_pk, Event.seq)):
        out[pk]["events"].append({"seq": seq, "kind": kind, "actor": actor, "recipients": list(_loads(recips) or []),
                                  "visibility": vis, "content": content, "data": _loads(data)})
    return out


def load_runs(session: Session, items: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """The runner's reader: `prompt_runs` of the items' runs, its read transaction ended after."""
    try:
        return prompt_runs(session, [item["run_pk"] for item in items])
    finally:
        session.rollback()


def load_views(session: Session, setup: dict[str, Any], items: list[dict[str, Any]]) -> list[Any]:
    """The prompt data of each item's run (None for a run no longer stored)."""
    from app.judges.prompts import run_view

    runs = prompt_runs(session, [item["run_pk"] for item in items])
    session.expunge_all()
    return [None if item["run_pk"] not in runs else
            run_view(runs[item["run_pk"]], setup["taxonomy_vars"], success_threshold=setup["threshold"])
            for item in items]


def estimate(session: Session, jv: JudgeVersion, run_pks: list[int]) -> dict[str, Any]:
    """Tokens and cost the judge would spend on these runs, without a request: every call the
    strategy makes is rendered and counted (4 characters a token; step-by-step counted to the last
    step, the worst case). Output tokens: the answer's size is not known before, so each call is
    counted at min(max_tokens, 400); ``cost_max`` counts max_tokens."""
    from app.judges.prompts import estimate_tokens, render_messages
    from app.judges.strategies import judge

    setup = _setup_vars(session, jv)
    defn = jv.definition
    k = int(defn["sampling"]["samples"])
    totals = {"calls": 0, "tokens_in": 0}

    async def fake(spec):
        from app.judges.prompts import call_variables

        variables = call_variables(view, spec.window, kind=spec.kind, answer=spec.answer,
                                   strategy=defn["strategy"], **spec.extras)
        totals["calls"] += k
        totals["tokens_in"] += k * sum(estimate_tokens(m["content"]) for m in render_messages(defn["prompts"],
                                                                                             variables))
        if spec.answer == "labels":
            ans = {"verdict": "no_failure", "labels": []}
        elif spec.answer == "present":
            ans = {"present": False, "labels": []}
        elif spec.answer == "attribution_nullable":
            ans = {"agent": None, "step": None}
        else:
            seq = spec.window.first_seq
            ans = {"agent": view.actor_of.get(seq), "step": seq, "rationale": ""}
        return [(ans, [])] * k

    for start in range(0, len(run_pks), 200):
        items = [{"run_pk": pk} for pk in run_pks[start:start + 200]]
        for view in load_views(session, setup, items):
            if view is not None:
                asyncio.run(judge(defn, view, fake))
    max_out = int(defn["sampling"]["max_tokens"])
    tokens_out = totals["calls"] * min(max_out, 400)
    p_in = float(defn["prices"]["input_per_million"]) / 1e6
    p_out = float(defn["prices"]["output_per_million"]) / 1e6
    cost = totals["tokens_in"] * p_in + tokens_out * p_out
    cap = defn["limits"].get("cost_cap")
    return {"runs": len(run_pks), "calls": totals["calls"], "tokens_in": totals["tokens_in"],
            "tokens_out": tokens_out, "cost": round(cost, 6),
            "cost_max": round(totals["tokens_in"] * p_in + totals["calls"] * max_out * p_out, 6),
            "cost_cap": cap, "over_cap": cap is not None and cost > float(cap)}


def plan(session: Session, jv: JudgeVersion, *, run_ids: Iterable[str] | None = None, batch: str | None = None,
         limit: int | None = None, user: User | None = None, check_cap: bool = True, scope: Any = None) -> JudgeRun:
    """A queued judge run over the selection (see `select_pending`); refuses when the estimate
    exceeds the judge's cost cap, or another judge run of this version is still working. Runs left
    half done by an interrupted judge run are taken over. The caller commits."""
    from app.core.db import begin_write

    pending, skipped = select_pending(session, jv, run_ids=run_ids, batch=batch, limit=limit, scope=scope)
    est = estimate(session, jv, [pk for pk, _, _ in pending]) if check_cap and \
        jv.definition["limits"].get("cost_cap") is not None else {}
    if est.get("over_cap"):
        raise JudgeError(f"the estimated cost {est['cost']:.4f} for {est['runs']} runs exceeds the judge's cost cap "
                         f"{est['cost_cap']}")
    begin_write(session)  # SQLite: the write lock from here on (the estimate above only read)
    now = utcnow()
    for other in session.exec(select(JudgeRun).where(JudgeRun.judge_version_id == jv.id,
                                                     JudgeRun.state.in_(("queued", "running")))).all():
        beat = other.heartbeat_at or other.created_at
        if beat.tzinfo is None:
            beat = beat.replace(tzinfo=now.tzinfo)
        if other.state == "running" and now - beat < HEARTBEAT_STALE and not _worker_dead(other.worker):
            raise JudgeError(f"judge run {other.id} of {jv.name}@{jv.version} is still running; cancel it first")
        if other.state == "queued" and now - beat < HEARTBEAT_STALE:
            raise JudgeError(f"judge run {other.id} of {jv.name}@{jv.version} is queued; cancel it first")
        other.state, other.error, other.finished_at = "error", "interrupted (its runs were taken over)", now
        session.add(other)
    jr = JudgeRun(judge_version_id=jv.id, state="queued", total=len(pending), n_skipped=skipped, estimate=est,
                  selection={"run_ids": list(run_ids) if run_ids else None, "batch": batch, "limit": limit},
                  created_by=user.id if user is not None else None, heartbeat_at=now)
    session.add(jr)
    session.flush()
    existing = {(r.run_pk, r.run_hash): r for r in session.exec(
        select(JudgeResult).where(JudgeResult.judge_version_id == jv.id, JudgeResult.state != "done")).all()}
    new_rows = []
    for pk, _, h in pending:
        r = existing.get((pk, h))
        if r is not None:
            r.state, r.judge_run_id, r.error, r.updated_at = "queued", jr.id, None, now
            session.add(r)
        else:
            new_rows.append({"judge_version_id": jv.id, "judge_run_id": jr.id, "run_pk": pk, "run_hash": h,
                             "state": "queued", "answer": {}, "problems": [], "windows": 1, "truncated": False,
                             "n_calls": 0, "tokens_in": 0, "tokens_out": 0, "latency_ms": 0, "cost": 0.0,
                             "updated_at": now})
    for start in range(0, len(new_rows), 1000):
        session.connection().execute(insert(JudgeResult.__table__), new_rows[start:start + 1000])
    session.flush()
    return jr


def cancel(session: Session, jr: JudgeRun) -> JudgeRun:
    """Ask a judge run to stop (a queued one stops at once); the caller commits."""
    from app.core.db import begin_write

    begin_write(session)
    session.refresh(jr)
    if jr.state in ("done", "error", "cancelled"):
        raise JudgeError(f"judge run {jr.id} has already ended ({jr.state})")
    jr.cancel_requested = True
    if jr.state == "queued":
        jr.state, jr.finished_at = "cancelled", utcnow()
    session.add(jr)
    return jr


def execute(engine, judge_run_id: int, *, progress=None, cancel_event: threading.Event | None = None,
            processes: int | None = None):
    """Run a planned judge run to its end (blocking; the job system's unit of work). A failure of
    the runner itself ends the judge run in state error with the reason. `processes`: how many
    processes judge its runs (None: the judge file's ``limits.processes``, else automatic; see
    `app.judges.runner.processes_for`)."""
    from app.judges import runner

    try:
        return runner.execute(engine, judge_run_id, progress=progress, cancel=cancel_event, processes=processes)
    except Exception as exc:
        log.exception("judge run %s failed", judge_run_id)
        with Session(engine) as s:
            jr = s.get(JudgeRun, judge_run_id)
            if jr is not None and jr.state in ("queued", "running"):
                jr.state, jr.error, jr.finished_at = "error", f"{type(exc).__name__}: {exc}", utcnow()
                s.add(jr)
                s.commit()
        raise


def launch(engine, judge_run_id: int, user_id: int | None = None) -> str:
    """Hand a planned judge run to a background worker as a `judge` job (app.jobs) and return
    the job's id at once; the job's unit of work is `execute`."""
    from app.jobs.queue import send
    from app.jobs.service import create_job

    with Session(engine) as s:
        job_id = create_job(s, "judge", {"judge_run_id": judge_run_id}, user_id).id
    send(job_id, engine=engine)
    return job_id


# --------------------------------------------------------------------------- the runner's storage steps

def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _worker_dead(worker: str | None) -> bool:
    """True when `worker` is a process of this host that no longer runs."""
    if not worker or ":" not in worker:
        return False
    host, _, pid = worker.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    if int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def runner_setup(session: Session, judge_run_id: int, *, start: bool = True) -> dict[str, Any]:
    """What the runner needs of a judge run. ``start`` (the process that runs the judge run): its
    queued runs as ``items``, the judge run marked running by this process and its counters set to
    zero (every process then adds its own, `runner_flush`); else (a further process of the same
    judge run) only the judge's settings, nothing changed."""
    from app.auth.service import judge_user

    jr = session.get(JudgeRun, judge_run_id)
    if jr is None:
        raise JudgeError(f"no judge run {judge_run_id}")
    jv = session.get(JudgeVersion, jr.judge_version_id)
    user = judge_user(session, jv.name) if start else session.exec(
        select(User).where(User.username == f"judge:{jv.name}")).one()
    if user.kind != "judge":
        raise JudgeError(f"user {user.username!r} is not a judge account")
    setup = _setup_vars(session, jv)
    if not start:
        session.rollback()
        setup.update(items=[], total=0, done=0, judge_run_id=jr.id, judge_version_id=jv.id, version=jv.version,
                     name=jv.name, user_id=user.id, cancelled=bool(jr.cancel_requested))
        return setup
    rows = session.execute(
        select(JudgeResult.id, JudgeResult.run_pk, Run.run_id).join(Run, Run.id == JudgeResult.run_pk)
        .where(JudgeResult.judge_run_id == jr.id, JudgeResult.state != "done").order_by(Run.run_id)).all()
    items = [] if jr.cancel_requested else [{"result_id": i, "run_pk": pk, "run_id": rid} for i, pk, rid in rows]
    now = utcnow()
    jr.state = "cancelled" if jr.cancel_requested else "running"
    jr.n_done = jr.n_error = jr.n_calls = jr.tokens_in = jr.tokens_out = 0
    jr.cost = 0.0
    jr.worker = worker_id()
    jr.started_at = jr.started_at or now
    jr.heartbeat_at = now
    session.add(jr)
    session.commit()
    setup.update(items=items, total=len(items), done=0, judge_run_id=jr.id, judge_version_id=jv.id,
                 version=jv.version, name=jv.name, user_id=user.id, cancelled=bool(jr.cancel_requested))
    return setup


def cache_lookup(session: Session, keys: list[str]) -> dict[str, tuple[str, int, int]]:
    """The cached answers of these request keys (content, tokens in, tokens out), in one query per
    500 keys; keys not cached are absent."""
    t = JudgeCache.__table__
    out: dict[str, tuple[str, int, int]] = {}
    conn = session.connection()
    for start in range(0, len(keys), 500):
        for key, content, tin, tout in conn.execute(select(t.c.key, t.c.content, t.c.tokens_in, t.c.tokens_out)
                                                    .where(t.c.key.in_(keys[start:start + 500]))):
            out[key] = (content, tin, tout)
    session.rollback()  # end the read transaction (SQLite: no snapshot held between lookups)
    return out


_RESULT_COLS = ("state", "error", "raw", "verdict", "answer", "problems", "windows", "truncated", "confidence",
                "n_calls", "tokens_in", "tokens_out", "latency_ms", "cost", "annotation_id", "updated_at")


def _store_annotations(conn, setup: dict[str, Any], rows: list[dict[str, Any]], outcomes: list[Any],
                       now) -> None:
    """The judge annotations of a batch's done results (`rows`, each a result's new column values
    with ``b_run_pk``; `outcomes` beside them), all at once: the judge's earlier annotations on
    these runs (its own origin only) and their labels are deleted, the new annotations inserted
    in one statement returning their ids, their labels in one more. A run whose annotation by
    ``judge:<name>`` came from elsewhere (an import) keeps it, and its result says so."""
    ann, lab = Annotation.__table__, Label.__table__
    pks = list(dict.fromkeys(r["b_run_pk"] for r in rows))
    old = conn.execute(select(ann.c.id, ann.c.run_pk, ann.c.origin).where(
        ann.c.run_pk.in_(pks), ann.c.user_id == setup["user_id"], ann.c.taxonomy_pk == setup["taxonomy_pk"])).all()
    foreign = {pk: origin for _, pk, origin in old if origin != ORIGIN}
    mine = [aid for aid, _, origin in old if origin == ORIGIN]
    if mine:
        res = JudgeResult.__table__
        conn.execute(delete(lab).where(lab.c.annotation_id.in_(mine)))
        conn.execute(update(res).where(res.c.annotation_id.in_(mine)).values(annotation_id=None))
        conn.execute(delete(ann).where(ann.c.id.in_(mine)))
    last = {r["b_run_pk"]: i for i, r in enumerate(rows)}  # a run twice in a batch: the later answer holds
    todo: list[tuple[dict[str, Any], Any]] = []
    for i, (row, outcome) in enumerate(zip(rows, outcomes)):
        pk = row["b_run_pk"]
        if pk in foreign:
            row["b_problems"] = list(row["b_problems"]) + [
                f"judge:{setup['name']} already holds {foreign[pk]} labels on this run; "
                "the judge's answer is kept here only (rename the judge)"]
        elif last[pk] == i:
            todo.append((row, outcome))
    if not todo:
        return
    note = f"judge {setup['name']}@{setup['version']}"
    values = [{"run_pk": row["b_run_pk"], "user_id": setup["user_id"], "taxonomy_pk": setup["taxonomy_pk"],
               "status": "submitted", "no_failure": not o.labels, "origin": ORIGIN, "time_ms": 0,
               "note": note + (f" (confidence {o.confidence})" if o.confidence is not None else ""),
               "started_at": now, "updated_at": now, "submitted_at": now, "hints_on": None,
               "source_version": setup["version"], "version": 1} for row, o in todo]
    ids = conn.execute(insert(ann).returning(ann.c.id, sort_by_parameter_order=True), values).scalars().all()
    labels = []
    for ann_id, (row, o) in zip(ids, todo):
        row["b_annotation_id"] = ann_id
        labels.extend({"annotation_id": ann_id, "mode": x["mode"], "agent": x["agent"], "principals": [],
                       "evidence": list(x["evidence"]), "note": x.get("rationale") or None,
                       "confidence": x.get("confidence"), "time_ms": 0, "created_at": now} for x in o.labels)
    if labels:
        conn.execute(insert(lab), labels)


#: the judge run's counters a runner process adds to (`runner_flush`), by `Progress` field
COUNTERS = {"done": "n_done", "error": "n_error", "calls": "n_calls", "tokens_in": "tokens_in",
            "tokens_out": "tokens_out", "cost": "cost"}


def runner_flush(session: Session, setup: dict[str, Any], states: dict[int, str], results: list, cache: dict,
                 counters: dict[str, Any], finish: tuple[str, str | None] | None = None) -> tuple[bool, dict[str, Any]]:
    """One writer batch, in one transaction: states, cache entries, finished results with their
    calls and annotations (a few statements for the whole batch, not one set per run), the judge
    run's counters and heartbeat. `counters` are what this process added since its last batch
    (`COUNTERS`): they are written as increments (``n_done = n_done + 3``), so the processes of one
    judge run never overwrite each other's. `finish` (state, error): the last batch of a judge run
    in one process, which ends it in the same transaction (`runner_finish`). Returns whether the
    judge run was asked to stop and its counters after this batch (every process's)."""
    now = utcnow()
    conn = session.connection()
    res_t = JudgeResult.__table__
    if cache:
        have = set(conn.execute(select(JudgeCache.__table__.c.key).where(
            JudgeCache.__table__.c.key.in_(list(cache)))).scalars().all())
        rows = [{"key": k, "content": v[0], "tokens_in": v[1], "tokens_out": v[2], "created_at": now}
                for k, v in cache.items() if k not in have]
        if rows:
            conn.execute(insert(JudgeCache.__table__), rows)
    by_state: dict[str, list[int]] = {}
    for rid, st in states.items():
        by_state.setdefault(st, []).append(rid)
    for st, ids in by_state.items():
        conn.execute(update(res_t).where(res_t.c.id.in_(ids), res_t.c.state != "done")
                     .values(state=st, updated_at=now))
    latency = 0
    call_rows: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    done_rows: list[dict[str, Any]] = []
    outcomes: list[Any] = []
    if results:
        stored = dict(conn.execute(select(res_t.c.id, res_t.c.run_pk).where(
            res_t.c.id.in_([out.result_id for out in results]))).all())
    for out in results:
        if out.result_id not in stored:
            continue
        calls = out.calls
        row = {"b_id": out.result_id, "b_run_pk": stored[out.result_id], "b_n_calls": len(calls),
               "b_tokens_in": sum(c.tokens_in for c in calls), "b_tokens_out": sum(c.tokens_out for c in calls),
               "b_latency_ms": sum(c.latency_ms for c in calls), "b_cost": sum(c.cost for c in calls),
               "b_updated_at": now, "b_annotation_id": None}
        latency += row["b_latency_ms"]
        call_rows.extend({"result_id": out.result_id, "judge_run_id": setup["judge_run_id"], "position": c.position,
                          "request_key": c.request_key, "cached": c.cached, "status": c.status,
                          "attempts": c.attempts, "tokens_in": c.tokens_in, "tokens_out": c.tokens_out,
                          "latency_ms": c.latency_ms, "cost": c.cost, "error": c.error, "created_at": now}
                         for c in calls)
        o = out.outcome
        if o is None:
            row.update(b_state="error", b_error=out.error or "no outcome", b_raw=out.raw, b_verdict=None,
                       b_answer={}, b_problems=[], b_windows=1, b_truncated=False, b_confidence=None)
        else:
            row.update(b_state="done", b_error=None, b_raw=None,
                       b_verdict="attribution" if o.attribution is not None else o.verdict,
                       b_answer=o.answer(), b_problems=list(o.problems), b_windows=o.windows,
                       b_truncated=o.truncated, b_confidence=o.confidence)
            done_rows.append(row)
            outcomes.append(o)
        rows.append(row)
    if done_rows:
        _store_annotations(conn, setup, done_rows, outcomes, now)
    if rows:
        conn.execute(update(res_t).where(res_t.c.id == bindparam("b_id")).values(
            {c: bindparam(f"b_{c}", type_=res_t.c[c].type) for c in _RESULT_COLS}), rows)
    if call_rows:
        conn.execute(insert(JudgeCall.__table__), call_rows)
    jt = JudgeRun.__table__
    values: dict[str, Any] = {col: jt.c[col] + counters.get(key, 0) for key, col in COUNTERS.items()}
    values.update(latency_ms=jt.c.latency_ms + latency, heartbeat_at=now)
    conn.execute(update(jt).where(jt.c.id == setup["judge_run_id"]).values(values))
    row = conn.execute(select(jt.c.cancel_requested, *(jt.c[col] for col in COUNTERS.values()))
                       .where(jt.c.id == setup["judge_run_id"])).one()
    if finish is not None:
        _finish(session, setup["judge_run_id"], *finish)
    session.commit()
    return bool(row[0]), dict(zip(COUNTERS, row[1:]))


def runner_totals(session: Session, judge_run_id: int) -> tuple[bool, dict[str, Any]]:
    """Whether the judge run was asked to stop, and its counters (every process's), read now."""
    jt = JudgeRun.__table__
    row = session.connection().execute(select(jt.c.cancel_requested, *(jt.c[col] for col in COUNTERS.values()))
                                       .where(jt.c.id == judge_run_id)).one()
    session.rollback()
    return bool(row[0]), dict(zip(COUNTERS, row[1:]))


def runner_finish(session: Session, judge_run_id: int, state: str, error: str | None) -> None:
    """End the judge run: its state, error and end time, its sums over its calls; runs left
    ``running`` or ``delayed`` go back to ``queued``."""
    _finish(session, judge_run_id, state, error)
    session.commit()


def _finish(session: Session, judge_run_id: int, state: str, error: str | None) -> None:
    jr = session.get(JudgeRun, judge_run_id)
    session.refresh(jr)
    # runs that were in flight when the judge run stopped wait for the next one
    session.execute(update(JudgeResult).where(JudgeResult.judge_run_id == jr.id,
                                              JudgeResult.state.in_(("running", "delayed")))
                    .values(state="queued"))
    sums = session.execute(select(func.count(), func.coalesce(func.sum(JudgeCall.tokens_in), 0),
                                  func.coalesce(func.sum(JudgeCall.tokens_out), 0),
                                  func.coalesce(func.sum(JudgeCall.latency_ms), 0),
                                  func.coalesce(func.sum(JudgeCall.cost), 0.0))
                           .where(JudgeCall.judge_run_id == jr.id)).one()
    jr.n_calls, jr.tokens_in, jr.tokens_out, jr.latency_ms = int(sums[0]), int(sums[1]), int(sums[2]), int(sums[3])
    jr.cost = round(float(sums[4]), 8)
    jr.state, jr.error, jr.finished_at = state, error, utcnow()
    session.add(jr)
    session.flush()


# --------------------------------------------------------------------------- reading

def judge_run_to_api(jr: JudgeRun, jv: JudgeVersion, counts: dict[str, int] | None = None) -> dict[str, Any]:
    return {"id": jr.id, "judge": jv.name, "version": jv.version, "state": jr.state,
            "progress": {"done": jr.n_done + jr.n_error, "total": jr.total}, "judged": jr.n_done,
            "errors": jr.n_error, "skipped": jr.n_skipped, "states": counts or {}, "calls": jr.n_calls,
            "tokens_in": jr.tokens_in, "tokens_out": jr.tokens_out, "latency_ms": jr.latency_ms, "cost": jr.cost,
            "estimate": jr.estimate, "selection": jr.selection, "cancel_requested": jr.cancel_requested,
            "error": jr.error, "created_at": jr.created_at.isoformat(),
            "started_at": jr.started_at.isoformat() if jr.started_at else None,
            "finished_at": jr.finished_at.isoformat() if jr.finished_at else None}


def judge_run_status(session: Session, jr: JudgeRun) -> dict[str, Any]:
    jv = session.get(JudgeVersion, jr.judge_version_id)
    counts = {s: n for s, n in session.execute(select(JudgeResult.state, func.count())
                                               .where(JudgeResult.judge_run_id == jr.id)
                                               .group_by(JudgeResult.state))}
    return judge_run_to_api(jr, jv, counts)


def judge_runs(session: Session, name: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    q = select(JudgeRun, JudgeVersion).join(JudgeVersion, JudgeVersion.id == JudgeRun.judge_version_id)
    if name:
        q = q.where(JudgeVersion.name == name)
    return [judge_run_to_api(jr, jv) for jr, jv in session.exec(q.order_by(JudgeRun.id.desc()).limit(limit)).all()]


def get_judge_run(session: Session, name: str, run_id: int) -> JudgeRun:
    jr = session.get(JudgeRun, run_id)
    jv = session.get(JudgeVersion, jr.judge_version_id) if jr is not None else None
    if jr is None or jv is None or jv.name != name:
        raise JudgeError(f"judge {name!r} has no judge run {run_id}")
    return jr


def results(session: Session, jv: JudgeVersion, *, run_id: str | None = None, state: str | None = None,
            page: int = 1, page_size: int = 100) -> dict[str, Any]:
    q = select(JudgeResult, Run.run_id).join(Run, Run.id == JudgeResult.run_pk).where(
        JudgeResult.judge_version_id == jv.id)
    if run_id:
        q = q.where(Run.run_id == run_id)
    if state:
        q = q.where(JudgeResult.state == state)
    total = session.exec(select(func.count()).select_from(q.subquery())).one()
    rows = session.exec(q.order_by(Run.run_id, JudgeResult.id).offset((page - 1) * page_size).limit(page_size)).all()
    return {"judge": jv.name, "version": jv.version, "total": total, "page": page, "page_size": page_size,
            "results": [{"run_id": rid, "run_hash": r.run_hash, "state": r.state, "verdict": r.verdict,
                         "answer": r.answer, "problems": r.problems, "error": r.error, "raw": r.raw,
                         "windows": r.windows, "truncated": r.truncated, "confidence": r.confidence,
                         "calls": r.n_calls, "tokens_in": r.tokens_in, "tokens_out": r.tokens_out,
                         "latency_ms": r.latency_ms, "cost": r.cost, "judge_run": r.judge_run_id}
                        for r, rid in rows]}


# --------------------------------------------------------------------------- calibration

def _reference(session: Session, tax_pk: int, run_pks: list[int]) -> dict[int, dict[str, Any]]:
    """Per run: gold (adjudicated) where it exists, else the human majority: a (mode, agent) is in
    it when more than half of the humans who submitted on the run labelled it (evidence: the union
    of theirs). Runs without either are absent."""
    out: dict[int, dict[str, Any]] = {}
    wanted = set(run_pks)
    gold = session.execute(select(GoldRun.id, GoldRun.run_pk).where(GoldRun.taxonomy_pk == tax_pk,
                                                                   GoldRun.status == "adjudicated")).all()
    gold_of = {gid: pk for gid, pk in gold if pk in wanted}
    for pk in gold_of.values():
        out[pk] = {"source": "gold", "labels": {}}
    if gold_of:
        ids = list(gold_of)
        for start in range(0, len(ids), 5000):
            for gid, mode, agent, ev in session.execute(
                    select(GoldLabel.gold_run_id, GoldLabel.mode, GoldLabel.agent, GoldLabel.evidence)
                    .where(GoldLabel.gold_run_id.in_(ids[start:start + 5000]), GoldLabel.accepted.is_(True))):
                out[gold_of[gid]]["labels"][(mode, agent or "")] = set(ev or [])
    anns = session.execute(select(Annotation.id, Annotation.run_pk).join(User, User.id == Annotation.user_id)
                           .where(Annotation.taxonomy_pk == tax_pk, Annotation.status == "submitted",
                                  User.kind == "human")).all()
    by_run: dict[int, list[int]] = {}
    for aid, pk in anns:
        if pk in wanted and pk not in out:
            by_run.setdefault(pk, []).append(aid)
    ann_ids = [a for ids in by_run.values() for a in ids]
    labs: dict[int, list[tuple[str, str, list[int]]]] = {}
    for start in range(0, len(ann_ids), 5000):
        for aid, mode, agent, ev in session.execute(
                select(Label.annotation_id, Label.mode, Label.agent, Label.evidence)
                .where(Label.annotation_id.in_(ann_ids[start:start + 5000]))):
            if mode is not None:
                labs.setdefault(aid, []).append((mode, agent or "", list(ev or [])))
    for pk, ids in by_run.items():
        votes: dict[tuple[str, str], int] = {}
        evidence: dict[tuple[str, str], set[int]] = {}
        for aid in ids:
            for key in {(m, a) for m, a, _ in labs.get(aid, [])}:
                votes[key] = votes.get(key, 0) + 1
            for m, a, ev in labs.get(aid, []):
                evidence.setdefault((m, a), set()).update(ev)
        out[pk] = {"source": "human majority", "n_humans": len(ids),
                   "labels": {k: evidence[k] for k, n in votes.items() if n * 2 > len(ids)}}
    return out


def score(session: Session, ref: str, *, n_boot: int = 1000, seed: int = 0, k: int = 1,
          confidence: float = 0.95, versions: bool = True) -> dict[str, Any]:
    """Calibration of a judge version (``name`` = its latest version with results) against gold /
    the human majority; see `app.judges.scoring.score_judge`. ``versions``: kappa of every version."""
    from app.judges.scoring import score_judge
    from app.taxonomies.service import mode_category, mode_codes

    name, version = split_ref(ref)
    if version is None:
        with_results = session.exec(
            select(JudgeVersion).join(JudgeResult, JudgeResult.judge_version_id == JudgeVersion.id)
            .where(JudgeVersion.name == name, JudgeResult.state == "done").order_by(JudgeVersion.id.desc())).first()
        jv = with_results or resolve_judge(session, name)
    else:
        jv = resolve_judge(session, ref)
    tax = session.get(Taxonomy, jv.taxonomy_pk)
    modes = [m for m in mode_codes(tax) if not jv.definition.get("modes")
             or m.upper() in {x.upper() for x in jv.definition["modes"]}]
    units = _judge_units(session, jv)
    refs = _reference(session, tax.id, [u["run_pk"] for u in units])
    rep = score_judge(units, refs, modes, mode_category(tax), attribution=jv.definition["strategy"].startswith(
        "attribution-"), k=k, n_boot=n_boot, seed=seed, confidence=confidence)
    rep.update(judge=jv.name, version=jv.version, taxonomy=f"{tax.key}@{tax.version}",
               strategy=jv.definition["strategy"], model=jv.definition["endpoint"]["model"])
    if versions:
        rows = []
        for other in session.exec(select(JudgeVersion).where(JudgeVersion.name == jv.name)
                                  .order_by(JudgeVersion.id)).all():
            us = _judge_units(session, other)
            if not us:
                rows.append({"version": other.version, "created_at": other.created_at.isoformat(), "n_runs": 0,
                             "kappa": None, "f1": None})
                continue
            r = score_judge(us, _reference(session, tax.id, [u["run_pk"] for u in us]), modes, mode_category(tax),
                            attribution=other.definition["strategy"].startswith("attribution-"), k=k, n_boot=0,
                            seed=seed, confidence=confidence)
            rows.append({"version": other.version, "created_at": other.created_at.isoformat(),
                         "n_runs": r["n_runs"], "kappa": r["overall"]["kappa"]["value"],
                         "f1": r["overall"]["f1"]})
        rep["versions"] = rows
    return rep


def _judge_units(session: Session, jv: JudgeVersion) -> list[dict[str, Any]]:
    """The done results of a version on the runs' current content, one per run."""
    rows = session.execute(
        select(JudgeResult.run_pk, Run.run_id, JudgeResult.answer, JudgeResult.tokens_in, JudgeResult.tokens_out,
               JudgeResult.cost)
        .join(Run, (Run.id == JudgeResult.run_pk) & (Run.content_hash == JudgeResult.run_hash))
        .where(JudgeResult.judge_version_id == jv.id, JudgeResult.state == "done").order_by(Run.run_id)).all()
    return [{"run_pk": pk, "run_id": rid, "labels": (ans or {}).get("labels", []),
             "attribution": (ans or {}).get("attribution"), "tokens": (tin or 0) + (tout or 0), "cost": cost or 0.0}
            for pk, rid, ans, tin, tout, cost in rows]
