"""`judge score` on the demo corpus with scripted judges of known errors, against gold where a run
was adjudicated and the human majority elsewhere; the expected numbers are counted here by hand."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from sqlmodel import Session

from app.annotations.models import Annotation, GoldLabel, GoldRun, Label
from app.annotations.service import resolve_taxonomy
from app.cli import cli
from app.judges import service
from app.runs.service import get_run
from tests.annotations.factories import make_user
from tests.judges.helpers import judge_file, load_demo, truth_answer, truth_of
from tests.judges.standin import StandIn, answer

N = 40


def _references(engine, runs):
    """Gold (from the seeded truth) on the first 30 runs; on the other 10, two humans of three say
    the truth and one says nothing, so the majority is the truth too."""
    ids = sorted(runs)
    with Session(engine) as s:
        tax = resolve_taxonomy(s, None)
        humans = [make_user(s, n) for n in ("hana", "ivo", "jun")]
        for i, rid in enumerate(ids):
            pk = get_run(s, rid).id
            truth = truth_of(runs[rid])
            if i < 30:
                g = GoldRun(run_pk=pk, taxonomy_pk=tax.id, status="adjudicated", no_failure=not truth)
                s.add(g)
                s.flush()
                for t in truth:
                    s.add(GoldLabel(gold_run_id=g.id, mode=t["mode"], agent=t["agent"], evidence=t["evidence"],
                                    origin="adjudication"))
                continue
            for j, h in enumerate(humans):
                labs = truth if j < 2 else []
                a = Annotation(run_pk=pk, user_id=h.id, taxonomy_pk=tax.id, status="submitted", no_failure=not labs)
                s.add(a)
                s.flush()
                for t in labs:
                    s.add(Label(annotation_id=a.id, mode=t["mode"], agent=t["agent"], evidence=t["evidence"]))
        s.commit()
    return ids


def _kappa(pairs):
    n = len(pairs)
    a = sum(1 for x, y in pairs if x and y)
    d = sum(1 for x, y in pairs if not x and not y)
    r1 = sum(x for x, _ in pairs) / n
    j1 = sum(y for _, y in pairs) / n
    po, pe = (a + d) / n, r1 * j1 + (1 - r1) * (1 - j1)
    return (po - pe) / (1 - pe)


def test_score_labels_and_attribution(engine, monkeypatch):
    runs = load_demo(engine, N)
    ids = _references(engine, runs)
    answers = {}
    for i, rid in enumerate(ids):
        ans = truth_answer(runs[rid])
        agents = [a["id"] for a in runs[rid]["agents"]]
        if i % 4 == 1 and ans["labels"]:
            ans["labels"] = ans["labels"][1:]  # a miss
        if i % 6 == 2 and not any(x["mode"] == "DD1" for x in ans["labels"]):
            ans["labels"].append({"mode": "DD1", "agent": agents[0], "evidence": [0], "rationale": "spurious"})
        ans["verdict"] = "failure" if ans["labels"] else "no_failure"
        answers[rid] = ans
    steps = {}

    def script(req):
        if "Name the agent responsible" in req.user:
            return answer(steps[req.run_id])
        return answer(answers[req.run_id])

    # attribution answers: the reference's failure point moved by 0, +1, +2, -3 seqs; every fifth blames another agent
    # a run without a failure in the reference: the judge must still name someone (the answer is not
    # nullable with one window); it names the first agent at the first event, which no score counts
    offsets = [0, 1, 2, -3]
    ref_points = {}
    for i, rid in enumerate(ids):
        truth = truth_of(runs[rid])
        if not truth:
            steps[rid] = {"agent": runs[rid]["agents"][0]["id"], "step": runs[rid]["events"][0]["seq"],
                          "rationale": "r"}
            continue
        step, agent = min((min(t["evidence"]), t["agent"]) for t in truth)
        ref_points[rid] = (agent, step)
        n_ev = len(runs[rid]["events"])
        got = step + offsets[i % 4] if 0 <= step + offsets[i % 4] < n_ev else step
        agents = [a["id"] for a in runs[rid]["agents"]]
        steps[rid] = {"agent": agent if i % 5 else next(a for a in agents if a != agent), "step": got,
                      "rationale": "r"}

    with StandIn(script) as srv:
        for name, strategy in (("lab", "all-at-once"), ("att", "attribution-all-at-once")):
            with Session(engine) as s:
                jv, _ = service.register(s, judge_file(srv.base_url, name=name, strategy=strategy))
                jr_id = service.plan(s, jv).id
                s.commit()
            assert service.execute(engine, jr_id).state == "done"
        assert len(srv.log) == 2 * N, len(srv.log)  # one request per run and judge: none failed and was retried

    with Session(engine) as s:
        tax = resolve_taxonomy(s, None)
        from app.taxonomies.service import mode_codes
        modes = mode_codes(tax)
        rep = service.score(s, "lab", n_boot=100, k=2)
        att = service.score(s, "att", n_boot=0, k=2)
    assert rep["n_runs"] == N and rep["reference"] == {"gold": 30, "human majority": 10}
    ref = {rid: {x["mode"] for x in truth_of(runs[rid])} for rid in ids}
    got = {rid: {x["mode"] for x in answers[rid]["labels"]} for rid in ids}
    tp = sum(len(ref[r] & got[r]) for r in ids)
    fp = sum(len(got[r] - ref[r]) for r in ids)
    fn = sum(len(ref[r] - got[r]) for r in ids)
    assert fp > 0 and fn > 0
    o = rep["overall"]
    assert (o["tp"], o["fp"], o["fn"]) == (tp, fp, fn)
    assert o["precision"] == pytest.approx(tp / (tp + fp)) and o["recall"] == pytest.approx(tp / (tp + fn))
    pooled = [(m in ref[r], m in got[r]) for r in sorted(ids, key=lambda r: str(get_pk(engine, r))) for m in modes]
    assert o["kappa"]["value"] == pytest.approx(_kappa(pooled))
    dd1 = next(r for r in rep["modes"] if r["mode"] == "DD1")
    dd1_pairs = [("DD1" in ref[r], "DD1" in got[r]) for r in ids]
    assert dd1["kappa"]["value"] == pytest.approx(_kappa(dd1_pairs))
    assert dd1["fp"] == sum(1 for x, y in dd1_pairs if y and not x)
    assert len(rep["disagreements"]) == sum(1 for r in ids if ref[r] != got[r])
    assert rep["agent_accuracy"]["value"] == 1.0 and rep["evidence_overlap"]["value"] == 1.0
    assert [v["version"] for v in rep["versions"]] == [rep["version"]]

    at = att["attribution"]
    n = len(ref_points)
    exact = sum(1 for r, (a, st) in ref_points.items() if steps[r]["step"] == st)
    within2 = sum(1 for r, (a, st) in ref_points.items() if abs(steps[r]["step"] - st) <= 2)
    agent_ok = sum(1 for r, (a, st) in ref_points.items() if steps[r]["agent"] == a)
    assert at["n"] == n and at["step_accuracy"] == pytest.approx(exact / n)
    assert at["step_accuracy_within_k"] == pytest.approx(within2 / n) and exact < within2 < n
    assert at["agent_accuracy"] == pytest.approx(agent_ok / n) and agent_ok < n

    import app.cli.judge as cj

    monkeypatch.setattr(cj, "checked_engine", lambda: engine)
    r = CliRunner().invoke(cli, ["judge", "score", "lab", "--json", "--n-boot", "100", "--k", "2"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["overall"]["kappa"]["value"] == pytest.approx(o["kappa"]["value"])
    r = CliRunner().invoke(cli, ["judge", "score", "att", "--k", "2", "--n-boot", "0"])
    assert r.exit_code == 0 and "step within ±2" in r.output and f"over {n} runs" in r.output, r.output


def get_pk(engine, rid):
    with Session(engine) as s:
        return get_run(s, rid).id
