"""Sampling policies: the runs each one picks and the inclusion probabilities it records on every
(run, annotator) assignment; inclusion probabilities checked against the draw's frequencies."""
from __future__ import annotations

import random
from collections import Counter

import pytest
from sqlmodel import Session, select

from app.annotations import policies
from app.annotations.assignments import create_assignments, remove_assignment
from app.annotations.models import Assignment, Label
from app.annotations.service import resolve_taxonomy, save_annotation
from app.runs.models import Run
from app.runs.service import RunFilter, get_run
from app.studies.models import AssignmentBatch
from app.studies.service import create_study
from tests.annotations.factories import make_run, make_user

ANN = ["ann1", "ann2", "ann3"]


def _label(mode: str) -> dict:
    return {"mode": mode, "agent": "buyer_agent", "evidence": [1]}


@pytest.fixture
def corpus(session: Session):
    """10 runs: c0..c6 commerce, l0..l2 legal; a judge (from audits) on c0, c1, l0; annotators."""
    audit = [{"source": "judge-x", "mode": "VF1", "agent": "buyer_agent", "evidence": [1]}]
    for i in range(7):
        make_run(session, f"c{i}", family="commerce", audits=audit if i < 2 else None)
    for i in range(3):
        make_run(session, f"l{i}", family="legal", model="model-z", audits=audit if i == 0 else None)
    users = {n: make_user(session, n, password=None) for n in ANN}
    study = create_study(session, "s", selection={})
    session.commit()
    return session, users, resolve_taxonomy(session, None), study


def _rows(session, study=None):
    q = select(Assignment, Run.run_id).join(Run, Run.id == Assignment.run_pk)
    if study is not None:
        q = q.where(Assignment.study_id == study.id)
    return [(rid, a) for a, rid in session.exec(q).all()]


def _fill(session, tax, study, policy, n=None, k=1, seed=0, names=ANN, batch=None, **params):
    res = create_assignments(session, RunFilter(), n, seed, names, k, tax, batch=batch or f"{policy}-{seed}",
                             policy=policy, params=params, study=study)
    session.commit()
    return res


def test_random_simple_random_sample(corpus):
    session, _, tax, study = corpus
    res = _fill(session, tax, study, "random", n=4, k=2, seed=9)
    rows = _rows(session, study)
    runs = {rid for rid, _ in rows}
    assert len(runs) == 4 and len(rows) == 8 and res.runs_matching == 10
    assert {(a.policy, a.seed, a.inclusion_prob, a.stratum) for _, a in rows} == {("random", 9, 0.4, None)}
    assert res.strata == {"": {"frame": 10, "sampled": 4, "inclusion_prob": 0.4}}
    design = session.exec(select(AssignmentBatch)).one()
    assert (design.policy, design.seed, design.frame_size, design.k, design.study_id) == ("random", 9, 10, 2, study.id)
    # the same seed on a fresh start picks the same runs; another seed other runs
    assert [p[0] for p in res.picks] == [p[0] for p in create_assignments(
        session, RunFilter(), 4, 9, ANN, 2, tax, policy="random", study=study).picks]
    session.rollback()


def test_stratified_proportional_and_equal(corpus):
    session, _, tax, study = corpus
    res = _fill(session, tax, study, "stratified", n=5, seed=1, stratify_by="family", allocation="proportional")
    rows = _rows(session, study)
    by = Counter(a.stratum for _, a in rows)
    assert by == {"commerce": 4, "legal": 1}  # 3.5 / 1.5: the tie goes to the first stratum
    for rid, a in rows:
        assert a.stratum == ("commerce" if rid.startswith("c") else "legal")
        assert a.inclusion_prob == pytest.approx(4 / 7 if a.stratum == "commerce" else 1 / 3)
    assert res.strata["legal"] == {"frame": 3, "sampled": 1, "inclusion_prob": pytest.approx(1 / 3)}
    study2 = create_study(session, "s2")
    make_user(session, "ann4", password=None)
    res = _fill(session, tax, study2, "stratified", n=5, seed=1, names=["ann4"], stratify_by="model",
                allocation="equal")
    rows = _rows(session, study2)
    # model strata: every run has model-b on the seller side
    assert Counter(a.stratum for _, a in rows) == {"model-a+model-b": 3, "model-b+model-z": 2}
    assert [a.inclusion_prob for _, a in rows if a.stratum == "model-b+model-z"] == [pytest.approx(2 / 3)] * 2
    assert [a.inclusion_prob for _, a in rows if a.stratum == "model-a+model-b"] == [pytest.approx(3 / 7)] * 3
    assert {rid for rid, a in rows if a.stratum == "model-b+model-z"} <= {"l0", "l1", "l2"}


def test_stratified_by_detector_verdict_and_judge_mode(corpus):
    session, _, tax, study = corpus
    # the judge's labels: VF1 on c0, c1, l0; make c1's label more confident in another mode
    res = _fill(session, tax, study, "stratified", n=3, seed=2, stratify_by="judge:judge-x", allocation="equal")
    assert set(res.strata) == {"VF1", "not judged"}
    assert res.strata["VF1"]["frame"] == 3 and res.strata["not judged"]["frame"] == 7
    assert {res.strata[h]["sampled"] for h in res.strata} == {1, 2}
    from app.detectors import service as det

    det.detect_all(session)
    session.commit()
    study2 = create_study(session, "s2")
    res = _fill(session, tax, study2, "stratified", n=10, seed=2, stratify_by="detector:leak",
                allocation="proportional")
    assert sum(v["frame"] for v in res.strata.values()) == 10
    assert set(res.strata) <= {"flagged", "clear"} and res.strata  # every run was checked
    assert all(v["inclusion_prob"] == 1.0 for v in res.strata.values())
    with pytest.raises(policies.PolicyError):
        _fill(session, tax, study2, "stratified", n=3, batch="bad", stratify_by="colour")


def test_disagreement_humans_and_against_a_judge(corpus):
    session, users, tax, study = corpus
    for rid, a, b in (("c2", ["DD1"], ["DD1"]), ("c3", ["DD1"], ["VF1"]), ("c4", ["DD1", "VF1"], ["DD1"]),
                      ("c0", ["VF1"], ["VF1"])):
        run = get_run(session, rid)
        save_annotation(session, users["ann1"], run, tax, [_label(m) for m in a], status="submitted")
        save_annotation(session, users["ann2"], run, tax, [_label(m) for m in b], status="submitted")
    save_annotation(session, users["ann3"], get_run(session, "c1"), tax, [_label("DD1")], status="submitted")
    session.commit()
    res = _fill(session, tax, study, "disagreement", n=2, names=["ann3"])
    # c3: an even split on two modes (score 1); c4: split on VF1 only (0.5); c2, c0 agree (0)
    assert [(p[0], p[3]) for p in res.picks] == [("c3", 1.0), ("c4", 0.5)]
    assert {(rid, a.inclusion_prob, a.policy) for rid, a in _rows(session, study)} == {
        ("c3", 1.0, "disagreement"), ("c4", 1.0, "disagreement")}
    study2 = create_study(session, "s2")
    res = _fill(session, tax, study2, "disagreement", names=["ann3"], against="judge:judge-x")
    # the judge said VF1 on c0 (both humans agree), c1 (the one human said DD1) and l0 (no human)
    assert [(p[0], p[3]) for p in res.picks] == [("c1", 1.0)]


def test_uncertainty_from_the_judges_confidences(corpus):
    session, _, tax, study = corpus
    for label, rid in zip(session.exec(select(Label).order_by(Label.id)).all(), ("c0", "c1", "l0")):
        label.confidence = {"c0": 0.9, "c1": 0.5, "l0": 0.7}[rid]
        session.add(label)
    session.commit()
    mapping = {lab.confidence: lab.annotation_id for lab in session.exec(select(Label)).all()}
    assert len(mapping) == 3
    res = _fill(session, tax, study, "uncertainty", n=2, source="judge:judge-x")
    picked = [p[0] for p in res.picks]
    conf = {p[0]: p[3] for p in res.picks}
    assert len(picked) == 2 and conf[picked[0]] == pytest.approx(1.0) and conf[picked[1]] == pytest.approx(0.6)
    assert all(a.inclusion_prob == 1.0 and a.policy == "uncertainty" for _, a in _rows(session, study))
    with pytest.raises(policies.PolicyError):
        _fill(session, tax, study, "uncertainty", n=2, batch="x")


def test_flagged_and_all(corpus):
    session, _, tax, study = corpus
    res = _fill(session, tax, study, "flagged", source="judge:judge-x")
    assert sorted(p[0] for p in res.picks) == ["c0", "c1", "l0"]
    assert {a.inclusion_prob for _, a in _rows(session, study)} == {1.0}
    study2 = create_study(session, "s2", selection={"family": "legal"})
    res = _fill(session, tax, study2, "all", k=3)
    # l0 went to one annotator in the first study: the same person is not assigned the same run twice
    assert sorted(p[0] for p in res.picks) == ["l0", "l1", "l2"] and (res.created, res.skipped_existing) == (8, 1)
    assert {(a.policy, a.inclusion_prob) for _, a in _rows(session, study2)} == {("all", 1.0)}


def test_k_per_run_removed_pairs_and_top_ups(corpus):
    session, users, tax, study = corpus
    _fill(session, tax, study, "all", k=1, names=["ann1"], batch="one")
    # a second fill asking k=2 adds one more annotator per run, never a third
    res = _fill(session, tax, study, "all", k=2, batch="two")
    assert res.created == 10
    per_run = Counter(rid for rid, _ in _rows(session, study))
    assert set(per_run.values()) == {2}
    res = _fill(session, tax, study, "all", k=2, batch="three")
    assert res.created == 0 and res.skipped_full + res.skipped_existing == 20
    # a run removed from an annotator by hand is not given back by the next fill
    row = next(a for rid, a in _rows(session, study) if rid == "c0" and a.user_id != users["ann1"].id)
    removed_user = session.get(type(users["ann1"]), row.user_id)
    assert remove_assignment(session, row.run_pk, removed_user, tax, study)
    session.commit()
    res = _fill(session, tax, study, "all", k=2, batch="four")
    c0 = {a.user_id for rid, a in _rows(session, study) if rid == "c0"}
    assert removed_user.id not in c0 and len(c0) == 2 and res.skipped_removed >= 0
    # the same runs in another study count separately
    study2 = create_study(session, "s2")
    ann3_has = {rid for rid, a in _rows(session) if a.user_id == users["ann3"].id}
    res = _fill(session, tax, study2, "all", k=1, names=["ann3"], batch="other")
    assert res.created == 10 - len(ann3_has) and res.skipped_full == 0  # study s's counters do not apply
    assert {rid for rid, _ in _rows(session, study2)} == ({f"c{i}" for i in range(7)} | {"l0", "l1", "l2"}) - ann3_has


def test_inclusion_probabilities_match_the_draw():
    """Over many seeds each run is drawn with the frequency its recorded inclusion probability says."""
    strata = {f"r{i:02d}": ("a" if i < 12 else "b" if i < 16 else "c") for i in range(20)}
    counts: Counter = Counter()
    probs: dict[str, float] = {}
    n_seeds = 3000
    for seed in range(n_seeds):
        picks, _ = policies.stratified(strata, 6, "proportional", random.Random(seed))
        for p in picks:
            counts[p.run_id] += 1
            probs[p.run_id] = p.inclusion_prob
    for rid in strata:
        assert counts[rid] / n_seeds == pytest.approx(probs[rid], abs=0.035)
    assert probs["r00"] == pytest.approx(4 / 12) and probs["r12"] == pytest.approx(1 / 4)
    counts.clear()
    for seed in range(n_seeds):
        for p in policies.simple_random(list(strata), 5, random.Random(seed)):
            counts[p.run_id] += 1
            assert p.inclusion_prob == 0.25
    assert max(abs(c / n_seeds - 0.25) for c in counts.values()) < 0.035
    # Bernoulli draws for rules: the rate, and the same runs whenever asked
    taken = policies.bernoulli([f"x{i}" for i in range(4000)], 5, 0.1)
    assert abs(len(taken) / 4000 - 0.1) < 0.015 and {p.inclusion_prob for p in taken} == {0.1}
    assert taken == policies.bernoulli([f"x{i}" for i in range(4000)][::-1], 5, 0.1)


@pytest.mark.parametrize("sizes, n, allocation, want", [
    ({"a": 7, "b": 3}, 5, "proportional", {"a": 4, "b": 1}),
    ({"a": 7, "b": 3}, 5, "equal", {"a": 3, "b": 2}),
    ({"a": 10, "b": 1, "c": 1}, 6, "equal", {"a": 4, "b": 1, "c": 1}),
    ({"a": 2, "b": 2}, 10, "proportional", {"a": 2, "b": 2}),
    ({"a": 50, "b": 30, "c": 20}, 10, "proportional", {"a": 5, "b": 3, "c": 2}),
])
def test_allocation(sizes, n, allocation, want):
    assert policies.allocate(sizes, n, allocation) == want


def test_scores():
    assert policies.split_score([frozenset({"A"}), frozenset({"A"})]) == 0
    assert policies.split_score([frozenset({"A"}), frozenset()]) == 1
    assert policies.split_score([frozenset({"A"})]) == 0
    assert policies.versus_score([frozenset({"A"})], frozenset({"A", "B"})) == 0.5
    assert policies.versus_score([frozenset()], frozenset()) == 0
    assert policies.confidence_split([0.5, 0.95]) == 1.0 and policies.confidence_split([None]) == 0


def test_inclusion_probabilities_of_a_study(corpus):
    from app.studies.service import inclusion_probabilities

    session, _, tax, study = corpus
    assert set(inclusion_probabilities(session, study).values()) == {0.0}  # nothing drawn yet
    _fill(session, tax, study, "random", n=4, seed=3, batch="srs")
    pi = inclusion_probabilities(session, study)
    assert len(pi) == 10 and list(pi.values()) == [pytest.approx(0.4)] * 10
    _fill(session, tax, study, "stratified", n=4, seed=3, batch="strat", stratify_by="family", allocation="equal")
    pi = inclusion_probabilities(session, study)
    runs = dict(session.exec(select(Run.id, Run.run_id)).all())
    for pk, p in pi.items():  # independent draws: 1 - (1 - 0.4)(1 - pi_h)
        ph = 2 / 7 if runs[pk].startswith("c") else 2 / 3
        assert p == pytest.approx(1 - 0.6 * (1 - ph))
    assert list(inclusion_probabilities(session, study, ["srs"]).values()) == [pytest.approx(0.4)] * 10
    _fill(session, tax, study, "disagreement", batch="targeted")  # not a probability sample: ignored
    assert inclusion_probabilities(session, study) == pi
    # runs imported after a batch was drawn were not in its frame
    make_run(session, "late")
    session.commit()
    late = get_run(session, "late").id
    assert inclusion_probabilities(session, study)[late] == 0.0
