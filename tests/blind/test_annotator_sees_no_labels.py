"""Blind mode on imported datasets: a blind annotator walks every GET route of the app and finds no label.

For each imported dataset shape (Who&When, MAD full and human-labelled, a release-style tree with
L0/L1 checks and L2 judgements, OpenTelemetry with GenAI evaluation results, a canonical file
and an import profile that mark their own fields hidden), plus judge output imported as labels:

* the secrets are read from the database as stored (keys and values that hold labels, answers
  or judgements, and the names of the sources that made labels);
* every GET route the app serves (enumerated from ``app.routes``) is requested as the blind
  annotator ``alice``, with its path parameters filled from the real data (every run, every
  taxonomy, every export table in every format), Parquet and zip bodies decoded;
* no response holds a secret, and the walk did reach the run pages, the run API and the exports.

On SQLite and PostgreSQL (the ``engine`` fixture).
"""
from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from urllib.parse import quote

import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from app.annotations.labels_import import import_labels
from app.annotations.models import Annotation, Assignment, Label
from app.auth.models import User
from app.exports.schema import TABLES
from app.ingest.loader import import_paths
from app.jobs.models import Job
from app.jobs.service import create_job
from app.judges.models import JudgeVersion
from app.main import create_app
from app.runs.models import Agent, Audit, Check, Event, Run
from app.studies.models import Study
from app.taxonomies.models import Taxonomy
from tests.annotations.factories import make_user
from tests.api.clients import login
from tests.api.test_route_access import app_routes

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT / "datasets" / "data"
INGEST = ROOT / "ingest" / "data"

#: keys that, when a reader stored them, hold a label, an answer or a judgement
SECRET_KEYS = ("mistake_agent", "mistake_step", "mistake_reason", "mistake_type", "ground_truth", "audited_by",
               "mast_annotation", "unmapped_audits", "import_warnings", "hidden_keys", "gen_ai.evaluation",
               "annotator_1", "CANARY")
#: the judge output imported as labels (a labels file from an automated judge)
JUDGE_NOTE = "CANARY-judge-verdict: the buyer overpaid"


def _otlp_with_evaluation(tmp: Path) -> Path:
    """The hand-written OTLP file, with a GenAI evaluation result on its first span."""
    doc = json.loads((INGEST / "otlp" / "handwritten.json").read_text())
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span.setdefault("events", []).append({
        "timeUnixNano": "1780000001000000000", "name": "gen_ai.evaluation.result", "attributes": [
            {"key": "gen_ai.evaluation.name", "value": {"stringValue": "Relevance"}},
            {"key": "gen_ai.evaluation.score.label", "value": {"stringValue": "CANARY-irrelevant"}},
            {"key": "gen_ai.evaluation.explanation", "value": {"stringValue": "CANARY-eval: ignores the question"}}]})
    span["attributes"].append({"key": "gen_ai.evaluation.score.value", "value": {"doubleValue": 0.125}})
    path = tmp / "otlp_eval.json"
    path.write_text(json.dumps(doc))
    return path


def _canonical_hidden(tmp: Path) -> Path:
    """A canonical run whose own `metadata.hidden` section and `hidden_keys` hide fields."""
    run = {
        "run_id": "canon-hidden-1",
        "scenario": {"id": "deal/s1", "family": "deal", "title": "A deal"},
        "status": "completed",
        "principals": [{"id": "buyer", "name": "Buyer", "outcome": {"success": False}}],
        "agents": [{"id": "buyer_agent", "principal": "buyer",
                    "metadata": {"audited_by": ["judge-l2"], "grader_note": "CANARY-agent-note", "style": "terse"}},
                   {"id": "seller_agent"}],
        "events": [{"seq": 0, "kind": "message", "actor": "buyer_agent", "recipients": ["seller_agent"],
                    "visibility": "shared", "content": "Would you take 18,000?",
                    "metadata": {"verdict": "CANARY-event-verdict", "tokens": 9}},
                   {"seq": 1, "kind": "message", "actor": "seller_agent", "recipients": ["buyer_agent"],
                    "visibility": "shared", "content": "No, 19,500."}],
        "audits": [{"source": "judge-l2", "mode": "VF1", "agent": "buyer_agent", "evidence": [0],
                    "note": "CANARY-audit-note"}],
        "metadata": {"hidden": {"answer": "CANARY-hidden-section"}, "expected_price": "CANARY-price-19000",
                     "hidden_keys": ["expected_price", "agents.grader_note", "events.verdict"],
                     "audited_by": ["judge-l2"], "harness_version": "1.2"},
    }
    path = tmp / "canon.jsonl"
    path.write_text(json.dumps(run) + "\n")
    return path


def _profiled_tree(tmp: Path) -> tuple[Path, Path]:
    """A release in someone else's layout (L0/L1 checks, L2 judgements with "no failure" verdicts)
    with the profile `a2annotate inspect` writes for it, plus `hidden: [harness]`."""
    import yaml

    from app.ingest.inspect import infer_profile
    from tests.ingest.release_fixtures import build_release

    root = tmp / "release"
    build_release(root, n_runs=2)
    spec = dict(infer_profile(root).spec)
    spec["hidden"] = ["harness"]
    path = tmp / "profile.yaml"
    path.write_text(yaml.safe_dump(spec))
    return root, path


#: what each shape must have stored as secret (so the walk proves something about it)
EXPECTED_SECRETS = {
    "whowhen": {"mistake_reason", "ground_truth", "whowhen:annotators", "It misread the terminal output 1890 as 1980."},
    "mad": {"mast_annotation", "annotator_1", "mad:annotator_1", "judge:mast-llm"},
    "release-audits": {"Offered without approval"},
    "otlp": {"gen_ai.evaluation", "CANARY-eval: ignores the question"},
    "canonical-hidden": {"CANARY-hidden-section", "CANARY-price-19000", "CANARY-agent-note", "CANARY-event-verdict",
                         "CANARY-audit-note", "audited_by"},
    "profile-hidden": {"hidden_keys", "contract-arena 2.1", "audited_by"},
}
SHAPES = ("whowhen", "mad", "release-audits", "otlp", "canonical-hidden", "profile-hidden")


def _import(engine, shape: str, tmp: Path) -> None:
    profile = None
    if shape == "whowhen":
        paths = [DATASETS / "whowhen"]
    elif shape == "mad":
        paths = [DATASETS / "MAD_full_dataset.json", DATASETS / "MAD_human_labelled_dataset.json"]
    elif shape == "release-audits":
        paths = [INGEST / "tree_release"]
    elif shape == "otlp":
        paths = [_otlp_with_evaluation(tmp)]
    elif shape == "canonical-hidden":
        paths = [_canonical_hidden(tmp)]
    else:
        root, profile = _profiled_tree(tmp)
        paths = [root]
    summary = import_paths(engine, [str(p) for p in paths], profile=str(profile) if profile else None)
    assert summary.imported >= 1 and not summary.errors, summary.to_dict()


def _import_judge_labels(session: Session) -> None:
    """Judge output imported as labels: one label per run by `judge:gpt-judge`, with a verdict note."""
    lines = ["annotator,run_id,mode,agent,evidence,note"]
    for run in session.exec(select(Run)).all():
        agent = session.exec(select(Agent.agent_id).where(Agent.run_pk == run.id).order_by(Agent.position)).first()
        seq = session.exec(select(Event.seq).where(Event.run_pk == run.id).order_by(Event.seq)).first()
        if agent is None:  # a MAD log whose framework style is not recognised has no agents
            continue
        lines.append(f'judge:gpt-judge,{run.run_id},DD1,{agent},{seq},"{JUDGE_NOTE}"')
    summary = import_labels(session, "\n".join(lines) + "\n", "judge.csv")
    assert summary.imported >= 1 and not summary.errors, summary.to_dict()


def _walk_values(value, out: set[str]) -> None:
    if isinstance(value, dict):
        for v in value.values():
            _walk_values(v, out)
    elif isinstance(value, list):
        for v in value:
            _walk_values(v, out)
    elif isinstance(value, str) and len(value) >= 12:
        out.add(value)


def _secrets(session: Session, self_name: str) -> set[str]:
    """What a blind annotator must never read: the secret keys present in the stored data, the
    values under them (texts of 12+ characters that the trace itself does not show), audit and
    check notes, other annotators' label notes, and the names of every other annotator."""
    stored = []
    for (extra,) in session.execute(select(Run.extra)):
        stored.append(extra)
    for (extra,) in session.execute(select(Agent.extra)):
        stored.append(extra)
    for (extra, data) in session.execute(select(Event.extra, Event.data)):
        stored.append(extra)
        stored.append(data)
    text = json.dumps(stored, ensure_ascii=False)
    found = {k for k in SECRET_KEYS if k in text}
    values: set[str] = set()
    hidden_paths = ("mistake_reason", "ground_truth", "hidden", "expected_price", "grader_note", "verdict",
                    "gen_ai.evaluation.explanation", "gen_ai.evaluation.score.label", "audited_by",
                    "unmapped_audits")

    def pick(obj) -> None:
        if isinstance(obj, dict):
            for k, v in obj.items():
                if k in hidden_paths:
                    _walk_values(v, values)
                else:
                    pick(v)
        elif isinstance(obj, list):
            for v in obj:
                pick(v)

    pick(stored)
    shown = json.dumps([c for (c,) in session.execute(select(Event.content))], ensure_ascii=False)
    taxonomy_keys = {k for (k,) in session.execute(select(Taxonomy.key))}
    values = {v for v in values if v not in shown and v not in taxonomy_keys}
    if "hidden_keys" in text:  # what a profile or a file declared hidden: its values (whole JSON texts)
        for (extra,) in session.execute(select(Run.extra)):
            for path in (extra or {}).get("hidden_keys") or []:
                cur = extra
                for part in path.split("."):
                    cur = cur.get(part) if isinstance(cur, dict) else None
                if isinstance(cur, str) and len(cur) >= 6:
                    values.add(cur)
                elif isinstance(cur, (dict, list)) and cur:
                    _walk_values(cur, values)
    for (note,) in session.execute(select(Audit.note).where(Audit.note.is_not(None))):
        if len(note) >= 12:
            values.add(note)
    for (detail,) in session.execute(select(Check.detail).where(Check.detail.is_not(None))):
        if len(detail) >= 12:
            values.add(detail)
    for (note,) in session.execute(select(Label.note).join(Annotation, Annotation.id == Label.annotation_id)
                                   .join(User, User.id == Annotation.user_id)
                                   .where(Label.note.is_not(None), User.username != self_name)):
        if len(note) >= 12:
            values.add(note)
    names = {n for (n,) in session.execute(select(User.username).join(Annotation, Annotation.user_id == User.id))
             if n != self_name}
    return found | values | names


def _urls(app, session: Session) -> list[str]:
    """Every GET route, path parameters filled from the data (and the query a route needs)."""
    runs = [r for (r,) in session.execute(select(Run.run_id).order_by(Run.run_id))]
    taxes = sorted({k for (k,) in session.execute(select(Taxonomy.key))})
    urls: list[str] = []
    for method, path in sorted(app_routes(app)):
        if method != "GET" or path in ("/openapi.json", "/docs", "/redoc", "/redoc/redoc.standalone.js"):
            continue
        if path.startswith(("/api/v1/judges/{name}", "/judges/{name}")):
            names = [n for (n,) in session.execute(select(JudgeVersion.name).distinct())] + ["gpt-judge"]
            for name in names:
                base = path.replace("{name}", name)
                if "{run_id:path}" in base:
                    urls += [base.replace("{run_id:path}", quote(rid, safe="/")) for rid in runs]
                else:
                    urls.append(base.replace("{run_id}", "1"))
        elif "{run_id:path}" in path:
            for rid in runs:
                base = path.replace("{run_id:path}", quote(rid, safe="/"))
                urls.append(base)
                if path == "/runs/{run_id:path}":
                    urls += [f"{base}?taxonomy={t}" for t in taxes]
        elif "{ref}" in path:
            urls += [path.replace("{ref}", t) for t in taxes]
        elif path == "/api/v1/exports/{table}.{fmt}":
            urls += [f"/api/v1/exports/{name}.{fmt}" for name, spec in TABLES.items() for fmt in spec.formats]
        elif path in ("/api/v1/exports/labels_wide.{fmt}", "/estimates/data.{fmt}"):
            urls += [path.replace("{fmt}", fmt) for fmt in ("csv", "parquet")]
        elif path == "/reports/data/{name}.csv":
            urls += [f"/reports/data/{n}.csv" for n in ("outcomes", "blind_spots")]
        elif path == "/api/v1/studies/{name}":
            urls += [path.replace("{name}", n) for (n,) in session.execute(select(Study.name))] + [
                path.replace("{name}", "nope")]
        elif path in ("/api/v1/jobs/{job_id}", "/api/v1/jobs/{job_id}/file", "/jobs/{job_id}"):
            urls += [path.replace("{job_id}", j) for (j,) in session.execute(select(Job.id))]
        elif "{" in path:
            raise AssertionError(f"GET route {path}: say in this test how to fill its parameters")
        elif path == "/api/v1/annotations/mine":
            urls += [f"{path}?run_id={quote(rid, safe='')}" for rid in runs]
        elif path == "/exports/download":
            urls += [f"{path}?table={name}&fmt={fmt}" for name, spec in TABLES.items() for fmt in spec.formats]
        elif path == "/api/v1/annotations":
            urls += [path, f"{path}?page_size=200"]
        elif path == "/estimates":
            urls += [path, f"{path}?target=mode:DD1", f"{path}?target=mode:DD1&judge=judge:gpt-judge"]
        elif path == "/api/v1/estimates":
            urls += [f"{path}?mode=DD1", f"{path}?mode=DD1&judge=judge:gpt-judge"]
        else:
            urls.append(path)
    return urls


def _body_text(res) -> str:
    """The response as text: Parquet decoded to its rows, zips opened member by member."""
    data = res.content
    if data[:4] == b"PAR1":
        return json.dumps(pq.read_table(io.BytesIO(data)).to_pylist(), ensure_ascii=False, default=str)
    if data[:2] == b"PK":
        parts = []
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            for name in z.namelist():
                member = z.read(name)
                parts.append(json.dumps(pq.read_table(io.BytesIO(member)).to_pylist(), default=str)
                             if member[:4] == b"PAR1" else member.decode("utf-8", "replace"))
        return "\n".join(parts)
    return data.decode("utf-8", "replace")


@pytest.mark.parametrize("shape", SHAPES)
def test_blind_annotator_reads_no_label_anywhere(engine, shape, tmp_path):
    _import(engine, shape, tmp_path)
    with Session(engine) as s:
        _import_judge_labels(s)
        alice = make_user(s, "alice")
        tax = s.exec(select(Taxonomy).where(Taxonomy.key == "a2-failures")).first()
        for i, run in enumerate(s.exec(select(Run).order_by(Run.run_id)).all()):  # her queue holds every run
            s.add(Assignment(run_pk=run.id, user_id=alice.id, taxonomy_pk=tax.id, position=i, batch="b1"))
        s.commit()
        secrets = _secrets(s, "alice")
        # a reviewer's import job whose result quotes every secret (as an import's warnings can)
        rev = make_user(s, "rev-jobs", role="reviewer")
        job = create_job(s, "import", {"path": "/x", "filename": "x.json", "folder": None}, rev.id)
        job.state, job.result = "done", {"warnings": sorted(secrets)}
        s.add(job)
        s.commit()
        app = create_app(engine)
        urls = _urls(app, s)
    assert "judge:gpt-judge" in secrets and JUDGE_NOTE in secrets
    assert len(secrets - {"judge:gpt-judge", JUDGE_NOTE}) >= 3, f"{shape}: the data holds too few secrets to prove anything"
    assert EXPECTED_SECRETS[shape] <= secrets, f"{shape}: {EXPECTED_SECRETS[shape] - secrets} not among the secrets"
    client = TestClient(app)
    login(client, "alice")
    leaks: list[str] = []
    ok = {"page": 0, "api": 0, "export": 0}
    for url in urls:
        res = client.get(url, follow_redirects=True)
        assert res.status_code in (200, 403, 404, 422), f"{url}: {res.status_code} {res.text[:300]}"
        if res.status_code != 200:
            continue
        if url.startswith("/runs/"):
            ok["page"] += 1
        elif url.startswith("/api/v1/runs/"):
            ok["api"] += 1
        elif "/exports/" in url:
            ok["export"] += 1
        text = _body_text(res)
        for secret in secrets:
            for form in {secret, json.dumps(secret)[1:-1], secret.replace("&", "&amp;").replace("<", "&lt;")
                         .replace(">", "&gt;").replace('"', "&#34;").replace("'", "&#39;")}:
                if form in text:
                    at = text.index(form)
                    leaks.append(f"{url}: {secret[:60]!r} in …{text[max(0, at - 80):at + 60]!r}…")
                    break
    assert all(ok.values()), f"{shape}: the walk reached too little: {ok}"
    assert not leaks, f"{shape}: a blind annotator reads labels ({len(leaks)}):\n" + "\n".join(leaks[:25])
