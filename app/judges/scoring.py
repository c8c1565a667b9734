"""Calibration of a judge against a reference (gold, else the human majority). Pure.

Input: the judge's *units* (one per run: its labels ``{mode, agent, evidence}`` and, for
attribution strategies, ``attribution: {agent, step}``; tokens and cost) and the *reference* per
run (``{"source": "gold" | "human majority", "labels": {(mode, agent): evidence set}}``).
Runs without a reference are left out. Output (`score_judge`):

* per mode and per category: tp, fp, fn, tn over runs (a run is positive for a mode when it has a
  label of it), precision and recall with Wilson intervals, F1 with a bootstrap interval over runs
  (`app.detectors.scoring`), and Cohen's kappa of the two presence ratings with a bootstrap
  interval (`app.agreement.coefficients`);
* ``overall``: the same pooled over every (run, mode) cell;
* ``confusion``: mode codes of the reference against the judge's, per run: modes both gave are
  the diagonal; a reference mode the judge missed is paired with a judge mode the reference lacks
  (same agent first), and what is left with ``(none)``;
* ``agent_accuracy``: of the (run, mode) both gave, the share where the judge blamed one of the
  reference's agents; ``evidence_overlap``: the mean Jaccard overlap of the evidence seqs of the
  (run, mode, agent) both gave;
* ``attribution``: the reference's failure point is its label whose earliest evidence seq is the
  earliest in the run (that agent, that seq); the judge's is its attribution answer (label
  strategies: the same rule over its labels). Agent-level accuracy, step-level accuracy with
  exact matching and within plus or minus ``k`` seqs. Steps are compared as integers: 12 is not 1
  (the upstream Who&When scorer compares steps as substrings, so "12" counts as a hit for "1");
* ``disagreements``: each run where the (mode, agent) sets or the attribution differ;
* ``cost``: tokens and cost over the scored runs, per correct label (tp) and per correct
  attribution (agent and step exact).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.agreement.coefficients import cohen_kappa
from app.detectors.scoring import score_source

NONE = "(none)"


def _kappa(pairs: list[list[int]], n_boot: int, seed: int, confidence: float) -> dict[str, Any]:
    if not pairs:
        return {"value": None, "n_units": 0, "ci": None, "reason": "no run with a reference"}
    return cohen_kappa(pairs, n_boot=n_boot, seed=seed, confidence=confidence).to_dict()


def failure_point(labels: Mapping[tuple[str, str], Any] | Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """(agent, step) of the label whose earliest evidence seq is the earliest; None without evidence."""
    items = labels.items() if isinstance(labels, Mapping) else [((lab.get("mode"), lab["agent"]), lab["evidence"])
                                                               for lab in labels]
    best = None
    for (_, agent), ev in items:
        ev = [e for e in ev or [] if isinstance(e, int)]
        if not ev or not agent:
            continue
        cand = (min(ev), agent)
        if best is None or cand < best:
            best = cand
    return None if best is None else {"agent": best[1], "step": best[0]}


def _confusion(ref: set[tuple[str, str]], got: set[tuple[str, str]], counts: dict[str, dict[str, int]]) -> None:
    rm, gm = {m for m, _ in ref}, {m for m, _ in got}
    for m in rm & gm:
        counts.setdefault(m, {}).setdefault(m, 0)
        counts[m][m] += 1
    missed = sorted((m, a) for m, a in ref if m not in gm)
    extra = sorted((m, a) for m, a in got if m not in rm)
    seen_m: set[str] = set()
    missed = [x for x in missed if not (x[0] in seen_m or seen_m.add(x[0]))]
    seen_e: set[str] = set()
    extra = [x for x in extra if not (x[0] in seen_e or seen_e.add(x[0]))]
    pairs = []
    for r in list(missed):
        same = next((e for e in extra if e[1] == r[1]), None)
        if same is not None:
            pairs.append((r[0], same[0]))
            missed.remove(r)
            extra.remove(same)
    for r, e in zip(list(missed), list(extra)):
        pairs.append((r[0], e[0]))
    n = min(len(missed), len(extra))
    pairs += [(r[0], NONE) for r in missed[n:]] + [(NONE, e[0]) for e in extra[n:]]
    for a, b in pairs:
        counts.setdefault(a, {}).setdefault(b, 0)
        counts[a][b] += 1


def score_judge(units: Sequence[dict[str, Any]], refs: Mapping[Any, dict[str, Any]], modes: Sequence[str],
                mode_category: Mapping[str, str], *, attribution: bool = False, k: int = 1, n_boot: int = 1000,
                seed: int = 0, confidence: float = 0.95) -> dict[str, Any]:
    """The calibration report (see the module docstring)."""
    modes = list(modes)
    kept = [u for u in units if u["run_pk"] in refs]
    key = {u["run_pk"]: str(u["run_pk"]) for u in kept}
    judged = {key[u["run_pk"]]: {(lab["mode"], lab["agent"]) for lab in u["labels"] if lab.get("mode") in modes}
              for u in kept}
    reference = {key[u["run_pk"]]: {k_ for k_ in refs[u["run_pk"]]["labels"] if k_[0] in modes} for u in kept}
    src_units = {rid: (rid, labs) for rid, labs in judged.items()}
    per_mode = score_source(src_units, reference, modes, level="run", n_boot=n_boot, seed=seed,
                            confidence=confidence)
    cats = list(dict.fromkeys(mode_category.get(m, m) for m in modes))
    cat_units = {rid: (rid, {(mode_category.get(m, m), a) for m, a in labs}) for rid, labs in judged.items()}
    cat_ref = {rid: {(mode_category.get(m, m), a) for m, a in labs} for rid, labs in reference.items()}
    per_cat = score_source(cat_units, cat_ref, cats, level="run", n_boot=n_boot, seed=seed, confidence=confidence)
    rids = sorted(judged)
    for j, row in enumerate(per_mode["modes"]):
        m = row["mode"]
        pairs = [[int(any(x[0] == m for x in reference[r])), int(any(x[0] == m for x in judged[r]))] for r in rids]
        row["tn"] = sum(1 for a, b in pairs if not a and not b)
        row["kappa"] = _kappa(pairs, n_boot, seed + j, confidence)
    for j, row in enumerate(per_cat["modes"]):
        c = row["mode"]
        row["category"] = row.pop("mode")
        pairs = [[int(any(x[0] == c for x in cat_ref[r])), int(any(x[0] == c for x in cat_units[r][1]))]
                 for r in rids]
        row["tn"] = sum(1 for a, b in pairs if not a and not b)
        row["kappa"] = _kappa(pairs, n_boot, seed + j, confidence)
    pooled = [[int(any(x[0] == m for x in reference[r])), int(any(x[0] == m for x in judged[r]))]
              for r in rids for m in modes]
    overall = dict(per_mode["overall"])
    overall.pop("mode", None)
    overall["tn"] = sum(1 for a, b in pooled if not a and not b)
    overall["kappa"] = _kappa(pooled, n_boot, seed, confidence)

    confusion: dict[str, dict[str, int]] = {}
    agent_ok = agent_n = 0
    overlaps: list[float] = []
    attr_n = attr_agent = attr_exact = attr_within = 0
    disagreements = []
    tokens = cost = 0.0
    for u in kept:
        rid = key[u["run_pk"]]
        ref_l, got_l = reference[rid], judged[rid]
        tokens += u.get("tokens") or 0
        cost += u.get("cost") or 0.0
        _confusion(ref_l, got_l, confusion)
        for m in {x[0] for x in ref_l} & {x[0] for x in got_l}:
            agent_n += 1
            agent_ok += bool({a for mm, a in ref_l if mm == m} & {a for mm, a in got_l if mm == m})
        ev_ref = refs[u["run_pk"]]["labels"]
        ev_got = {(lab["mode"], lab["agent"]): set(lab["evidence"]) for lab in u["labels"]}
        for kk in ref_l & got_l:
            a, b = set(ev_ref.get(kk) or ()), ev_got.get(kk, set())
            if a or b:
                overlaps.append(len(a & b) / len(a | b))
        ref_pt = failure_point({kk: ev_ref[kk] for kk in ev_ref if kk[0] in modes})
        got_pt = u.get("attribution") if attribution else failure_point(
            [lab for lab in u["labels"] if lab.get("mode") in modes])
        attr_diff = False
        if ref_pt is not None:
            attr_n += 1
            ga, gs = (got_pt or {}).get("agent"), (got_pt or {}).get("step")
            attr_agent += ga == ref_pt["agent"]
            attr_exact += gs is not None and gs == ref_pt["step"]
            attr_within += gs is not None and abs(gs - ref_pt["step"]) <= k
            attr_diff = attribution and (ga != ref_pt["agent"] or gs != ref_pt["step"])
        if ref_l != got_l or attr_diff:
            disagreements.append({
                "run_id": u["run_id"], "reference_source": refs[u["run_pk"]]["source"],
                "reference": [{"mode": m, "agent": a, "evidence": sorted(ev_ref.get((m, a)) or [])}
                              for m, a in sorted(ref_l)],
                "judge": [{"mode": m, "agent": a, "evidence": sorted(ev_got.get((m, a)) or [])}
                          for m, a in sorted(got_l)],
                "missing": [f"{m} by {a}" for m, a in sorted(ref_l - got_l)],
                "extra": [f"{m} by {a}" for m, a in sorted(got_l - ref_l)],
                "reference_attribution": ref_pt, "judge_attribution": got_pt})
    sources: dict[str, int] = {}
    for u in kept:
        s = refs[u["run_pk"]]["source"]
        sources[s] = sources.get(s, 0) + 1
    labels = list(dict.fromkeys([*modes, NONE]))
    used = [m for m in labels if m in confusion or any(m in row for row in confusion.values())]
    tp = overall["tp"]
    return {
        "n_runs": len(kept), "n_judged": len(units), "reference": sources, "confidence": confidence,
        "n_boot": n_boot, "modes": per_mode["modes"], "categories": per_cat["modes"], "overall": overall,
        "confusion": {"labels": used, "matrix": [[confusion.get(a, {}).get(b, 0) for b in used] for a in used]},
        "agent_accuracy": {"value": agent_ok / agent_n if agent_n else None, "correct": agent_ok, "n": agent_n},
        "evidence_overlap": {"value": sum(overlaps) / len(overlaps) if overlaps else None, "n": len(overlaps)},
        "attribution": {"n": attr_n, "k": k,
                        "agent_accuracy": attr_agent / attr_n if attr_n else None,
                        "step_accuracy": attr_exact / attr_n if attr_n else None,
                        "step_accuracy_within_k": attr_within / attr_n if attr_n else None,
                        "from": "attribution answers" if attribution else "the judge's earliest cited label"},
        "disagreements": disagreements,
        "cost": {"tokens": int(tokens), "cost": round(cost, 6), "correct_labels": tp,
                 "tokens_per_correct_label": tokens / tp if tp else None,
                 "cost_per_correct_label": cost / tp if tp else None,
                 "correct_attributions": attr_exact,
                 "cost_per_correct_attribution": cost / attr_exact if attr_exact else None},
    }
