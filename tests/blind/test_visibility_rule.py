"""The one blind rule on plain data (app.annotations.blind.visible_run / visible_metadata)."""
from __future__ import annotations

import copy

from app.annotations.blind import Sight, visible_metadata, visible_run

BLIND = Sight(labels=False, demo_truth=False)
REVIEWER = Sight(labels=True, demo_truth=False)
ADMIN = Sight(labels=True, demo_truth=True)


def _run() -> dict:
    return {
        "run_id": "r", "scenario": {"id": "s", "metadata": {"hidden": {"answer": 1}, "seed": 3}},
        "metadata": {"whowhen": {"question": "Q?", "mistake_agent": "A", "mistake_step": "2", "mistake_reason": "R",
                                 "mistake_type": None, "ground_truth": "42"},
                     "mad": {"mas_name": "X", "mast_annotation": {"1.1": 1}, "annotations": [{"annotator_1": True}]},
                     "audited_by": ["judge-l2"], "import_warnings": ["mistake_agent: 'A' says nothing"],
                     "hidden_keys": ["metrics.truth", "agents.grader", "events.verdict", "principals.p", "scenario.seed"],
                     "metrics": {"truth": 7, "turns": 4}, "demo_truth": [1], "harness": "h"},
        "principals": [{"id": "p", "metadata": {"p": 1, "q": 2}}],
        "agents": [{"id": "a", "metadata": {"audited_by": ["j"], "grader": "g", "card": {"name": "a"}}}],
        "events": [{"seq": 0, "data": {"attributes": {"gen_ai.evaluation.score.label": "bad", "k": 1},
                                       "span_events": [{"name": "gen_ai.evaluation.result"}, {"name": "gen_ai.choice"}]},
                    "metadata": {"verdict": "v", "tokens": 3}}],
        "audits": [{"source": "judge-l2", "mode": "VF1"}], "checks": [{"check_id": "c"}],
    }


def test_blind_annotator_sees_no_label_answer_or_judgement():
    run = _run()
    before = copy.deepcopy(run)
    out = visible_run(run, BLIND)
    assert run == before  # never modified
    assert out["metadata"] == {"whowhen": {"question": "Q?"}, "mad": {"mas_name": "X"}, "metrics": {"turns": 4},
                               "harness": "h"}
    assert out["scenario"]["metadata"] == {}
    assert out["principals"][0]["metadata"] == {"q": 2}
    assert out["agents"][0]["metadata"] == {"card": {"name": "a"}}
    assert out["events"][0]["metadata"] == {"tokens": 3}
    assert out["events"][0]["data"] == {"attributes": {"k": 1}, "span_events": [{"name": "gen_ai.choice"}]}
    assert out["audits"] == [] and "checks" not in out


def test_reviewers_see_everything_but_the_demo_truth_admins_all():
    out = visible_run(_run(), REVIEWER)
    expected = _run()
    del expected["metadata"]["demo_truth"]
    assert out == expected
    assert visible_run(_run(), ADMIN) == _run()


def test_visible_metadata_alone_and_non_dicts():
    assert visible_metadata({"audited_by": [], "x": 1, "hidden_keys": ["x"]}, BLIND) == {}
    assert visible_metadata({"a": {"b": 1, "c": 2}}, BLIND, ["a.b", "a.b.z", "nope.x"]) == {"a": {"c": 2}}
    assert visible_metadata(None, BLIND) is None and visible_metadata([1], BLIND) == [1]
