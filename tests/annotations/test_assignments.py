"""Assignments: k distinct annotators per run, balanced loads, reproducible queues; queue/next."""
from __future__ import annotations

from collections import Counter

import pytest
from sqlalchemy import delete
from sqlmodel import Session, select

from app.annotations.assignments import create_assignments, next_in_queue, plan_assignments, user_queue
from app.annotations.models import Assignment
from app.annotations.service import AnnotationError, resolve_taxonomy, save_annotation
from app.auth.service import judge_user
from app.runs.service import RunFilter
from tests.annotations.factories import make_run, make_user

NAMES = ["ann", "bea", "cid"]


@pytest.mark.parametrize("n_runs, n_people, k", [(10, 3, 2), (7, 4, 3), (5, 5, 5), (9, 2, 1), (1, 3, 2)])
def test_plan_is_balanced_with_k_distinct(n_runs, n_people, k):
    runs = [f"run-{i:02d}" for i in range(n_runs)]
    people = [f"p{i}" for i in range(n_people)]
    plan = plan_assignments(runs, people, k, None, seed=7)
    assert sorted(r for r, _ in plan) == runs  # every run once
    assert all(len(set(names)) == k for _, names in plan)
    loads = Counter(name for _, names in plan for name in names)
    assert sum(loads.values()) == n_runs * k
    assert max(loads.values()) - min(loads.get(p, 0) for p in people) <= 1


def test_plan_reproducible_and_seed_sensitive():
    runs = [f"r{i}" for i in range(30)]
    a = plan_assignments(runs, ["x", "y", "z"], 2, 12, seed=42)
    b = plan_assignments(list(reversed(runs)), ["z", "x", "y"], 2, 12, seed=42)  # input order does not matter
    c = plan_assignments(runs, ["x", "y", "z"], 2, 12, seed=43)
    assert a == b
    assert a != c
    assert len(a) == 12 and len({r for r, _ in a}) == 12


@pytest.mark.parametrize("k, people, sample, message", [
    (3, ["a", "b"], None, "k: k=3 annotators per run, but only 2 annotator(s) given"),
    (0, ["a"], None, "k: must be at least 1"),
    (1, [], None, "annotators: name at least one annotator"),
    (1, ["a"], 0, "sample_size: must be at least 1"),
])
def test_plan_errors(k, people, sample, message):
    with pytest.raises(AnnotationError) as err:
        plan_assignments(["r1"], people, k, sample, seed=1)
    assert str(err.value).startswith(message)


@pytest.fixture
def corpus(session: Session):
    for i in range(10):
        make_run(session, f"c-{i:02d}", family="commerce" if i < 7 else "legal")
    users = [make_user(session, n, password=None) for n in NAMES]
    session.commit()
    return session, users, resolve_taxonomy(session, None)


def _pairs(session, tax):
    rows = session.exec(select(Assignment).where(Assignment.taxonomy_pk == tax.id)).all()
    return sorted((a.run_pk, a.user_id, a.position) for a in rows)


def test_create_assignments_balanced_and_reproducible(corpus):
    session, users, tax = corpus
    res = create_assignments(session, RunFilter(), None, 11, NAMES, 2, tax, batch="b1")
    session.commit()
    assert (res.runs_matching, res.runs_selected, res.created, res.skipped_existing) == (10, 10, 20, 0)
    assert sorted(res.per_annotator.values()) == [6, 7, 7]
    first = _pairs(session, tax)
    per_run = Counter(run_pk for run_pk, _, _ in first)
    assert set(per_run.values()) == {2}
    assert len({(r, u) for r, u, _ in first}) == 20  # distinct annotators per run
    for u in users:  # each queue is positions 0..n-1
        assert sorted(p for _, uid, p in first if uid == u.id) == list(range(res.per_annotator[u.username]))
    # queues are shuffled, not in run_id order, for at least one annotator
    orders = [[item["run_id"] for item in user_queue(session, u)["items"]] for u in users]
    assert any(order != sorted(order) for order in orders)
    # same inputs (annotators in another order) on a fresh start -> the same assignment
    session.execute(delete(Assignment))
    session.commit()
    again = create_assignments(session, RunFilter(), None, 11, list(reversed(NAMES)), 2, tax, batch="b1")
    session.commit()
    assert _pairs(session, tax) == first and again.pairs == res.pairs
    # running it once more skips every pair already assigned
    third = create_assignments(session, RunFilter(), None, 11, NAMES, 2, tax)
    assert (third.created, third.skipped_existing) == (0, 20)


def test_filters_sample_and_queue_positions_append(corpus):
    session, users, tax = corpus
    res = create_assignments(session, RunFilter(family="legal"), None, 1, NAMES, 1, tax)
    assert (res.runs_matching, res.created) == (3, 3)
    assert set(res.per_annotator.values()) == {1}
    legal = {r for r, _, _ in res.pairs}
    assert legal == {"c-07", "c-08", "c-09"}
    res2 = create_assignments(session, RunFilter(family="commerce"), 4, 5, NAMES, 3, tax)
    assert (res2.runs_matching, res2.runs_selected, res2.created) == (7, 4, 12)
    session.commit()
    for u in users:  # the new batch comes after the first in every queue
        q = user_queue(session, u)
        assert [i["position"] for i in q["items"]] == [0, 1, 2, 3, 4]
        assert q["items"][0]["run_id"] in legal
        assert all(i["run_id"] not in legal for i in q["items"][1:])


def test_assignment_input_errors(corpus):
    session, users, tax = corpus
    judge_user(session, "judge-l2")
    users[2].is_active = False
    session.add(users[2])
    session.flush()
    cases = [
        (["ann", "zed"], 1, "annotators[1]: no user 'zed'"),
        (["ann", "ann"], 1, "annotators[1]: 'ann' is listed twice"),
        (["ann", "judge:judge-l2"], 1, "annotators[1]: 'judge:judge-l2' is an automated judge"),
        (["ann", "cid"], 1, "annotators[1]: user 'cid' is deactivated"),
        (["ann", "bea"], 3, "k: k=3 annotators per run, but only 2 annotator(s) given"),
    ]
    for names, k, message in cases:
        with pytest.raises(AnnotationError) as err:
            create_assignments(session, RunFilter(), None, 1, names, k, tax)
        assert str(err.value).startswith(message)
    assert session.exec(select(Assignment)).all() == []


def test_next_in_queue_skips_submitted(corpus):
    session, users, tax = corpus
    ann = users[0]
    create_assignments(session, RunFilter(family="legal"), None, 3, ["ann"], 1, tax)
    session.commit()
    order = [i["run_id"] for i in user_queue(session, ann)["items"]]
    assert next_in_queue(session, ann)["run_id"] == order[0]
    from app.runs.service import get_run

    save_annotation(session, ann, get_run(session, order[0]), tax, [], no_failure=True, status="submitted")
    save_annotation(session, ann, get_run(session, order[1]), tax, [], no_failure=False, status="draft")
    q = user_queue(session, ann)
    assert (q["assigned"], q["submitted"], q["drafts"], q["remaining"]) == (3, 1, 1, 2)
    assert [i["status"] for i in q["items"]] == ["submitted", "draft", "new"]
    assert next_in_queue(session, ann)["run_id"] == order[1]  # a draft is still to do
    for rid in order[1:]:
        save_annotation(session, ann, get_run(session, rid), tax, [], no_failure=True, status="submitted")
    assert next_in_queue(session, ann) is None
