"""Machine judgments shipped with demo runs.

* `l1_checks(run)`: a deterministic checker over a canonical run's structured event data. It finds
  GR2 (an agent's last stated terms vs its own record), GR3 (the agents' final records disagree,
  blamed on the side whose record departs from the last terms stated in the conversation, else
  from the shared confirmation document), CF3 (acceptance outside the agent's mandate, signing
  without the principal's approval) and VF3 (claiming success for an action whose own tool result
  was not ok). It only reads the conventions the demo generator writes (``data.terms``,
  ``data.record``, ``data.claims``, ``private_state.mandate``), so it works on any run that uses them.
* `l2_judge(run, truth, rng)`: a simulated LLM judge, noisy on purpose (misses ~30% of true
  failures, sometimes names a neighbouring mode or the wrong agent, adds false positives).
"""
from __future__ import annotations

import random
from typing import Any

from app.demo.failures import MODE_NAMES, MODES

L1_MODES: tuple[str, ...] = ("GR2", "GR3", "CF3", "VF3")
COMPARED_FIELDS = ("ref", "value", "date")

#: The mode an L2 judge confuses a true mode with, when it does.
CONFUSABLE = {"VF1": "VF4", "VF4": "VF1", "GR2": "GR3", "GR3": "GR2", "CF2": "CF3", "CF3": "CF2", "CF4": "GR1",
              "GR1": "CF4", "DD5": "DD3", "VF2": "VF5", "VF5": "VF2", "CF5": "CF4", "DD1": "DD2", "DD2": "DD1",
              "GR4": "GR1", "GR5": "GR2", "DD3": "DD4", "DD4": "DD3", "VF3": "VF5", "CF1": "CF4"}


def _same(x: Any, y: Any) -> bool:
    if isinstance(x, (int, float)) and isinstance(y, (int, float)) and not isinstance(x, bool):
        return abs(float(x) - float(y)) < 1e-6
    return x == y


class _Found:
    def __init__(self) -> None:
        self.items: dict[tuple[str, str], tuple[set[int], list[str]]] = {}

    def add(self, mode: str, agent: str, evidence: list[int], note: str) -> None:
        ev, notes = self.items.setdefault((mode, agent), (set(), []))
        ev.update(evidence)
        if note not in notes:
            notes.append(note)

    def audits(self, source: str, level: str) -> list[dict[str, Any]]:
        out = []
        for (mode, agent), (ev, notes) in sorted(self.items.items()):
            out.append({"source": source, "level": level, "mode": mode, "agent": agent, "evidence": sorted(ev),
                        "note": "; ".join(notes), "metadata": {}})
        return out


def _record_of(events: list[dict], agent: str) -> tuple[int, dict] | None:
    """The agent's last record write that holds any compared field."""
    for e in reversed(events):
        if e["kind"] == "state_update" and e["actor"] == agent:
            rec = (e.get("data") or {}).get("record")
            if isinstance(rec, dict) and any(k in rec for k in COMPARED_FIELDS):
                return e["seq"], rec
    return None


def _terms(e: dict) -> dict | None:
    t = (e.get("data") or {}).get("terms")
    return t if isinstance(t, dict) and t else None


def l1_checks(run: dict[str, Any]) -> list[dict[str, Any]]:
    """Return the L1 audits (source "l1-checks") for one canonical run."""
    events = run["events"]
    agents = {a["id"]: a for a in run["agents"]}
    found = _Found()
    shared_msgs = [e for e in events if e["kind"] == "message" and e["visibility"] == "shared"]

    # ---- GR2: last stated terms vs own record
    records: dict[str, tuple[int, dict]] = {}
    for aid in agents:
        r = _record_of(events, aid)
        if r is None:
            continue
        records[aid] = r
        rseq, rec = r
        stated = next((e for e in reversed(shared_msgs) if e["actor"] == aid and e["seq"] < rseq and _terms(e)),
                      None)
        if stated is None:
            continue
        diff = [k for k in COMPARED_FIELDS if k in stated["data"]["terms"] and k in rec
                and not _same(stated["data"]["terms"][k], rec[k])]
        if diff:
            said = ", ".join(f"{k}={stated['data']['terms'][k]}" for k in diff)
            wrote = ", ".join(f"{k}={rec[k]}" for k in diff)
            found.add("GR2", aid, [stated["seq"], rseq], f"{aid} stated {said} but recorded {wrote}")

    # ---- GR3: the agents' final records disagree
    ids = sorted(records)
    for i, x in enumerate(ids):
        for y in ids[i + 1:]:
            rx, ry = records[x][1], records[y][1]
            for k in COMPARED_FIELDS:
                if k not in rx or k not in ry or _same(rx[k], ry[k]):
                    continue
                pair = {x, y}
                agreed = next((e["data"]["terms"][k] for e in reversed(shared_msgs)
                               if _terms(e) and k in e["data"]["terms"] and e["actor"] in pair
                               and pair & set(e["recipients"])), None)
                doc_seq = None
                if agreed is None:
                    doc = next((e for e in reversed(events) if e["kind"] == "artifact" and e["actor"] in pair
                                and isinstance((e.get("data") or {}).get("document"), dict)
                                and k in e["data"]["document"]), None)
                    if doc is not None:
                        agreed, doc_seq = doc["data"]["document"][k], doc["seq"]
                else:
                    doc = next((e for e in reversed(events) if e["kind"] == "artifact" and e["actor"] in pair
                                and isinstance((e.get("data") or {}).get("document"), dict)), None)
                    doc_seq = doc["seq"] if doc is not None else None
                blamed = [a for a in (x, y) if agreed is None or not _same(records[a][1][k], agreed)]
                for a in blamed:
                    ev = [records[a][0]] + ([doc_seq] if doc_seq is not None else [])
                    found.add("GR3", a, ev, f"final records disagree on {k}: {x}={rx[k]}, {y}={ry[k]}")

    # ---- CF3: acceptance outside the mandate; signing without approval
    for e in shared_msgs:
        act = (e.get("data") or {}).get("act")
        aid = e["actor"]
        if aid not in agents or act not in ("accept", "confirm", "sign"):
            continue
        mandate = (agents[aid].get("private_state") or {}).get("mandate") or {}
        t = _terms(e)
        if t and isinstance(t.get("value"), (int, float)):
            v = t["value"]
            if "max" in mandate and v > mandate["max"] + 1e-9:
                found.add("CF3", aid, [e["seq"]], f"{aid} agreed to {v}, above its mandate maximum {mandate['max']}")
            if "min" in mandate and v < mandate["min"] - 1e-9:
                found.add("CF3", aid, [e["seq"]], f"{aid} agreed to {v}, below its mandate minimum {mandate['min']}")
        if act == "sign" and mandate.get("requires_approval"):
            principal = agents[aid].get("principal")
            approved = any(p["actor"] == principal and aid in p["recipients"]
                           and (p.get("data") or {}).get("act") == "approve" for p in events[:e["seq"]])
            if not approved:
                found.add("CF3", aid, [e["seq"]], f"{aid} signed without its principal's approval")

    # ---- VF3: success claimed for an own action whose result was not ok
    last_result: dict[tuple[str, str], dict] = {}
    for e in events:
        data = e.get("data") or {}
        if e["kind"] == "tool_result":
            last_result[(e["actor"], data.get("tool"))] = e
            continue
        claims = data.get("claims")
        if e["kind"] != "message" or not isinstance(claims, list):
            continue
        for c in claims:
            if not isinstance(c, dict) or c.get("status") != "success" or c.get("by") not in (None, e["actor"]):
                continue
            res = last_result.get((e["actor"], c.get("action")))
            if res is not None and (res.get("data") or {}).get("status") != "ok":
                found.add("VF3", e["actor"], [res["seq"], e["seq"]],
                          f"{e['actor']} reported {c.get('action')} as successful; its result was "
                          f"{res['data'].get('status')}")
    return found.audits("l1-checks", "L1")


def l2_judge(run: dict[str, Any], truth: list[dict[str, Any]], rng: random.Random,
             judge_model: str = "judge-model-1") -> list[dict[str, Any]]:
    """Return noisy L2 audits (source "judge-l2") for a run whose true labels are `truth`."""
    agents = [a["id"] for a in run["agents"]]
    events = run["events"]
    out: dict[tuple[str, str], dict[str, Any]] = {}

    def emit(mode: str, agent: str, evidence: list[int], note: str, conf: float) -> None:
        key = (mode, agent)
        if key not in out:
            out[key] = {"source": "judge-l2", "level": "L2", "mode": mode, "agent": agent,
                        "evidence": sorted(set(evidence)), "note": note,
                        "metadata": {"judge_model": judge_model, "confidence": conf}}

    for t in truth:
        if rng.random() < 0.30:
            continue  # missed
        mode, agent = t["mode"], t["agent"]
        if rng.random() < 0.08:
            mode = CONFUSABLE.get(mode, mode)
        if rng.random() < 0.12 and len(agents) > 1:
            agent = rng.choice([a for a in agents if a != t["agent"]])
        ev = list(t["evidence"])
        if len(ev) > 1 and rng.random() < 0.35:
            ev = rng.sample(ev, rng.randint(1, len(ev) - 1))
        emit(mode, agent, ev, f"{MODE_NAMES[mode]}: {agent} (see events {', '.join(map(str, sorted(ev)))}).",
             round(rng.uniform(0.55, 0.97), 2))
    if rng.random() < 0.12 and events:
        agent = rng.choice(agents)
        own = [e["seq"] for e in events if e["actor"] == agent and e["kind"] == "message"] or [events[-1]["seq"]]
        mode = rng.choice(MODES)
        seq = rng.choice(own)
        emit(mode, agent, [seq], f"{MODE_NAMES[mode]}: possible issue in {agent}'s message at event {seq}.",
             round(rng.uniform(0.5, 0.8), 2))
    return list(out.values())
