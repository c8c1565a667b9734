"""The answer contract: tolerant reading, shape errors, and what is wrong for the run dropped and reported."""
from __future__ import annotations

import pytest

from app.judges.parse import (
    AnswerError,
    RunFacts,
    extract_json,
    parse_attribution,
    parse_labels,
    parse_present,
)

FACTS = RunFacts(modes=["CF1", "GR3", "DD1"], agents=["buyer_agent", "seller_agent"], seqs={0, 1, 2, 3, 12})


@pytest.mark.parametrize("text", [
    '{"verdict": "no_failure", "labels": []}',
    'Sure! ```json\n{"verdict": "no_failure", "labels": []}\n``` hope that helps',
    'Here: {"verdict": "no_failure", "labels": []} and more {text}',
])
def test_extract_json_is_tolerant(text):
    assert extract_json(text) == {"verdict": "no_failure", "labels": []}


@pytest.mark.parametrize("text, msg", [("", "empty"), ("I think CF1.", "no JSON object"),
                                       ('{"verdict": "failure", "labels": [', "could not be read"),
                                       ("[1, 2]", "a JSON list, not an object")])
def test_extract_json_errors(text, msg):
    with pytest.raises(AnswerError, match=msg):
        extract_json(text)


def test_labels_validated_against_the_run():
    ans, problems = parse_labels({"verdict": "failure", "extra": 1, "labels": [
        {"mode": "cf1", "agent": "buyer_agent", "evidence": [2, "#3", 99, "x"], "rationale": " leak "},
        {"mode": "ZZ9", "agent": "buyer_agent", "evidence": [1]},
        {"mode": "GR3", "agent": "ghost_agent", "evidence": [1]},
        {"mode": "CF1", "agent": "buyer_agent", "evidence": [12]},
        "nonsense"]}, FACTS)
    assert ans == {"verdict": "failure", "labels": [
        {"mode": "CF1", "agent": "buyer_agent", "evidence": [2, 3, 12], "rationale": "leak"}]}
    assert problems == ["labels[0]: evidence #99 is no event of the run; dropped",
                        "labels[0]: evidence 'x' is not a seq; dropped",
                        "labels[1]: unknown mode 'ZZ9'; dropped",
                        "labels[2]: agent 'ghost_agent' is not an agent of the run; dropped",
                        "labels[4]: not an object; dropped"]
    only, probs = parse_labels({"verdict": "failure", "labels": [
        {"mode": "CF1", "agent": "seller_agent", "evidence": [1]}]}, FACTS, only_agent="buyer_agent")
    assert only["labels"] == [] and only["verdict"] == "no_failure" and "not the agent asked about" in probs[0]


@pytest.mark.parametrize("obj, msg", [({"labels": []}, "verdict"), ({"verdict": "maybe"}, "verdict"),
                                      ({"verdict": "failure", "labels": "CF1"}, "must be a list")])
def test_label_shape_errors(obj, msg):
    with pytest.raises(AnswerError, match=msg):
        parse_labels(obj, FACTS)


def test_present_and_attribution():
    assert parse_present({"present": False}, FACTS, "CF1") == ({"present": False, "labels": []}, [])
    ans, probs = parse_present({"present": True, "agent": "seller_agent", "evidence": [1, 7]}, FACTS, "GR3")
    assert ans["labels"] == [{"mode": "GR3", "agent": "seller_agent", "evidence": [1], "rationale": ""}]
    assert probs == ["mode GR3: evidence #7 is no event of the run; dropped"]
    with pytest.raises(AnswerError):
        parse_present({"present": "yes"}, FACTS, "CF1")
    assert parse_attribution({"agent": "buyer_agent", "step": "12", "rationale": "r"}, FACTS)[0] == \
        {"agent": "buyer_agent", "step": 12, "rationale": "r"}
    a, p = parse_attribution({"agent": "nobody", "step": 40}, FACTS)
    assert a["agent"] is None and a["step"] is None and len(p) == 2
    assert parse_attribution({"agent": None, "step": None}, FACTS, nullable=True)[0]["step"] is None
    with pytest.raises(AnswerError):
        parse_attribution({"agent": None, "step": None}, FACTS)
    a, p = parse_attribution({"agent": "buyer_agent", "step": 12}, FACTS, within=(0, 3))
    assert a["step"] is None and "outside" in p[0]
