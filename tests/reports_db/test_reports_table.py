"""The outcome table at scale: a minimum-runs filter and sortable columns (page and CSV alike)."""
from __future__ import annotations

import csv
import io
import re

from fastapi.testclient import TestClient
from sqlmodel import Session

from app.main import create_app
from tests.web.helpers import login, page_run, store, user


def _groups(res, col: int) -> list[str]:
    assert res.status_code == 200, res.text
    body = res.text.split('id="outcome-table"')[1].split("<tbody>")[1].split("</tbody>")[0]
    rows = [re.findall(r"<td[^>]*>(.*?)</td>", row, re.S) for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)]
    return [cells[col].strip() for cells in rows if cells]


def test_min_runs_filter_and_sortable_outcome_table(engine):
    with Session(engine) as s:
        for i, fam in enumerate(["commerce"] * 3 + ["legal"] * 2 + ["travel"]):
            store(s, page_run(f"t-{i}", family=fam, n_events=4))
        user(s, "rev", "reviewer")
        s.commit()
    c = TestClient(create_app(engine))
    login(c, "rev")
    every = list(csv.DictReader(io.StringIO(c.get("/reports/data/outcomes.csv?by=family").text)))
    n_keys = list(every[0]).index("runs")
    assert {r["family"]: int(r["runs"]) for r in every} == {"commerce": 3, "legal": 2, "travel": 1}

    res = c.get("/reports?by=family&min_runs=2")
    assert sorted(_groups(res, 0)) == ["commerce", "legal"]
    assert "1 group with fewer than 2 runs hidden" in res.text
    kept = list(csv.DictReader(io.StringIO(c.get("/reports/data/outcomes.csv?by=family&min_runs=2").text)))
    assert {r["family"] for r in kept} == {"commerce", "legal"}

    asc = [int(x) for x in _groups(c.get("/reports?by=family&sort=runs&dir=asc"), n_keys)]
    desc = [int(x) for x in _groups(c.get("/reports?by=family&sort=runs&dir=desc"), n_keys)]
    assert asc == [1, 2, 3] and desc == [3, 2, 1]
    assert _groups(c.get("/reports?by=family&sort=family&dir=asc"), 0) == ["commerce", "legal", "travel"]
    page = c.get("/reports?by=family&sort=runs&dir=desc&min_runs=2").text
    assert 'aria-sort="descending"' in page and "sort=runs&amp;dir=asc" in page  # a second click reverses
    assert "min_runs=2" in page.split('id="outcome-table"')[1].split("</thead>")[0]  # sorting keeps the filter
    assert c.get("/reports?by=family&sort=nope").status_code == 422
    assert c.get("/reports?by=family&min_runs=0").status_code == 422
    assert c.get("/reports?by=family&min_runs=").status_code == 200
