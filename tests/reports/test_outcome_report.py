"""outcome_report against hand-worked numbers (see conftest for the corpus table).

Resolved labels used throughout (auto): r1 CF1+CF3 on buyer_agent (gold), r2 CF2 on buyer_agent
and GR3 on seller_agent (majority), r3 DD5 on vendor_agent (majority); labelled runs r1 r2 r3 r4
r6 (r5 unlabelled).
"""

from __future__ import annotations

import pytest

from app.reports.outcomes import GROUPINGS, ReportInputError, outcome_report, report_payload

from .conftest import GOLD_RUNS, HX, HY, A, B, C, assert_rows

N = None  # NaN / missing in to_records output
LABELLED = ["r1", "r2", "r3", "r4", "r6"]
MID = ["runs", "n", "aggregate_success_rate", "principal_success_rate", "success_gap",
       "principal_known", "principal_unknown", "mean_principal_score",
       "metric:rounds", "metric:surplus"]  # fmt: skip
TAIL = ["labelled_n", "responsible_n", "responsible_rate", "cat:CF", "cat:DD", "cat:GR",
        "mode:CF1", "mode:CF2", "mode:CF3", "mode:DD5", "mode:GR3"]  # fmt: skip

# Each expected row below: key columns, then MID, then (on the second line) TAIL.


def test_by_agent(runs, principals, agents, resolved):
    rep = outcome_report(runs, principals, agents, resolved, by="agent", labelled_runs=LABELLED)
    assert_rows(rep, ["model", "harness", "role", *MID, *TAIL], [
        # (a,hx,buyer): r1 buyer_agent, r6 buyer_agent. agg T,T = 1.0; own principal F,T = 0.5;
        # gap 0.5; scores (0.2+0.6)/2 = 0.4; surplus only r1 -640 (r6 NaN ignored);
        # r1 buyer_agent responsible for CF1, CF3 -> 1/2 responsible, CF 1/2, CF1 1/2, CF3 1/2
        (A, HX, "buyer", 2, 2, 1.0, 0.5, 0.5, 2, 0, 0.4, N, -640.0,
         2, 2, 0.5, 0.5, 0.0, 0.0, 0.5, 0.0, 0.5, 0.0, 0.0),
        # (a,hx,client): r3 client (flag T, no score), r4 client (0.5 >= 0.5 -> T). agg F,F.
        # score only 0.5; rounds 5 (r4); no labels -> 0s
        (A, HX, "client", 2, 2, 0.0, 1.0, -1.0, 2, 0, 0.5, 5.0, N,
         2, 2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
        # (a,hx,seller): r6 seller 0.55, flag T, agg T
        (A, HX, "seller", 1, 1, 1.0, 1.0, 0.0, 1, 0, 0.55, N, N,
         1, 1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
        # (a,hx,vendor): r3 vendor, outcome unknown (no flag, no score) -> rate NaN, unknown 1;
        # responsible for DD5 -> 1.0
        (A, HX, "vendor", 1, 1, 0.0, N, N, 0, 1, N, N, N,
         1, 1, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0),
        # (a,hy,seller): r2 seller 0.3 -> F while agg T: gap 1.0; surplus -100; GR3 -> 1.0
        (A, HY, "seller", 1, 1, 1.0, 0.0, 1.0, 1, 0, 0.3, N, -100.0,
         1, 1, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0),
        # (b,hx,buyer): r2 buyer 0.7 -> T; surplus 100; CF2 -> 1.0
        (B, HX, "buyer", 1, 1, 1.0, 1.0, 0.0, 1, 0, 0.7, N, 100.0,
         1, 1, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0),
        # (b,hx,counsel): both r5 agents; agg F (no score); T,F -> 0.5; (1.0+0.0)/2 = 0.5;
        # r5 unlabelled -> labelled_n 0 and every label rate NaN
        (B, HX, "counsel", 1, 2, 0.0, 0.5, -0.5, 2, 0, 0.5, N, N,
         0, 0, N, N, N, N, N, N, N, N, N),
        # (b,hx,seller): r1 seller 0.9 T; surplus 640
        (B, HX, "seller", 1, 1, 1.0, 1.0, 0.0, 1, 0, 0.9, N, 640.0,
         1, 1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
        # (b,hy,vendor): r4 vendor_agent: vendor F 0.1, rounds 3; r4 failed -> agg F
        (B, HY, "vendor", 1, 1, 0.0, 0.0, 0.0, 1, 0, 0.1, 3.0, N,
         1, 1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
        # (c,hx,assistant): r4 helper_agent, same principal (vendor) as above
        (C, HX, "assistant", 1, 1, 0.0, 0.0, 0.0, 1, 0, 0.1, 3.0, N,
         1, 1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
    ])  # fmt: skip
    assert rep.attrs["unit"] == "agent-run" and rep.attrs["by"] == "agent"


def test_by_principal(runs, principals, agents, resolved):
    rep = outcome_report(runs, principals, agents, resolved, by="principal", labelled_runs=LABELLED)
    assert_rows(rep, ["kind", "role", *MID, *TAIL], [
        # r4 vendor, agents vendor_agent (vendor) + helper_agent (assistant); F 0.1; rounds 3;
        # responsible_n = its 2 agent-runs, neither responsible -> 0.0; r4 has no labels
        ("organization", "assistant+vendor", 1, 1, 0.0, 0.0, 0.0, 1, 0, 0.1, 3.0, N,
         1, 2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
        # r5 defendant: flag F, score 0.0; unlabelled run
        ("organization", "counsel", 1, 1, 0.0, 0.0, 0.0, 1, 0, 0.0, N, N,
         0, 0, N, N, N, N, N, N, N, N, N),
        # sellers r1 (T .9), r2 (F .3), r6 (T .55): agg 1; 2/3; gap 1/3; 1.75/3; surplus
        # (640-100)/2 = 270; run labels: r1 CF1,CF3; r2 CF2,GR3; r6 none -> CF 2/3, GR 1/3,
        # each of CF1 CF2 CF3 GR3 1/3; responsible: r2 seller_agent only -> 1/3
        ("organization", "seller", 3, 3, 1.0, 2 / 3, 1 / 3, 3, 0, 1.75 / 3, N, 270.0,
         3, 3, 1 / 3, 2 / 3, 0.0, 1 / 3, 1 / 3, 1 / 3, 1 / 3, 0.0, 1 / 3),
        # r3 vendor: unknown outcome; run has DD5 by vendor_agent
        ("organization", "vendor", 1, 1, 0.0, N, N, 0, 1, N, N, N,
         1, 1, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0),
        # buyers r1 (F .2), r2 (T .7), r6 (T .6): 2/3; (0.2+0.7+0.6)/3 = 0.5;
        # surplus (-640+100)/2 = -270; responsible r1 + r2 buyer_agent -> 2/3
        ("person", "buyer", 3, 3, 1.0, 2 / 3, 1 / 3, 3, 0, 0.5, N, -270.0,
         3, 3, 2 / 3, 2 / 3, 0.0, 1 / 3, 1 / 3, 1 / 3, 1 / 3, 0.0, 1 / 3),
        # clients r3 (T, no score), r4 (T .5); r3 has DD5 -> DD 1/2; nobody responsible
        ("person", "client", 2, 2, 0.0, 1.0, -1.0, 2, 0, 0.5, 5.0, N,
         2, 2, 0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.5, 0.0),
        # r5 plaintiff T 1.0, unlabelled
        ("person", "counsel", 1, 1, 0.0, 1.0, -1.0, 1, 0, 1.0, N, N,
         0, 0, N, N, N, N, N, N, N, N, N),
    ])  # fmt: skip
    assert rep.attrs["unit"] == "principal-run"


def test_by_family(runs, principals, agents, resolved):
    rep = outcome_report(runs, principals, agents, resolved, by="family", labelled_runs=LABELLED)
    assert_rows(rep, ["family", *MID, *TAIL], [
        # commerce: principal-runs r1 buyer F .2, r1 seller T .9, r2 buyer T .7, r2 seller F .3;
        # agg all T; principal 2/4; (0.2+0.9+0.7+0.3)/4 = 0.525; surplus (-640+640+100-100)/4 = 0;
        # every unit's run has a CF label -> 1.0; GR (r2) 2/4; CF1/CF3 (r1) 2/4; CF2/GR3 (r2) 2/4;
        # agent-runs r1 buyer (resp), r1 seller, r2 buyer (resp), r2 seller (resp) -> 3/4
        ("commerce", 2, 4, 1.0, 0.5, 0.5, 4, 0, 0.525, N, 0.0,
         4, 4, 0.75, 1.0, 0.0, 0.5, 0.5, 0.5, 0.5, 0.0, 0.5),
        # crm: r3 client T, r3 vendor unknown, r4 client T, r4 vendor F -> 2/3, unknown 1;
        # scores 0.5, 0.1 -> 0.3; rounds (5+3)/2 = 4; DD (r3) 2/4; agent-runs: r3 x2 + r4 x3 = 5,
        # responsible r3 vendor_agent -> 1/5
        ("crm", 2, 4, 0.0, 2 / 3, -2 / 3, 3, 1, 0.3, 4.0, N,
         4, 5, 0.2, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.5, 0.0),
        # legal: agg r5 F, r6 T -> 2/4; principal T F T T -> 3/4; gap -0.25;
        # (1+0+0.6+0.55)/4 = 0.5375; only r6 labelled -> 2 units, 2 agent-runs, all 0
        ("legal", 2, 4, 0.5, 0.75, -0.25, 4, 0, 0.5375, N, N,
         2, 2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
    ])  # fmt: skip


def test_by_model_and_mode_filter(runs, principals, agents, resolved):
    rep = outcome_report(runs, principals, agents, resolved, by="model", labelled_runs=LABELLED)
    assert_rows(rep, ["model", *MID, *TAIL], [
        # model-a agent-runs: r1 buyer, r2 seller, r3 client, r3 vendor, r4 client, r6 buyer,
        # r6 seller (7; runs r1 r2 r3 r4 r6). agg T T F F F T T = 4/7; own principal
        # F F T ? T T T = 4/6; gap 4/7 - 2/3 = -2/21; scores .2 .3 .5 .6 .55 -> 2.15/5 = 0.43;
        # rounds 5; surplus (-640-100)/2 = -370; responsible r1 buyer, r2 seller, r3 vendor = 3/7
        (A, 5, 7, 4 / 7, 2 / 3, -2 / 21, 6, 1, 0.43, 5.0, -370.0,
         7, 7, 3 / 7, 1 / 7, 1 / 7, 1 / 7, 1 / 7, 0.0, 1 / 7, 1 / 7, 1 / 7),
        # model-b: r1 seller, r2 buyer, r4 vendor_agent, r5 plaintiff, r5 defendant (5, 4 runs)
        # agg T T F F F = 0.4; own T T F T F = 0.6; gap -0.2; (.9+.7+.1+1+0)/5 = 0.54;
        # rounds 3; surplus (640+100)/2 = 370; labelled 3 (r5 not); responsible r2 buyer 1/3
        (B, 4, 5, 0.4, 0.6, -0.2, 5, 0, 0.54, 3.0, 370.0,
         3, 3, 1 / 3, 1 / 3, 0.0, 0.0, 0.0, 1 / 3, 0.0, 0.0, 0.0),
        (C, 1, 1, 0.0, 0.0, 0.0, 1, 0, 0.1, 3.0, N,
         1, 1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
    ])  # fmt: skip

    # restrict to CF3, DD5, VF1: CF1/CF2/GR3 labels no longer count anywhere.
    filt = outcome_report(
        runs,
        principals,
        agents,
        resolved,
        by="model",
        labelled_runs=LABELLED,
        modes=["CF3", "DD5", "VF1"],
        mode_category={"CF3": "CF", "DD5": "DD", "VF1": "VF"},
    )
    cols = [
        "model",
        "labelled_n",
        "responsible_rate",
        "cat:CF",
        "cat:DD",
        "cat:VF",
        "mode:CF3",
        "mode:DD5",
        "mode:VF1",
    ]
    assert_rows(
        filt[cols],
        cols,
        [
            # model-a responsible: r1 buyer (CF3), r3 vendor (DD5) -> 2/7
            (A, 7, 2 / 7, 1 / 7, 1 / 7, 0.0, 1 / 7, 1 / 7, 0.0),
            # model-b: its only label was CF2 -> 0
            (B, 3, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
            (C, 1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
        ],
    )
    assert [c for c in filt.columns if c.startswith(("cat:", "mode:"))] == cols[3:]


def test_mode_category_alone_sets_taxonomy_columns(runs, principals, agents, resolved):
    taxonomy = {"DD5": "DD", "CF1": "CF", "CF2": "CF", "CF3": "CF", "GR3": "GR", "VF1": "VF"}
    rep = outcome_report(
        runs, principals, agents, resolved, by="harness", mode_category=taxonomy, labelled_runs=LABELLED
    )
    # taxonomy order, unlabelled VF1 still gets a column
    assert [c for c in rep.columns if c.startswith(("cat:", "mode:"))] == [
        "cat:DD",
        "cat:CF",
        "cat:GR",
        "cat:VF",
        "mode:DD5",
        "mode:CF1",
        "mode:CF2",
        "mode:CF3",
        "mode:GR3",
        "mode:VF1",
    ]
    hy = rep[rep.harness == HY].iloc[0]
    # harness-y: r2 seller_agent (agg T, own F .3, GR3) and r4 vendor_agent (agg F, own F .1, rounds 3)
    assert (hy["n"], hy["aggregate_success_rate"], hy["principal_success_rate"]) == (2, 0.5, 0.0)
    assert hy["mean_principal_score"] == pytest.approx(0.2, abs=1e-12)
    assert (hy["metric:rounds"], hy["metric:surplus"], hy["responsible_rate"]) == (3.0, -100.0, 0.5)
    assert (hy["cat:GR"], hy["mode:GR3"], hy["mode:VF1"], hy["cat:VF"]) == (0.5, 0.5, 0.0, 0.0)


def test_default_labelled_runs_is_every_run(runs, principals, agents, resolved):
    rep = outcome_report(runs, principals, agents, resolved, by="model")
    b = rep[rep.model == B].iloc[0]
    # all 5 model-b agent-runs count as labelled now; responsible r2 buyer -> 1/5
    assert (b["labelled_n"], b["responsible_rate"], b["mode:CF2"]) == (5, 0.2, 0.2)


def test_by_alignment_and_scenario_keys(runs, principals, agents, resolved):
    rep = outcome_report(runs, principals, agents, resolved, by="alignment", labelled_runs=LABELLED)
    assert rep["alignment"].tolist() == ["competitive", "cooperative", "mixed", None]
    comp = rep.iloc[0]
    # competitive: r1, r2, r6 -> 6 principal-runs, agg 1.0, own F T T F T T = 4/6
    assert (comp["runs"], comp["n"], comp["aggregate_success_rate"]) == (3, 6, 1.0)
    assert comp["principal_success_rate"] == pytest.approx(4 / 6, abs=1e-12)
    none = rep.iloc[3]
    assert (none["n"], none["principal_success_rate"], none["labelled_n"]) == (2, 0.5, 0)

    scen = outcome_report(runs, principals, agents, resolved, by="scenario", labelled_runs=LABELLED)
    assert scen["scenario_id"].tolist() == [
        "commerce/car/1",
        "crm/ticket/1",
        "crm/ticket/2",
        "legal/nda/1",
        "legal/nda/2",
    ]
    assert scen["runs"].tolist() == [2, 1, 1, 1, 1]
    assert scen["n"].tolist() == [4, 2, 2, 2, 2]


def test_threshold_changes_both_definitions(runs, principals, agents, resolved):
    rep = outcome_report(
        runs, principals, agents, resolved, by="family", threshold=0.75, labelled_runs=LABELLED
    )
    got = {
        r.family: (r.aggregate_success_rate, r.principal_success_rate, r.principal_unknown)
        for r in rep.itertuples()
    }
    # agg >= 0.75: r1 (1.0), r2 (0.8) yes; r6 (0.5) no.
    # commerce own: r1 buyer F (flag), r1 seller T (flag), r2 buyer 0.7 < .75 F, r2 seller F -> 1/4
    # crm own: r3 client T (flag), r3 vendor unknown, r4 client 0.5 F, r4 vendor F -> 1/3
    # legal: flags T F T T -> 3/4; agg r5 F, r6 F -> 0
    assert got["commerce"] == (1.0, 0.25, 0)
    assert got["crm"][0] == 0.0 and got["crm"][1] == pytest.approx(1 / 3, abs=1e-12) and got["crm"][2] == 1
    assert got["legal"] == (0.0, 0.75, 0)


def test_groupings_have_documented_keys(runs, principals, agents, resolved):
    for by, keys in GROUPINGS.items():
        rep = outcome_report(runs, principals, agents, resolved, by=by)
        assert tuple(rep.columns[: len(keys)]) == keys


def test_payload_states_label_source(runs, principals, agents, resolved):
    rep = outcome_report(
        runs,
        principals,
        agents,
        resolved,
        by="family",
        labelled_runs=LABELLED,
        label_source=resolved.attrs["label_source"],
    )
    payload = report_payload(rep)
    assert payload["meta"] == {
        "by": "family",
        "unit": "principal-run",
        "threshold": 0.5,
        "label_source": "gold for 2 runs, human majority for 3 runs, unlabelled 1 run",
    }
    assert payload["rows"][2]["metric:surplus"] is None
    assert payload["columns"][0] == "family"


def test_bad_arguments(runs, principals, agents, resolved):
    with pytest.raises(ReportInputError, match="by must be one of"):
        outcome_report(runs, principals, agents, resolved, by="colour")
    with pytest.raises(ReportInputError, match="threshold"):
        outcome_report(runs, principals, agents, resolved, threshold="high")
    with pytest.raises(ReportInputError, match="modes must be a list"):
        outcome_report(runs, principals, agents, resolved, modes="CF1")
    bad = resolved.copy()
    bad.loc[0, "agent"] = "ghost_agent"
    with pytest.raises(ReportInputError, match=r"labels row 0 \(run_id='r1'\): agent 'ghost_agent'"):
        outcome_report(runs, principals, agents, bad)


def test_resolved_labels_are_what_the_report_needs(raw_labels, submissions, runs, principals, agents):
    from app.reports.outcomes import resolve_labels

    frame, _ = resolve_labels(raw_labels, submissions, GOLD_RUNS, source="gold")
    rep = outcome_report(
        runs, principals, agents, frame, by="family", labelled_runs=frame.attrs["labelled_runs"]
    )
    # gold only: labelled r1 and r6 -> commerce 2 units (r1), legal 2 units (r6), crm 0
    assert rep["labelled_n"].tolist() == [2, 0, 2]
    assert [c for c in rep.columns if c.startswith("mode:")] == ["mode:CF1", "mode:CF3"]
