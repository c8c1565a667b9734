"""`load_report_data` reads the tables raw (one fetchall each, JSON cast to text): the frames hold
what the ORM loads (booleans, not SQLite's 0 / 1; decoded metrics), on both backends."""
from __future__ import annotations

import gc
import threading

import pytest
from sqlmodel import Session, select

from app.core.db import gc_paused
from app.reports.service import _json_dict, _json_dicts, load_report_data
from app.runs.models import Agent, Principal, Run
from tests.reports_db import corpus


def test_frames_hold_what_the_orm_loads(engine):
    with Session(engine) as s:
        corpus.build(s)
        s.commit()
        data = load_report_data(s, threshold=0.5)
        run_id = {r.id: r.run_id for r in s.exec(select(Run))}
        want = sorted((run_id[p.run_pk], p.principal_id, p.kind, p.success, p.score, p.metrics)
                      for p in s.exec(select(Principal)))
        agents = sorted((run_id[a.run_pk], a.agent_id, a.principal_id, a.role, a.model, a.harness)
                        for a in s.exec(select(Agent)) if a.principal_id is not None)
    got = sorted(data.principals.itertuples(index=False, name=None))
    assert [r[:3] for r in got] == [r[:3] for r in want]
    for g, w in zip(got, want, strict=True):
        assert type(g[3]) is type(w[3]) and g[3] == w[3], (g, w)  # True / False / None, never 1 / 0
        assert (w[4] is None and g[4] != g[4]) or g[4] == w[4]  # a float column: NULL is NaN
        assert g[5] == (w[5] or {}), (g, w)
    assert any(r[3] is False for r in got) and any(r[3] is True for r in got) and any(r[5] for r in got)
    assert sorted(data.agents.itertuples(index=False, name=None)) == agents
    assert sorted(data.runs["run_id"]) == sorted(run_id.values())


def test_json_dicts_decode_as_one_value_each():
    texts = ['{"a": 1, "b": [1, 2]}', "{}", "null", '{"x": 0.1}', "[]", '{"n": null}']
    assert _json_dicts(texts) == [_json_dict(t) for t in texts] == [
        {"a": 1, "b": [1, 2]}, {}, {}, {"x": 0.1}, {}, {"n": None}]
    # texts that are not one JSON value each: decoded (or refused) one by one, as before
    with pytest.raises(ValueError):  # "1, 2" joins into a valid array of one value too many
        _json_dicts(["1, 2", '{"a": 1}'])
    assert _json_dicts(["", '{"a": 1}']) == [{}, {"a": 1}]
    assert _json_dicts([None, '{"a": 1}']) == [{}, {"a": 1}]
    assert _json_dicts([]) == []


def test_gc_paused_restores_the_collector_for_the_last_thread_out():
    assert gc.isenabled()
    inside, leave = threading.Event(), threading.Event()

    def other() -> None:
        with gc_paused():
            inside.set()
            leave.wait(5)

    t = threading.Thread(target=other)
    with gc_paused():
        assert not gc.isenabled()
        t.start()
        assert inside.wait(5)
    assert not gc.isenabled()  # the other thread is still loading
    leave.set()
    t.join(5)
    assert gc.isenabled()
    try:
        with gc_paused():
            raise KeyError("x")
    except KeyError:
        pass
    assert gc.isenabled()
    gc.disable()  # a process that runs without the collector keeps it off
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
