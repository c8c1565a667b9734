"""The label model: trace-level labels (mode, no agent, no evidence) and attribution-only labels
(agent and evidence, no mode) for imported and judge labels; humans in the app keep the rules of
their taxonomy version; mode agreement ignores missing agents, attribution agreement (pure)."""
from __future__ import annotations

import pandas as pd
import pytest
from sqlmodel import Session

from app.agreement.units import agreement_report, attribution_agreement
from app.annotations.service import AnnotationError, get_run_or_error, resolve_taxonomy, save_annotation
from app.auth.service import create_user, get_user
from app.ingest import RunFormatError, normalize_run
from app.ingest.loader import load_items

from .conftest import DATA, stored_labels


def _run(**audit):
    return {"run_id": "r1", "scenario": {"id": "s", "family": "f"}, "agents": [{"id": "a"}, {"id": "b"}],
            "events": [{"kind": "message", "actor": "a", "content": "x"}, {"kind": "message", "actor": "b"}],
            "audits": [{"source": "j", **audit}]}


def test_canonical_audit_may_be_an_attribution_but_not_empty():
    run = normalize_run(_run(mode=None, agent="b", evidence=[1]))
    assert run["audits"][0]["mode"] is None and run["audits"][0]["evidence"] == [1]
    assert normalize_run(_run(mode="VF1"))["audits"][0]["agent"] is None  # trace-level
    with pytest.raises(RunFormatError, match=r"field audits\[0\]\.mode: required field is missing \(an audit "
                                             r"without a mode is an attribution and needs an agent and evidence\)"):
        normalize_run(_run(agent="b"))


def test_attribution_agreement_pure_hand_example():
    att = pd.DataFrame([("x", "r1", "a", [2, 5]), ("y", "r1", "a", [3]), ("z", "r1", "b", [2]),
                        ("x", "r2", "a", [0]), ("y", "r2", None, [0]),
                        ("x", "r3", "a", [1]), ("w", "r3", "a", [1])],  # w did not submit r3
                       columns=["annotator", "run_id", "agent", "evidence"])
    subs = pd.DataFrame([("x", "r1"), ("y", "r1"), ("z", "r1"), ("x", "r2"), ("y", "r2"), ("x", "r3")],
                        columns=["annotator", "run_id"])
    res = attribution_agreement(att, subs, k=1)
    # r1: steps x=2 (earliest), y=3, z=2; pairs xy (agent same, step 2 vs 3), xz (b vs a, step same), yz
    # r2: x vs y: y names no agent; steps 0 and 0
    assert res["n_runs"] == 2
    assert res["agent"] == {"n_pairs": 3, "n_agree": 1, "proportion": pytest.approx(1 / 3)}
    assert res["n_pairs_without_agent"] == 1
    assert res["step_exact"] == {"n_pairs": 4, "n_agree": 2, "proportion": 0.5}
    assert res["step_within_k"] == {"n_pairs": 4, "n_agree": 4, "proportion": 1.0}
    assert res["agent_and_step"] == {"n_pairs": 3, "n_agree": 0, "proportion": 0.0}
    assert attribution_agreement(att, subs, k=0)["step_within_k"]["n_agree"] == 2
    with pytest.raises(ValueError, match="k must be"):
        attribution_agreement(att, subs, k=-1)


def test_mode_agreement_ignores_missing_agents_and_blame_uses_what_is_there():
    subs = pd.DataFrame([("x", "r1"), ("y", "r1"), ("x", "r2"), ("y", "r2")], columns=["annotator", "run_id"])
    with_agents = pd.DataFrame([("x", "r1", "M1", "a", [0]), ("y", "r1", "M1", "a", [0])],
                               columns=["annotator", "run_id", "mode", "agent", "evidence"])
    without = with_agents.assign(agent=[None, "a"])
    a = agreement_report(with_agents, subs, ["M1", "M2"], {"M1": "C", "M2": "C"}, n_boot=0)
    b = agreement_report(without, subs, ["M1", "M2"], {"M1": "C", "M2": "C"}, n_boot=0)
    assert a["modes"] == b["modes"] and a["overall"] == b["overall"]  # the same mode agreement
    assert (a["blame_agreement"]["n_pairs"], b["blame_agreement"]["n_pairs"]) == (1, 0)
    assert b["blame_agreement"]["n_pairs_unattributed"] == 1


def test_imported_labels_may_be_trace_level_or_attribution_but_app_labels_keep_their_rules(engine):
    from app.annotations.labels_import import import_labels
    from app.ingest import iter_path

    load_items(engine, iter_path(DATA / "whowhen"))
    run_id = "whowhen/Hand-Crafted/q-albums-01"
    with Session(engine) as s:
        create_user(s, "alice", "annotator", "password123")
        summary = import_labels(s, "annotator,run_id,mode,agent,evidence,taxonomy\n"
                                   f"judge:t,{run_id},2.3,,,mast\n"          # trace-level
                                   f"judge:t,{run_id},,WebSurfer,3,mast\n"   # attribution-only
                                   f"judge:u,{run_id},none,,,mast\n", "l.csv")  # no failure found
        s.commit()
        assert (summary.imported, summary.rejected) == (2, 0), summary.errors
        run = get_run_or_error(s, run_id)
        user = get_user(s, "alice")
        mast = resolve_taxonomy(s, "mast")
        with pytest.raises(AnnotationError, match="responsible agent is required"):
            save_annotation(s, user, run, mast, [{"mode": "2.3", "evidence": [1]}], status="submitted")
        with pytest.raises(AnnotationError, match="failure mode code is required"):
            save_annotation(s, user, run, mast, [{"mode": None, "agent": "WebSurfer", "evidence": [3]}],
                            status="submitted")
        draft = resolve_taxonomy(s, "mast-draft-r2")  # this version says agent and evidence are optional
        ann = save_annotation(s, user, run, draft, [{"mode": "1.6"}], status="submitted")
        assert ann.status == "submitted"
        s.commit()
    labels = stored_labels(engine)
    tax = next(k[2] for k in labels if k[2].startswith("mast@"))
    assert labels[(run_id, "judge:t", tax)][2] == (("", "WebSurfer", (3,), ""), ("2.3", "", (), ""))
    assert labels[(run_id, "judge:u", tax)][1] is True
