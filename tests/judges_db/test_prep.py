"""The runner's prep process (`app.judges.prep`): the runs read and their prompt data made in a
second process give the same requests and the same stored labels as the runner's own reading;
a prep process that fails or never answers only moves the work back into the runner."""
from __future__ import annotations

import concurrent.futures
import json
import threading

import pytest
from sqlmodel import Session

from app.core.db import make_engine
from app.judges import prep, service
from tests.judges.helpers import judge_file, load_demo, truth_answer
from tests.judges.standin import Reply, StandIn
from tests.judges_db.test_runner import _expected, _judge_labels, _register_plan

N_RUNS = 120
LIMITS = "limits: {concurrency: 8, retries: 2, backoff_initial_seconds: 0.01}\n"


@pytest.fixture
def lowered(monkeypatch):
    """Judge runs of `N_RUNS` get a prep process (its threshold lowered)."""
    monkeypatch.setenv("A2A_TEST_JUDGE_KEY", "sk-test")
    monkeypatch.setattr(prep, "MIN_RUNS", 50)


@pytest.fixture
def counted(monkeypatch, lowered):
    """Judge runs of `N_RUNS` get a prep process (its threshold lowered), whose chunks the runner
    always waits for (on a loaded machine the runner may otherwise read them itself first); counts
    the chunks whose prompt data came from it."""
    made = {"chunks": 0, "runs": 0}
    real = prep.Prep.result

    async def result(self, fut, hungry):
        import asyncio

        views = await real(self, fut, asyncio.Event())  # never set: no worker is ever "hungry"
        if views is not None:
            made["chunks"] += 1
            made["runs"] += len(views)
        return views

    monkeypatch.setattr(prep.Prep, "result", result)
    return made


def _judge(engine, runs, name, model, asked, lock, strategy="all-at-once", extra=""):
    def script(req):
        with lock:
            asked.setdefault(name, {}).setdefault(req.run_id, []).append(req.body["messages"])
        return Reply(text=json.dumps(truth_answer(runs[req.run_id])), delay=0.02)

    with StandIn(script) as srv:
        text = judge_file(srv.base_url, name=name, strategy=strategy, extra=LIMITS + extra).replace(
            "model: stand-in", f"model: {model}")
        jv_id, jr_id = _register_plan(engine, text)
        prog = service.execute(engine, jr_id, processes=1)
    return prog


@pytest.mark.parametrize("strategy,extra,per_agent", [("all-at-once", "", 0),
                                                       ("per-agent", "sampling: {samples: 2}\n", 2)])
def test_prep_process_gives_the_same_requests_and_labels(engine, counted, monkeypatch, strategy, extra, per_agent):
    """The prep process also makes each run's first call (`app.judges.request.prepare_first`): with
    samples, one call's requests are several, and a per-agent judge asks more than one call."""
    runs = load_demo(engine, N_RUNS)
    asked: dict[str, dict[str, list]] = {}
    lock = threading.Lock()
    prog = _judge(engine, runs, "tj", "m1", asked, lock, strategy, extra)
    assert prog.state == "done" and prog.done == N_RUNS and prog.error == 0
    # chunks of 8 and 16 (read here while the prep process starts), then 50 and 46 from the prep process
    assert counted == {"chunks": 2, "runs": N_RUNS - 8 - 16}, counted
    made = dict(counted)
    monkeypatch.setattr(prep, "ENABLED", False)  # the same judge, another model: read in the runner
    prog = _judge(engine, runs, "tk", "m2", asked, lock, strategy, extra)
    assert prog.done == N_RUNS and counted == made
    # every run asked as often by each, with the same messages, and the same labels stored
    assert set(asked["tj"]) == set(asked["tk"]) == set(runs)
    assert all(len(asked[name][rid]) == (per_agent * len(run["agents"]) or 1)
               for name in ("tj", "tk") for rid, run in runs.items())
    assert all(sorted(map(json.dumps, asked["tj"][rid])) == sorted(map(json.dumps, asked["tk"][rid])) for rid in runs)
    with Session(engine) as s:
        expected = {rid: _expected(run) for rid, run in runs.items()}
        assert _judge_labels(s, "tj") == expected == _judge_labels(s, "tk")


@pytest.mark.parametrize("fault", ["fails", "never answers"])
def test_prep_process_fault_moves_the_work_back(engine, lowered, monkeypatch, fault):
    """A prep process that fails, or that never answers (workers find no run waiting), leaves the
    runner to read the runs itself: every run judged exactly once, the labels right."""
    runs = load_demo(engine, N_RUNS)
    if fault == "fails":
        async def result(self, fut, hungry):
            raise RuntimeError("the prep process died")

        monkeypatch.setattr(prep.Prep, "result", result)
    else:
        pending: list[concurrent.futures.Future] = []

        def submit(self, chunk):  # (a future of the pool's future, as `Prep.submit` gives)
            pending.append(f := concurrent.futures.Future())
            outer = concurrent.futures.Future()
            outer.set_result(f)
            return outer

        monkeypatch.setattr(prep.Prep, "submit", submit)
    asked: dict[str, dict[str, list]] = {}
    lock = threading.Lock()
    prog = _judge(engine, runs, "tj", "m1", asked, lock)
    assert prog.state == "done" and prog.done == N_RUNS and prog.error == 0
    assert set(asked["tj"]) == set(runs) and all(len(v) == 1 for v in asked["tj"].values())
    if fault == "never answers":  # the second chunk, then MISSES more, then none asked of it
        assert len(pending) <= 2 + prep.MISSES and all(f.cancelled() for f in pending), pending
    with Session(engine) as s:
        assert _judge_labels(s, "tj") == {rid: _expected(run) for rid, run in runs.items()}


def test_which_judge_runs_get_a_prep_process(monkeypatch, tmp_path):
    file_db = make_engine(f"sqlite:///{tmp_path / 'x.db'}")
    memory = make_engine("sqlite://")
    assert prep.wanted(file_db, prep.MIN_RUNS) and not prep.wanted(file_db, prep.MIN_RUNS - 1)
    assert not prep.wanted(memory, 10 ** 6)  # another process cannot open it
    monkeypatch.setattr(prep, "ENABLED", False)
    assert not prep.wanted(file_db, 10 ** 6)
