"""Attribution labelling under a taxonomy with an attribution schema (who-and-when): labels are
(agent, one step, reason) without a mode; the run page offers the attribution picker; reviewers see
the dataset's attribution; the agreement page shows attribution agreement (exact and within k).
Both databases."""
from __future__ import annotations

import json
import re
from pathlib import Path

from fastapi.testclient import TestClient
from sqlmodel import Session

from app.ingest.loader import import_paths
from app.main import create_app
from app.taxonomies.service import attribution_schema, latest
from tests.annotations.factories import make_user
from tests.api.clients import login

DATA = Path(__file__).resolve().parents[1] / "datasets" / "data" / "whowhen"
HAND = "whowhen/Hand-Crafted/q-albums-01"


def _config(html: str) -> dict:
    return json.loads(re.search(r'<script type="application/json" id="run-config">(.*?)</script>', html, re.S)
                      .group(1))


def test_attribution_taxonomy_labels_page_and_agreement(engine):
    assert import_paths(engine, [str(DATA)]).imported == 2
    with Session(engine) as s:
        tax = latest(s, "who-and-when")
        assert attribution_schema(tax) == {"description": attribution_schema(tax)["description"],
                                           "reason": "optional", "k": 1}
        assert attribution_schema(latest(s, "a2-failures")) is None
        for name in ("ann", "bob"):
            make_user(s, name)
        make_user(s, "rev", "reviewer")
        s.commit()
    app = create_app(engine)
    ann = TestClient(app)
    csrf = login(ann, "ann")
    page = ann.get(f"/runs/{HAND}?taxonomy=who-and-when").text
    cfg = _config(page)
    assert cfg["attribution"]["k"] == 1 and cfg["modes"] == []
    assert cfg["attributions"] == []  # blind: the dataset's attribution is not on her page
    assert 'id="att-help"' in page and 'id="att-beside"' not in page and "Failure modes" not in page
    assert [a["id"] for a in cfg["agents"]][:2] == ["Orchestrator", "WebSurfer"]

    def post(client, token, labels, status="submitted"):
        return client.post("/api/v1/annotations", headers={"X-CSRF-Token": token}, json={
            "run_id": HAND, "taxonomy": "who-and-when", "status": status, "labels": labels})

    # a draft may be incomplete; a submitted attribution names the agent and exactly one step
    assert post(ann, csrf, [{"mode": None, "agent": "WebSurfer"}], "draft").status_code == 200
    bad = post(ann, csrf, [{"mode": None, "agent": "WebSurfer", "evidence": [2, 3]}])
    assert bad.status_code == 422 and "one step" in bad.text
    bad = post(ann, csrf, [{"mode": None, "evidence": [3]}])
    assert bad.status_code == 422 and "agent" in bad.text
    ok = post(ann, csrf, [{"mode": None, "agent": "Orchestrator", "evidence": [5], "note": "stopped too late"}])
    assert ok.status_code == 200, ok.text
    bob = TestClient(app)
    bcsrf = login(bob, "bob")
    assert post(bob, bcsrf, [{"mode": None, "agent": "Orchestrator", "evidence": [4]}]).status_code == 200

    rev = TestClient(app)
    login(rev, "rev")
    page = rev.get(f"/runs/{HAND}?taxonomy=who-and-when").text
    atts = {a["annotator"]: (a["kind"], a["source_name"], a["agent"], a["step"]) for a in _config(page)["attributions"]}
    assert atts == {"whowhen:annotators": ("source", "Who&When", "Orchestrator", 4),
                    "ann": ("human", None, "Orchestrator", 5), "bob": ("human", None, "Orchestrator", 4)}
    assert 'id="att-beside"' in page and "It counted the 2011 album" in page
    # the dataset's human labels are not listed as machine audits
    assert "Machine audits" not in page

    # agreement: ann/bob/dataset on one run: same agent 3/3 pairs; exact step 1/3 (4=4); within 1: 3/3
    dash = rev.get("/agreement?taxonomy=who-and-when&n_boot=0").text
    table = dash.split('id="attribution-table"')[1].split("</table>")[0]
    rows = re.findall(r"<tr><td>([^<]+)</td><td class=\"num\">(\d+)</td><td class=\"num\">(\d+)</td>", table)
    assert rows == [("same agent", "3", "3"), ("same step (exact)", "3", "1"), ("step within ±1", "3", "3"),
                    ("same agent and step", "3", "1")]
    strict = rev.get("/agreement?taxonomy=who-and-when&n_boot=0&k=0").text
    assert "step within ±0" in strict
    # the same numbers as the CLI's / API's attribution agreement (one computation)
    api = rev.get("/api/v1/agreement/attribution?taxonomy=who-and-when&k=1").json()
    assert (api["step_exact"]["n_pairs"], api["step_exact"]["n_agree"]) == (3, 1)
    assert (api["step_within_k"]["n_agree"], api["agent"]["n_agree"]) == (3, 3)
