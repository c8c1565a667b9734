"""The runner against the stand-in Chat Completions server (real HTTP, the real `openai` client):
scale with 429s and failures, faults per request, resumption, versions, the cache, cancellation."""
from __future__ import annotations

import json
import threading
import time
import zlib

import pytest
from sqlmodel import Session, select

from app.annotations.models import Annotation, Label
from app.auth.models import User
from app.judges import service
from app.judges.models import JudgeCall, JudgeResult, JudgeRun, JudgeVersion
from app.runs.models import Run
from tests.judges.helpers import judge_file, load_demo, truth_answer
from tests.judges.standin import Reply, StandIn, answer


def _register_plan(engine, text, **kw):
    with Session(engine) as s:
        jv, _ = service.register(s, text)
        jr = service.plan(s, jv, **kw)
        s.commit()
        return jv.id, jr.id


def _judge_labels(session, name):
    rows = session.execute(
        select(Run.run_id, Label.mode, Label.agent, Label.evidence, Label.note).join(Annotation, Annotation.run_pk == Run.id)
        .join(User, User.id == Annotation.user_id).join(Label, Label.annotation_id == Annotation.id, isouter=True)
        .where(User.username == f"judge:{name}")).all()
    out: dict[str, list] = {}
    for rid, mode, agent, ev, _note in rows:
        out.setdefault(rid, [])
        if agent is not None:
            out[rid].append((mode, agent, tuple(ev)))
    return {k: sorted(v) for k, v in out.items()}


def _expected(run):
    return sorted((x["mode"], x["agent"], tuple(sorted(set(x["evidence"])))) for x in truth_answer(run)["labels"])


@pytest.mark.parametrize("processes", [1, 2])
def test_scale_with_429s_and_failures(engine, monkeypatch, processes):
    monkeypatch.setenv("A2A_TEST_JUDGE_KEY", "sk-test")
    runs = load_demo(engine, 500)
    failed_once: set[str] = set()
    lock = threading.Lock()
    ok_answers: dict[str, int] = {}

    def script(req):
        rid = req.run_id
        if req.n % 10 == 3:  # 10% of requests: rate limited
            return Reply(status=429, headers={"Retry-After": "0"}, delay=0.05)
        with lock:
            if zlib.crc32(rid.encode()) % 50 == 0 and rid not in failed_once:  # 2% of runs: a 500 once
                failed_once.add(rid)
                return Reply(status=500, delay=0.05)
            ok_answers[rid] = ok_answers.get(rid, 0) + 1
        return Reply(text=json.dumps(truth_answer(runs[rid])), delay=0.05)

    with StandIn(script) as srv:
        text = judge_file(srv.base_url, extra="limits: {concurrency: 16, retries: 4, backoff_initial_seconds: 0.01}\n")
        jv_id, jr_id = _register_plan(engine, text)
        seen: list[tuple[int, int]] = []
        prog = service.execute(engine, jr_id, processes=processes,
                               progress=lambda p: seen.append((p.done + p.error, p.total)))
    assert prog.state == "done" and prog.done == 500 and prog.error == 0 and prog.total == 500
    # the progress shown grows to the whole selection (with 2 processes: from the judge run's row)
    assert seen[-1] == (500, 500) and all(a[0] <= b[0] for a, b in zip(seen, seen[1:]))
    assert len({d for d, _ in seen}) > 5
    if processes == 2:  # the runs each process judged (the lead's first; a helper starting late may get none)
        assert len(prog.processes) == 2 and sum(prog.processes) == 500, prog.processes
    else:
        assert prog.processes == []
    assert len(failed_once) >= 5 and sum(1 for r in srv.log if r.n % 10 == 3) >= 50
    # more workers than request slots (they make prompts while the slots wait), never more
    # requests at once than the judge's concurrency; and the slots were all used
    assert srv.peak == 16, srv.peak
    assert ok_answers == {rid: 1 for rid in runs}  # every run answered (judged) exactly once
    with Session(engine) as s:
        res = s.exec(select(JudgeResult).where(JudgeResult.judge_version_id == jv_id)).all()
        assert len(res) == 500 and {r.state for r in res} == {"done"}
        assert len({r.run_pk for r in res}) == 500
        stored = _judge_labels(s, "tj")
        assert stored == {rid: _expected(run) for rid, run in runs.items()}
        n_ann = s.execute(select(Annotation.id).join(User, User.id == Annotation.user_id)
                          .where(User.username == "judge:tj")).all()
        assert len(n_ann) == 500
        jr = s.get(JudgeRun, jr_id)
        calls = s.exec(select(JudgeCall).where(JudgeCall.judge_run_id == jr_id)).all()
        assert jr.state == "done" and jr.n_done == 500 and jr.n_calls == len(calls) == 500
        # every HTTP attempt is counted on its call (a keep-alive connection the server closed
        # under the client is retried too, so there may be more attempts than requests received)
        assert sum(c.attempts for c in calls) >= len(srv.log) > 500
        assert jr.tokens_in == 500 * 100 and jr.tokens_out == 500 * 20 and jr.latency_ms >= 500 * 50


def test_two_processes_share_the_runs(engine):
    """Slow answers (the lead alone would need 12 s): the helper process, once started, takes chunks
    too; every run is asked for once, stored once, with the answer's labels."""
    runs = load_demo(engine, 96)
    asked: dict[str, int] = {}
    lock = threading.Lock()

    def script(req):
        with lock:
            asked[req.run_id] = asked.get(req.run_id, 0) + 1
        return Reply(text=json.dumps(truth_answer(runs[req.run_id])), delay=0.25)

    with StandIn(script) as srv:
        jv_id, jr_id = _register_plan(engine, judge_file(srv.base_url, extra="limits: {concurrency: 2, processes: 2}\n"))
        prog = service.execute(engine, jr_id)
    assert prog.state == "done" and prog.done == 96 and len(prog.processes) == 2 and min(prog.processes) > 0
    assert asked == dict.fromkeys(runs, 1)
    with Session(engine) as s:
        assert _judge_labels(s, "tj") == {rid: _expected(run) for rid, run in runs.items()}
        jr = s.get(JudgeRun, jr_id)
        assert jr.n_done == 96 and jr.n_error == 0 and jr.n_calls == 96 and jr.tokens_in == 96 * 100
        assert len(s.exec(select(JudgeResult).where(JudgeResult.state == "done")).all()) == 96


def test_faults_per_request(engine, monkeypatch):
    runs = load_demo(engine, 8)
    ids = sorted(runs)
    a_timeout, b_text_once, c_text_twice, d_bad_refs, e_cut, f_500, g_retry_after, h_ok = ids
    run_d = runs[d_bad_refs]
    agent_d = run_d["agents"][0]["id"]

    def script(req):
        rid = req.run_id
        good = Reply(text=json.dumps(truth_answer(runs[rid])))
        if rid == a_timeout and req.seen == 1:
            return Reply(text="{}", delay=3.0)
        if rid == b_text_once and not req.is_retry_for_parse:
            return Reply(text="I believe the run went fine, mostly.")
        if rid == c_text_twice:
            return Reply(text="Not JSON, sorry." if not req.is_retry_for_parse else '{"verdict": "failure", "lab')
        if rid == d_bad_refs:
            return answer({"verdict": "failure", "labels": [
                {"mode": "CF1", "agent": agent_d, "evidence": [1, 9999], "rationale": "kept"},
                {"mode": "XX7", "agent": agent_d, "evidence": [1]},
                {"mode": "GR3", "agent": "nobody_agent", "evidence": [1]}]})
        if rid == e_cut and not req.is_retry_for_parse:
            return Reply(text='{"verdict": "failure", "labels": [{"mode": "CF', finish_reason="length")
        if rid == f_500:
            return Reply(status=500)
        if rid == g_retry_after and req.seen == 1:
            return Reply(status=429, headers={"Retry-After": "1"})
        return good

    with StandIn(script) as srv:
        text = judge_file(srv.base_url, extra="output: text\nlimits: {concurrency: 4, retries: 2, timeout_seconds: 1.0, "
                                             "backoff_initial_seconds: 0.01, backoff_max_seconds: 0.05}\n")
        jv_id, jr_id = _register_plan(engine, text)
        t0 = time.monotonic()
        prog = service.execute(engine, jr_id)
        elapsed = time.monotonic() - t0
    assert prog.state == "done" and prog.done == 6 and prog.error == 2
    assert elapsed >= 1.0  # Retry-After: 1 was honoured
    with Session(engine) as s:
        res = {rid: r for r, rid in s.execute(select(JudgeResult, Run.run_id).join(Run, Run.id == JudgeResult.run_pk))}
        calls = {rid: s.exec(select(JudgeCall).where(JudgeCall.result_id == res[rid].id)
                             .order_by(JudgeCall.id)).all() for rid in ids}
    assert res[a_timeout].state == "done" and calls[a_timeout][0].attempts == 2
    assert res[b_text_once].state == "done" and [c.status for c in calls[b_text_once]] == ["parse_error", "ok"]
    retry = next(r for r in srv.log if r.run_id == b_text_once and r.is_retry_for_parse)
    assert "Your answer could not be used: no JSON object found in the answer" in retry.body["messages"][-1]["content"]
    c = res[c_text_twice]
    assert c.state == "error" and "could not be parsed, twice" in c.error and c.raw == '{"verdict": "failure", "lab'
    d = res[d_bad_refs]
    assert d.state == "done" and d.answer["labels"] == [{"mode": "CF1", "agent": agent_d, "evidence": [1],
                                                         "rationale": "kept", "confidence": None}]
    assert d.problems == ["labels[0]: evidence #9999 is no event of the run; dropped",
                          "labels[1]: unknown mode 'XX7'; dropped",
                          "labels[2]: agent 'nobody_agent' is not an agent of the run; dropped"]
    assert res[e_cut].state == "done" and "cut at max_tokens" in calls[e_cut][0].error
    f = res[f_500]
    assert f.state == "error" and f.error.startswith("HTTP 500") and calls[f_500][0].attempts == 3
    assert res[g_retry_after].state == "done" and calls[g_retry_after][0].attempts == 2
    assert res[h_ok].state == "done"
    with Session(engine) as s:
        stored = _judge_labels(s, "tj")
    assert c_text_twice not in stored and f_500 not in stored  # errors store no labels
    assert stored[d_bad_refs] == [("CF1", agent_d, (1,))]


def test_resume_same_version_new_version_and_cache(engine, monkeypatch):
    runs = load_demo(engine, 12)

    def script(req):
        return Reply(text=json.dumps(truth_answer(runs[req.run_id])), tokens=(50, 10))

    with StandIn(script) as srv:
        text = judge_file(srv.base_url)
        jv1, jr1 = _register_plan(engine, text, limit=5)
        service.execute(engine, jr1)
        assert len(srv.log) == 5
        jv1b, jr2 = _register_plan(engine, text)  # the rest only
        assert jv1b == jv1
        service.execute(engine, jr2)
        assert len(srv.log) == 12 and sorted(set(srv.runs_requested())) == sorted(runs)
        with Session(engine) as s:
            before = [(r.id, r.state, json.dumps(r.answer, sort_keys=True), r.updated_at)
                      for r in s.exec(select(JudgeResult).order_by(JudgeResult.id)).all()]
            ann_before = s.exec(select(Annotation.id, Annotation.updated_at)).all()
        _, jr3 = _register_plan(engine, text)  # the same version again: nothing to do
        service.execute(engine, jr3)
        assert len(srv.log) == 12
        with Session(engine) as s:
            after = [(r.id, r.state, json.dumps(r.answer, sort_keys=True), r.updated_at)
                     for r in s.exec(select(JudgeResult).order_by(JudgeResult.id)).all()]
            assert after == before and s.exec(select(Annotation.id, Annotation.updated_at)).all() == ann_before
            j3 = s.get(JudgeRun, jr3)
            assert (j3.total, j3.n_skipped, j3.n_calls, j3.state) == (0, 12, 0, "done")
        # a new prompt: a new version, new results beside the old ones
        text2 = text + "prompts:\n  system: \"You are a strict annotator. Answer in JSON.\"\n"
        jv2, jr4 = _register_plan(engine, text2)
        assert jv2 != jv1
        service.execute(engine, jr4)
        assert len(srv.log) == 24
        with Session(engine) as s:
            per_version = {v: s.exec(select(JudgeResult).where(JudgeResult.judge_version_id == v)).all()
                           for v in (jv1, jv2)}
            assert [len(x) for x in per_version.values()] == [12, 12]
            assert [(r.id, r.state, json.dumps(r.answer, sort_keys=True), r.updated_at)
                    for r in sorted(per_version[jv1], key=lambda r: r.id)] == before  # old results untouched
            v2 = s.get(JudgeVersion, jv2).version
            anns = s.exec(select(Annotation).join(User, User.id == Annotation.user_id)
                          .where(User.username == "judge:tj")).all()
            assert len(anns) == 12 and {a.source_version for a in anns} == {v2} and {a.origin for a in anns} == {"judge"}
            # lose three results of version 2: judged again from the response cache, no request sent
            lost = [r.id for r in per_version[jv2]][:3]
            for rid in lost:
                s.delete(s.get(JudgeResult, rid))
            s.commit()
        _, jr5 = _register_plan(engine, text2)
        service.execute(engine, jr5)
        assert len(srv.log) == 24
        with Session(engine) as s:
            calls = s.exec(select(JudgeCall).where(JudgeCall.judge_run_id == jr5)).all()
            assert len(calls) == 3 and all(c.cached for c in calls) and all(c.cost == 0 for c in calls)
            assert s.get(JudgeRun, jr5).n_done == 3


@pytest.mark.parametrize("processes", [1, 2])
def test_cancel_while_running_then_resume(engine, processes):
    runs = load_demo(engine, 30)

    def script(req):
        return Reply(text=json.dumps(truth_answer(runs[req.run_id])), delay=0.1)

    with StandIn(script) as srv:
        jv, jr = _register_plan(engine, judge_file(srv.base_url, extra=f"limits: {{concurrency: 2, "
                                                                        f"processes: {processes}}}\n"))
        cancellers: list[threading.Thread] = []

        def cancel_elsewhere():  # as another request or process would
            with Session(engine) as s:
                service.cancel(s, s.get(JudgeRun, jr))
                s.commit()

        def watch(p):
            if p.done >= 4 and not cancellers:
                cancellers.append(threading.Thread(target=cancel_elsewhere))
                cancellers[0].start()

        prog = service.execute(engine, jr, progress=watch)
        cancellers[0].join()
        assert prog.state == "cancelled"
        assert len(prog.processes) == (2 if processes == 2 else 0)
        with Session(engine) as s:
            j = s.get(JudgeRun, jr)
            done = s.exec(select(JudgeResult).where(JudgeResult.state == "done")).all()
            left = s.exec(select(JudgeResult).where(JudgeResult.state != "done")).all()
            assert j.state == "cancelled" and 4 <= len(done) < 30 and {r.state for r in left} == {"queued"}
            first_done = {r.run_pk for r in done}
        n_before = len(srv.log)
        _, jr2 = _register_plan(engine, judge_file(srv.base_url, extra="limits: {concurrency: 2}\n"))
        assert service.execute(engine, jr2).state == "done"
        with Session(engine) as s:
            assert len(s.exec(select(JudgeResult).where(JudgeResult.state == "done")).all()) == 30
            again = {s.exec(select(Run.id).where(Run.run_id == r.run_id)).one() for r in srv.log[n_before:]}
        assert not (again & first_done)


@pytest.mark.parametrize("processes", [1, 2])
def test_cost_cap_stops_the_run(engine, processes):
    """Each call costs 0.01 (100 input tokens at 100 a million); the cap of 0.1 stops the judge run
    (with 2 processes, each at its share 0.05): the calls in flight finish, nothing more is asked."""
    runs = load_demo(engine, 60)

    def script(req):
        return Reply(text=json.dumps(truth_answer(runs[req.run_id])), delay=0.05)

    with StandIn(script) as srv:
        text = judge_file(srv.base_url, extra="prices: {input_per_million: 100, output_per_million: 0}\n"
                                              "limits: {concurrency: 4, cost_cap: 0.1}\n")
        with Session(engine) as s:
            jv, _ = service.register(s, text)
            jr_id = service.plan(s, jv, check_cap=False).id
            s.commit()
        prog = service.execute(engine, jr_id, processes=processes)
        asked = len(srv.log)
    assert prog.state == "error" and "cost cap (0.1) was reached" in prog.reason
    with Session(engine) as s:
        jr = s.get(JudgeRun, jr_id)
        calls = s.exec(select(JudgeCall).where(JudgeCall.judge_run_id == jr_id)).all()
        done = s.exec(select(JudgeResult).where(JudgeResult.state == "done")).all()
        assert jr.state == "error" and "cost cap" in jr.error
        # the cap is reached (10 calls) and passed by at most the calls in flight (4 in all); a
        # request in flight when the run stopped is abandoned (its run stays queued), not stored
        assert 10 <= len(calls) <= asked <= 10 + 4 and jr.n_calls == len(calls)
        assert jr.cost == pytest.approx(0.01 * len(calls)) == pytest.approx(sum(c.cost for c in calls))
        assert jr.n_done == len(done) == len(calls) and prog.done == len(done)
        left = s.exec(select(JudgeResult).where(JudgeResult.state != "done")).all()
        assert len(left) == 60 - len(done) and {r.state for r in left} == {"queued"}


def test_dry_run_estimate_and_cost_cap(engine, monkeypatch, tmp_path):
    from click.testing import CliRunner

    import app.cli.judge as cj
    from app.cli import cli

    load_demo(engine, 6)
    monkeypatch.setattr(cj, "checked_engine", lambda: engine)
    f = tmp_path / "j.yaml"
    f.write_text(judge_file("http://127.0.0.1:9/v1", extra="prices: {input_per_million: 1000, output_per_million: 2000}\n"
                                                      "limits: {cost_cap: 0.5}\n"))
    r = CliRunner().invoke(cli, ["judge", "run", str(f), "--dry-run", "--json"])
    assert r.exit_code == 1, r.output
    est = json.loads(r.output[:r.output.rindex("}") + 1])
    assert est["runs"] == 6 and est["calls"] == 6 and est["tokens_in"] > 6 * 1000 and est["over_cap"] is True
    assert est["cost"] == pytest.approx(est["tokens_in"] * 1000 / 1e6 + est["tokens_out"] * 2000 / 1e6, rel=1e-6)
    assert r.output.strip().splitlines()[-1].startswith("Error: the estimated cost")
    r = CliRunner().invoke(cli, ["judge", "run", "tj", "--runs", "nope"])
    assert r.exit_code == 1 and "no run 'nope'" in r.output
    r = CliRunner().invoke(cli, ["judge", "run", "tj", "--limit", "1", "--dry-run"])
    assert r.exit_code == 1 and "1 runs to judge" in r.output  # one run costs more than the cap too
    r = CliRunner().invoke(cli, ["judge", "run", "tj"])  # a real run refuses before the first request
    assert r.exit_code == 1 and "exceeds the judge's cost cap" in r.output
    with Session(engine) as s:
        assert s.exec(select(JudgeRun)).all() == [] and s.exec(select(JudgeResult)).all() == []
    r = CliRunner().invoke(cli, ["judge", "list"])
    assert r.exit_code == 0 and r.output.startswith("tj\t") and "judged 0" in r.output


def test_cancelled_before_it_starts(engine):
    load_demo(engine, 3)
    jv, jr = _register_plan(engine, judge_file("http://127.0.0.1:9/v1"))
    with Session(engine) as s:
        j = service.cancel(s, s.get(JudgeRun, jr))
        assert j.state == "cancelled"
        s.commit()
    prog = service.execute(engine, jr)  # nothing is asked (the endpoint is not even listening)
    assert prog.state == "cancelled" and prog.calls == 0
    with Session(engine) as s:
        assert s.get(JudgeRun, jr).state == "cancelled"
        assert {r.state for r in s.exec(select(JudgeResult)).all()} == {"queued"}
        with pytest.raises(service.JudgeError, match="already ended"):
            service.cancel(s, s.get(JudgeRun, jr))


def test_delayed_state_is_visible_and_samples_vote(engine):
    runs = load_demo(engine, 2)
    slow, other = sorted(runs)
    agent = runs[other]["agents"][0]["id"]
    seen_states: set[str] = set()

    def script(req):
        if req.run_id == slow and req.seen == 1 and req.body.get("temperature") == 0:
            return Reply(status=429, headers={"Retry-After": "2"})
        if req.run_id == other:  # 3 samples: CF1 in two of them, GR3 in one
            sample = sum(1 for r in srv.log if r.run_id == other)
            labs = [{"mode": "CF1", "agent": agent, "evidence": [1]}] if sample <= 2 else []
            if sample == 3:
                labs.append({"mode": "GR3", "agent": agent, "evidence": [2]})
            return answer({"verdict": "failure" if labs else "no_failure", "labels": labs})
        return Reply(text=json.dumps(truth_answer(runs[req.run_id])))

    with StandIn(script) as srv:
        _, jr1 = _register_plan(engine, judge_file(srv.base_url), run_ids=[slow])
        done = threading.Event()

        def watch():
            while not done.is_set():
                with Session(engine) as s:
                    seen_states.update(s.exec(select(JudgeResult.state)).all())
                time.sleep(0.05)

        t = threading.Thread(target=watch)
        t.start()
        try:
            assert service.execute(engine, jr1).state == "done"
        finally:
            done.set()
            t.join()
        with Session(engine) as s:  # the watcher may stop before its next look: the final state too
            seen_states.update(s.exec(select(JudgeResult.state)).all())
        assert {"queued", "delayed", "done"} <= seen_states
        _, jr2 = _register_plan(engine, judge_file(srv.base_url, name="tk", extra="sampling: {samples: 3, "
                                                                                  "temperature: 0.7}\n"),
                                run_ids=[other])
        assert service.execute(engine, jr2).state == "done"
    assert sum(1 for r in srv.log if r.run_id == other) == 3  # three distinct samples, not one cached answer
    with Session(engine) as s:
        labels = s.execute(select(Label.mode, Label.confidence).join(Annotation, Annotation.id == Label.annotation_id)
                           .join(User, User.id == Annotation.user_id).where(User.username == "judge:tk")).all()
        res = s.exec(select(JudgeResult).where(JudgeResult.judge_run_id == jr2)).one()
    assert [(m, round(c, 4)) for m, c in labels] == [("CF1", 0.6667)]
    assert res.confidence == pytest.approx(0.6667) and any("below the vote threshold" in p for p in res.problems)


def test_requests_per_minute_limit_is_shared(engine):
    runs = load_demo(engine, 33)

    def script(req):
        return Reply(text=json.dumps(truth_answer(runs[req.run_id])))

    with StandIn(script) as srv:
        # a bucket of 30 requests a minute: 30 at once, then one every 2 s
        _, jr = _register_plan(engine, judge_file(srv.base_url, extra="limits: {concurrency: 8, "
                                                                        "requests_per_minute: 30}\n"))
        t0 = time.monotonic()
        prog = service.execute(engine, jr)
        elapsed = time.monotonic() - t0
    assert prog.state == "done" and prog.done == 33 and len(srv.log) == 33
    assert elapsed >= 4.0  # requests 31 to 33 waited for the bucket


def test_bulk_writer_keeps_foreign_labels_and_a_non_json_body_is_a_call_error(engine, monkeypatch):
    """The writer stores a batch in a few statements: a run whose `judge:<name>` annotation came from
    an import keeps it (the result says so); the judge's own earlier annotation is replaced, labels
    and all; an answer body that is no JSON is that run's error, naming it."""
    from app.auth.service import judge_user
    from app.taxonomies.service import resolve

    runs = load_demo(engine, 4)
    foreign, replaced, broken, plain = sorted(runs)
    with Session(engine) as s:
        user, tax = judge_user(s, "tj"), resolve(s, "a2-failures")
        pk = {r.run_id: r.id for r in s.exec(select(Run)).all()}
        imp = Annotation(run_pk=pk[foreign], user_id=user.id, taxonomy_pk=tax.id, status="submitted", origin="import")
        s.add(imp)
        s.flush()
        s.add(Label(annotation_id=imp.id, mode="CF1", agent="someone", evidence=[1]))
        s.commit()
        imp_id, user_id = imp.id, user.id

    def script(req):
        if req.run_id == broken:
            return Reply(raw_body="<html>bad gateway</html>")
        return Reply(text=json.dumps(truth_answer(runs[req.run_id])))

    with StandIn(script) as srv:
        text = judge_file(srv.base_url, extra="limits: {retries: 0}\n")
        _, jr1 = _register_plan(engine, text, run_ids=[replaced])
        service.execute(engine, jr1)
        jv2, jr2 = _register_plan(engine, text + "prompts:\n  system: \"Answer in JSON.\"\n")
        prog = service.execute(engine, jr2)
    assert (prog.done, prog.error) == (3, 1)
    with Session(engine) as s:
        res = {rid: r for r, rid in s.execute(select(JudgeResult, Run.run_id).join(Run, Run.id == JudgeResult.run_pk)
                                              .where(JudgeResult.judge_version_id == jv2))}
        assert res[broken].state == "error" and "the endpoint's answer is no JSON" in res[broken].error
        assert "bad gateway" in res[broken].error and res[broken].annotation_id is None
        assert res[foreign].state == "done" and res[foreign].annotation_id is None
        assert res[foreign].problems == ["judge:tj already holds import labels on this run; the judge's answer is "
                                         "kept here only (rename the judge)"]
        kept = s.get(Annotation, imp_id)
        assert kept.origin == "import" and [(x.mode, x.agent) for x in s.exec(
            select(Label).where(Label.annotation_id == imp_id)).all()] == [("CF1", "someone")]
        anns = {a.run_pk: a for a in s.exec(select(Annotation).where(Annotation.user_id == user_id)).all()}
        assert set(anns) == {pk[foreign], pk[replaced], pk[plain]}
        v2 = s.get(JudgeVersion, jv2).version
        for rid in (replaced, plain):
            a = anns[pk[rid]]
            assert (a.origin, a.source_version, a.status) == ("judge", v2, "submitted")
            assert res[rid].annotation_id == a.id and a.no_failure == (not truth_answer(runs[rid])["labels"])
        assert len(s.exec(select(Annotation).where(Annotation.run_pk == pk[replaced],
                                                   Annotation.user_id == user_id)).all()) == 1
        stored = _judge_labels(s, "tj")
    assert stored[replaced] == _expected(runs[replaced]) and stored[plain] == _expected(runs[plain])
