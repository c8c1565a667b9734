"""The wide labels file (one row per run, `<annotator>.<mode>` columns) on the hand-built corpus
(tests/reports_db/corpus.py), both databases: values 1 / 0 / empty, drafts ignored, the batch
filter, blind mode; and the pure `wide_rows`."""
from __future__ import annotations

import csv
import io

import pyarrow.parquet as pq
from sqlmodel import Session

from app.annotations.models import Assignment
from app.auth.service import get_user
from app.exports.wide import wide_rows
from app.runs.service import get_run
from app.taxonomies.service import latest


def _csv(res) -> list[dict]:
    assert res.status_code == 200, res.text
    return list(csv.DictReader(io.StringIO(res.text)))


def test_wide_rows_on_plain_data():
    cols, rows = wide_rows([("r1", "f", "t1"), ("r2", "f", None), ("r3", None, None)],
                           {("r1", "bo"): {"A"}, ("r1", "al"): set(), ("r2", "al"): {"A", "B"}}, ["A", "B"])
    assert cols == ["run_id", "family", "title", "n_annotators", "al.A", "al.B", "bo.A", "bo.B"]
    assert rows == [
        {"run_id": "r1", "family": "f", "title": "t1", "n_annotators": 2, "al.A": 0, "al.B": 0, "bo.A": 1, "bo.B": 0},
        {"run_id": "r2", "family": "f", "title": None, "n_annotators": 1, "al.A": 1, "al.B": 1,
         "bo.A": None, "bo.B": None},
    ]  # r3: nobody submitted it, left out


def test_labels_wide_export(client, tokens, engine):
    rows = {r["run_id"]: r for r in _csv(client.get("/api/v1/exports/labels_wide.csv", headers=tokens["rita"]))}
    assert set(rows) >= {"r1", "r2", "r3", "r5"}
    r1, r2, r3 = rows["r1"], rows["r2"], rows["r3"]
    assert (r1["alice.CF1"], r1["alice.DD2"], r1["bob.DD2"], r1["bob.CF1"]) == ("1", "0", "1", "0")
    assert r1["carol.CF1"] == "" and r1["n_annotators"] == "2"          # carol did not annotate r1
    assert (r2["alice.VF1"], r2["alice.DD1"], r2["bob.VF1"], r2["bob.DD1"], r2["carol.VF1"]) == ("1", "1", "1", "0", "0")
    assert r3["bob.GR1"] == "" and r3["alice.GR1"] == "0"                # bob's draft does not count
    with Session(engine) as s:
        n_modes = len(latest(s, "a2-failures").definition["modes"])
    header = client.get("/api/v1/exports/labels_wide.csv", headers=tokens["rita"]).text.splitlines()[0].split(",")
    assert header[:4] == ["run_id", "family", "title", "n_annotators"]
    assert sum(1 for c in header if c.startswith("alice.")) == n_modes

    # the batch filter: only the runs assigned in that batch
    with Session(engine) as s:
        tax = latest(s, "a2-failures")
        for pos, rid in enumerate(("r1", "r3")):
            s.add(Assignment(run_pk=get_run(s, rid).id, user_id=get_user(s, "alice").id, taxonomy_pk=tax.id,
                             position=pos, batch="week-1"))
        s.commit()
    only = _csv(client.get("/api/v1/exports/labels_wide.csv", params={"batch": "week-1"}, headers=tokens["rita"]))
    assert sorted(r["run_id"] for r in only) == ["r1", "r3"]
    runs = _csv(client.get("/api/v1/exports/runs.csv", params={"batch": "week-1"}, headers=tokens["rita"]))
    assert sorted(r["run_id"] for r in runs) == ["r1", "r3"]               # the same filter on a table
    events = _csv(client.get("/api/v1/exports/events.csv", params={"batch": "week-1"}, headers=tokens["rita"]))
    assert {r["run_id"] for r in events} == {"r1", "r3"}

    # Parquet: the same columns, 0/1/null
    res = client.get("/api/v1/exports/labels_wide.parquet", headers=tokens["rita"])
    table = pq.read_table(io.BytesIO(res.content))
    got = {r["run_id"]: r for r in table.to_pylist()}
    assert got["r1"]["alice.CF1"] == 1 and got["r1"]["carol.CF1"] is None and got["r1"]["bob.CF1"] == 0

    # blind mode: everyone's labels, so an annotator is refused; a bad taxonomy or format is a 422
    res = client.get("/api/v1/exports/labels_wide.csv", headers=tokens["alice"])
    assert res.status_code == 403 and "blind mode" in res.json()["detail"]
    assert client.get("/api/v1/exports/labels_wide.csv", params={"taxonomy": "nope@9"},
                      headers=tokens["rita"]).status_code == 422
    assert client.get("/api/v1/exports/labels_wide.jsonl", headers=tokens["rita"]).status_code == 422
