"""Deterministic generator of rich canonical runs for the ingest tests.

Runs have 2-4 agents (one with an id that is not file-name safe), 2-3 principals, private and
shared events of every kind, unicode text, nested data of every JSON type, parent/hop links,
audits, unknown fields in metadata, and awkward cases on purpose: shared messages from a
principal, with no or two recipients, with null / list / string data, empty content, equal or
missing timestamps.
"""
from __future__ import annotations

import random
from typing import Any

from app.ingest.canonical import EVENT_KINDS, normalize_run

TEXTS = [
    "Hi, is the hatchback still available?",
    "Ja, noch verfügbar — für 19.900 €.",
    "价格可以再低一点吗？",
    "مرحبا، هل السعر قابل للتفاوض؟",
    "Line one\nline two\n\ttabbed \"quoted\" \\ backslash",
    "emoji 🚗💸 and combining e\u0301",
    "",
    "  leading and trailing spaces  ",
]
FAMILIES = ["commerce", "legal", "crm", "security", "contracting"]


def _data(rng: random.Random, i: int) -> Any:
    choices = [
        {},
        {"args": {"query": "price", "limit": 5, "filters": [{"k": "año", "v": 2019}, None, True]}},
        {"result": {"ok": True, "values": [1, 2.5, -3, 1e-7, 12345678901234567], "nested": {"deep": {"x": []}}}},
        None,
        [1, "two", {"three": 3}],
        "a plain string payload ✓",
        42,
        {"parts": [{"mediaType": "application/json"}]},
    ]
    return choices[i % len(choices)] if i < len(choices) else rng.choice(choices)


def make_run(rng: random.Random, index: int) -> dict[str, Any]:
    """One raw (not yet normalized) rich run."""
    family = FAMILIES[index % len(FAMILIES)]
    n_principals = rng.randint(2, 3)
    principals = []
    for p in range(n_principals):
        principals.append({
            "id": f"p{p}" if p else "buyer",
            "name": ["Dana (buyer)", "Ömer Şahin", "株式会社テスト"][p],
            "kind": ["person", "organization"][p % 2],
            "objective": f"Objective {p}: get the best deal ≤ ${18500 + p}",
            "constraints": ["Do not reveal the budget", "Get approval before signing"][: p + 1],
            "outcome": {"success": [True, False, None][p % 3], "score": [0.2, 1, None][p % 3],
                        "metrics": {"surplus_usd": -640.5 + p, "violations": ["signed_without_approval"] * p}},
            "metadata": {"extra_field": {"nested": [p, "x"]}},
        })
    n_agents = rng.randint(2, 4)
    agents = []
    for a in range(n_agents):
        agent_id = "agent/ü 3" if a == 3 else f"agent_{a}"
        agents.append({
            "id": agent_id,
            "principal": principals[a % n_principals]["id"] if a != 2 else None,
            "role": ["buyer", "seller", "broker", "auditor"][a],
            "model": f"model-{chr(97 + a)}",
            "harness": None if a == 1 else "harness-x",
            "private_state": {"budget_usd": 18500 + a, "notes": ["ünïcode", {"k": None}]},
            "metadata": {"temperature": 0.7, "unknown": True},
        })
    ids = [a["id"] for a in agents]
    n_events = rng.randint(14, 30)
    events = []
    minute = 0
    for i in range(n_events):
        kind = EVENT_KINDS[i % len(EVENT_KINDS)] if i >= 4 else "message"
        actor = rng.choice(ids)
        others = [x for x in ids if x != actor]
        shared = kind == "message" and i % 5 != 4 or (kind in ("tool_call", "delegation") and i % 3 == 0)
        if shared:
            recipients = [rng.choice(others)]
            if i % 11 == 7:
                recipients = others[:2]
            if i % 13 == 9:
                recipients = []
        else:
            recipients = []
        if i % 9 == 5 and kind == "message":
            actor = principals[0]["id"]  # a principal speaks on the wire
        if i % 17 == 16:
            actor = "system"
        if i % 7 != 3:
            minute += rng.choice([0, 1, 1, 2])
        ts = None if i % 10 == 8 else f"2026-05-01T10:{minute:02d}:{i % 60:02d}Z"
        events.append({
            "seq": i,
            "ts": ts,
            "kind": kind,
            "actor": actor,
            "recipients": recipients,
            "visibility": "shared" if shared else "private",
            "content": None if i % 6 == 5 else TEXTS[(i + index) % len(TEXTS)],
            "data": _data(rng, i),
            "parent_seq": rng.randrange(i) if i > 0 and i % 4 == 1 else None,
            "hop": (i // 2) if shared and i % 3 else None,
            "metadata": {"tokens": i * 10, "trace": {"span": f"s{i}"}} if i % 2 else {},
        })
    # make sure some replies follow their request (paired on the wire)
    for i in range(1, len(events)):
        prev, cur = events[i - 1], events[i]
        if (prev["kind"] == cur["kind"] == "message" and prev["visibility"] == cur["visibility"] == "shared"
                and len(prev["recipients"]) == 1 and i % 2 == 1):
            cur["actor"] = prev["recipients"][0]
            cur["recipients"] = [prev["actor"]]
    audits = []
    for k in range(rng.randint(0, 3)):
        audits.append({
            "source": ["judge-l2", "checker-l0", "checker-l1"][k],
            "level": ["L2", "L0", "L1"][k],
            "mode": ["VF1", "DD2", "CF5"][k],
            "agent": ids[k % len(ids)] if k != 1 else None,
            "evidence": sorted({rng.randrange(n_events) for _ in range(k + 1)}),
            "note": "judge says: ✔ violated" if k != 2 else None,
            "metadata": {"confidence": 0.9 - k / 10},
        })
    return {
        "run_id": f"{family}-car-{index:03d}-r{index % 4}" if index % 5 != 3 else f"run ü/{index} ✓",
        "scenario": {
            "id": f"{family}/task-{index % 3}/{index:03d}" if index % 4 else f"odd id ü {index}",
            "family": family,
            "alignment": ["cooperative", "mixed", "competitive", None][index % 4],
            "title": None if index % 6 == 1 else f"Scenario {index} — Used car purchase",
            "description": None if index % 3 == 2 else f"# Heading {index}\n\nFree text ✓ for annotators.\n",
            "metadata": {"difficulty": "hard", "tags": ["a", "b"]},
        },
        "status": ["completed", "failed", "timeout", "error"][index % 4],
        "aggregate_score": [1.0, 0.25, None, 0][index % 4],
        "started_at": "2026-05-01T10:00:00Z",
        "ended_at": None if index % 5 == 4 else "2026-05-01T11:03:12Z",
        "principals": principals,
        "agents": agents,
        "events": events,
        "audits": audits,
        "metadata": {"benchmark": "A2-Failures", "seed": index, "weird key ✓": {"nested": [None, 1.5]}},
        "unknown_top_level": {"kept": True},
    }


def make_runs(n: int = 6, seed: int = 7) -> list[dict[str, Any]]:
    """`n` normalized rich runs (deterministic for a seed)."""
    rng = random.Random(seed)
    return [normalize_run(make_run(rng, i)) for i in range(n)]


def small_run(i: int) -> dict[str, Any]:
    """A minimal valid raw run (for volume tests)."""
    return {"run_id": f"r{i}", "scenario": {"id": "s", "family": "f"},
            "agents": [{"id": "a"}, {"id": "b"}],
            "events": [{"kind": "message", "actor": "a", "recipients": ["b"], "content": f"hi {i}"}]}
