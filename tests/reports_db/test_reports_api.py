"""The report endpoints and `a2annotate report --json` against hand-worked numbers (corpus.py)."""
from __future__ import annotations

from sqlmodel import Session

from app.annotations.blind import set_revealed
from tests.reports_db.conftest import cli_json
from tests.reports_db.expected import (
    BLIND_SPOT_RATES,
    BLIND_SPOT_RUNS,
    BY_FAMILY,
    BY_MODEL,
    CROSSPLAY_MATRIX,
    CROSSPLAY_MODEL,
    SOURCE_AUTO,
    assert_rows,
    same,
)

#: what the API adds to a report as a stored result (app/results); the CLI computes it in place
STORED = ("computed_at", "stale", "recompute_job")


def _get(client, path, headers, status=200):
    """The answer's body; a report without the stored-result fields (checked here)."""
    res = client.get(path, headers=headers)
    assert res.status_code == status, res.text
    body = res.json()
    if status == 200 and "computed_at" in body:
        assert body["stale"] is False and body["recompute_job"] is None and int(res.headers["Age"]) >= 0
        body = {k: v for k, v in body.items() if k not in STORED}
    return body


def test_outcomes_by_model_rest_and_cli_match_the_hand_numbers(client, tokens, run_cli):
    rest = _get(client, "/api/v1/reports/outcomes?by=model", tokens["rita"])
    assert rest["label_source"] == SOURCE_AUTO
    assert rest["by"] == "model" and rest["unit"] == "agent-run" and rest["threshold"] == 0.5
    assert rest["taxonomy"].startswith("a2-failures@")
    # column order: keys, counts and rates, the one metric, then 4 categories and 20 modes in taxonomy order
    assert rest["columns"][:10] == ["model", "runs", "n", "aggregate_success_rate", "principal_success_rate",
                                    "success_gap", "principal_known", "principal_unknown", "mean_principal_score",
                                    "metric:surplus"]
    assert rest["columns"][13:17] == ["cat:DD", "cat:GR", "cat:VF", "cat:CF"]
    assert len(rest["columns"]) == 13 + 4 + 20
    assert_rows(rest["rows"], BY_MODEL)

    cli = cli_json(run_cli("report", "--by", "model", "--json"))
    assert cli == rest  # the CLI prints exactly the API's payload


def test_outcomes_by_family_counts_principal_runs(client, tokens, run_cli):
    rest = _get(client, "/api/v1/reports/outcomes?by=family", tokens["adam"])
    assert rest["unit"] == "principal-run"
    assert_rows(rest["rows"], BY_FAMILY)
    assert cli_json(run_cli("report", "--by", "family", "--json")) == rest


SENTENCES = {
    "gold": "gold for 1 run, unlabelled 4 runs",
    "majority": "human majority for 4 runs, unlabelled 1 run",   # r1, r2, r3, r5 were submitted
    "annotator:alice": "annotator alice for 4 runs, unlabelled 1 run",
    "annotator:judge:l2": "annotator judge:l2 for 1 run, unlabelled 4 runs",  # the audit on r4
}


def test_label_source_sentence_per_source(client, tokens):
    for source, sentence in SENTENCES.items():
        rest = _get(client, f"/api/v1/reports/outcomes?by=model&source={source}", tokens["rita"])
        assert rest["label_source"] == sentence, source
    # majority: r1's two submitters disagree (CF1 vs DD2), so r1 counts as labelled with no label
    rest = _get(client, "/api/v1/reports/outcomes?by=model&source=majority", tokens["rita"])
    assert rest["rows"][0]["labelled_n"] == 4 and rest["rows"][0]["cat:CF"] == 0.0


def test_judge_labels_count_only_for_the_judge_source(client, tokens):
    # annotator:judge:l2 -> r4 labelled with CF2 on vendor_agent (model-b): 1 of model-b's 1 labelled agent-run
    rest = _get(client, "/api/v1/reports/outcomes?by=model&source=annotator:judge:l2", tokens["rita"])
    b = rest["rows"][1]
    assert b["model"] == "model-b" and b["labelled_n"] == 1 and same(b["cat:CF"], 1.0) and same(b["mode:CF2"], 1.0)
    # under auto the judge's CF2 counts nowhere
    auto = _get(client, "/api/v1/reports/outcomes?by=model", tokens["rita"])
    assert all(r["mode:CF2"] == 0.0 for r in auto["rows"])


def test_family_filter(client, tokens):
    rest = _get(client, "/api/v1/reports/outcomes?by=family&family=commerce", tokens["rita"])
    assert rest["family"] == "commerce"
    assert rest["label_source"] == "gold for 1 run, human majority for 1 run, unlabelled 0 runs"
    assert_rows(rest["rows"], BY_FAMILY[:1])


def test_blind_spots_with_reasons_and_rates(client, tokens, run_cli):
    rest = _get(client, "/api/v1/reports/blind-spots", tokens["rita"])
    assert rest["label_source"] == SOURCE_AUTO
    assert_rows(rest["runs"], BLIND_SPOT_RUNS)
    assert [r["run_id"] for r in rest["runs"]] == ["r1", "r2"]  # r5 is a success with nothing wrong
    for by, expected in BLIND_SPOT_RATES.items():
        got = [(r[by], r["runs"], r["aggregate_success_runs"], r["blind_spot_runs"], r["blind_spot_rate"])
               for r in rest["rates"][by]["rows"]]
        assert same([list(g) for g in got], [list(e) for e in expected]), by
    assert cli_json(run_cli("report", "--blind-spots", "--json")) == rest


def test_crossplay_cells_and_matrix(client, tokens, run_cli):
    rest = _get(client, "/api/v1/reports/crossplay?by=model", tokens["alice"])  # no labels: open to annotators
    assert_rows(rest["cells"], CROSSPLAY_MODEL)
    assert same(rest["matrix"], CROSSPLAY_MATRIX)
    assert cli_json(run_cli("report", "--crossplay", "model", "--json")) == rest
    harness = _get(client, "/api/v1/reports/crossplay?by=harness&value=n", tokens["alice"])
    # hx-hx: r1 both orders + r5 both orders = 4; hx-hy / hy-hx: r2 = 1 each; hy-hy: r4 both orders = 2
    assert harness["matrix"] == {"value": "n", "rows": ["hx", "hy"], "cols": ["hx", "hy"], "values": [[4, 1], [1, 2]]}


def test_blind_mode_refuses_label_reports_to_annotators_until_reveal(client, tokens, engine):
    for path in ("/api/v1/reports/outcomes", "/api/v1/reports/blind-spots"):
        res = client.get(path, headers=tokens["alice"])
        assert res.status_code == 403 and "blind mode" in res.json()["detail"]
    assert client.get("/api/v1/reports/outcomes").status_code == 401
    with Session(engine) as s:
        set_revealed(s, True)
        s.commit()
    assert client.get("/api/v1/reports/outcomes", headers=tokens["alice"]).status_code == 200
    assert client.get("/api/v1/reports/blind-spots", headers=tokens["bob"]).status_code == 200


def test_bad_parameters_answer_422_naming_the_field(client, tokens):
    for query, field in (("by=nobody", "by"), ("source=bogus", "source"), ("source=annotator:", "source"),
                         ("taxonomy=no-such-taxonomy", "taxonomy")):
        res = client.get(f"/api/v1/reports/outcomes?{query}", headers=tokens["rita"])
        assert res.status_code == 422, query
        assert res.json()["detail"].startswith(field), (query, res.json())
    res = client.get("/api/v1/reports/crossplay?by=role", headers=tokens["rita"])
    assert res.status_code == 422 and res.json()["detail"].startswith("by")


def test_cli_text_starts_with_the_label_source_sentence(tokens, run_cli):
    res = run_cli("report", "--by", "model")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0] == f"Labels: {SOURCE_AUTO}."
    table = [ln for ln in lines if ln.startswith("model-")]
    # model-a: runs 4, agent-runs 5, aggregate 40%, principal 50%, gap -10%, unknown 1, labelled 4, CF 25%
    assert table[0].split() == ["model-a", "4", "5", "40%", "50%", "-10%", "1", "4", "0%", "0%", "25%", "25%"]
    assert table[1].split() == ["model-b", "4", "5", "80%", "80%", "+0%", "0", "4", "0%", "0%", "0%", "0%"]
    bad = run_cli("report", "--source", "nope")
    assert bad.exit_code == 1 and "source" in bad.output and len(bad.output.strip().splitlines()) == 1


def test_every_report_route_is_documented(client):
    spec = client.get("/openapi.json").json()
    for path in ("/api/v1/reports/outcomes", "/api/v1/reports/blind-spots", "/api/v1/reports/crossplay",
                 "/api/v1/exports/{table}.{fmt}"):
        op = spec["paths"][path]["get"]
        assert op["summary"] and len(op["description"]) > 80, path
