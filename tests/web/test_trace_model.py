"""Unit tests of app.web.trace on hand-made canonical runs (expected values worked out by hand)."""
from __future__ import annotations

import pytest

from app.web.trace import (
    TraceInputError,
    build_reach,
    build_trace,
    format_offset,
    place_event,
    placement_of,
    should_fold,
    summarize,
)


def ev(seq, kind, actor, recipients=(), visibility=None, content=None, data=None, ts=None, parent=None):
    vis = visibility or ("shared" if recipients else "private")
    return {"seq": seq, "ts": ts, "kind": kind, "actor": actor, "recipients": list(recipients), "visibility": vis,
            "content": content, "data": data if data is not None else {}, "parent_seq": parent, "hop": None,
            "metadata": {}}


def canonical_run() -> dict:
    """Three principals, each with one agent; events exercising every placement rule."""
    events = [
        ev(0, "log", "system", content="run started", ts="2026-05-01T10:00:05Z"),
        ev(1, "discovery", "buyer_agent", content="looked up peers",
           data={"agents": [{"name": "seller_agent", "skills": ["sell"]}, {"name": "bank_agent"}]}),
        ev(2, "message", "buyer", ["buyer_agent"], "private", "Buy the hatchback, max 18,500"),
        ev(3, "message", "buyer_agent", ["seller_agent"], content="Is it available?",
           ts="2026-05-01T10:01:05Z"),
        ev(4, "tool_call", "seller_agent", content="inventory(sku=HB19)", data={"tool": "inventory"}),
        ev(5, "tool_result", "seller_agent", content="in stock: 1", data={"result": {"stock": 1}}, parent=4),
        ev(6, "message", "seller_agent", ["buyer_agent"], content="Yes, 19,900", parent=3),
        ev(7, "message", "bank_agent", ["buyer_agent"], content="Loan pre-approved"),
        ev(8, "state_update", "buyer_agent", content="offer noted", data={"record": {"price": 19900}}),
        ev(9, "message", "buyer_agent", ["buyer"], "private", "Deal at 19,900"),
        ev(10, "message", "buyer_agent", ["seller_agent", "bank_agent"], content="Closing now"),
        ev(11, "message", "seller_agent", ["buyer_agent", "bank_agent"], content="Signed"),
        ev(12, "discovery", "system", ["seller_agent"], data={"registry": ["buyer_agent"]}),
    ]
    return {
        "run_id": "r1",
        "scenario": {"id": "commerce/car/1", "family": "commerce", "alignment": "competitive",
                     "title": "Used car", "description": "Buy a car", "metadata": {}},
        "status": "completed", "aggregate_score": 0.9,
        "started_at": "2026-05-01T10:00:00Z", "ended_at": None,
        "principals": [
            {"id": "buyer", "name": "Dana (buyer)", "kind": "person", "objective": "Buy for <= 18,500",
             "constraints": ["Do not reveal the budget"],
             "outcome": {"success": False, "score": 0.2, "metrics": {"surplus": -640}}, "metadata": {}},
            {"id": "seller", "name": "Sam", "kind": "organization", "objective": "Sell",
             "constraints": [], "outcome": {"success": True, "score": 1.0, "metrics": {}}, "metadata": {}},
            {"id": "bank", "name": None, "kind": "organization", "objective": None, "constraints": [],
             "outcome": {"success": None, "score": None, "metrics": {}}, "metadata": {}},
        ],
        "agents": [
            {"id": "buyer_agent", "principal": "buyer", "role": "buyer", "model": "model-a", "harness": "h-x",
             "private_state": {"budget_usd": 18500}, "metadata": {}},
            {"id": "seller_agent", "principal": "seller", "role": "seller", "model": "model-b", "harness": "h-y",
             "private_state": {}, "metadata": {}},
            {"id": "bank_agent", "principal": "bank", "role": "lender", "model": None, "harness": None,
             "private_state": {}, "metadata": {"agent_card": {"name": "bank_agent", "peers": ["seller_agent"]}}},
        ],
        "events": events,
        "audits": [{"source": "judge-l2", "level": "L2", "mode": "CF3", "agent": "buyer_agent", "evidence": [10],
                    "note": "over budget", "metadata": {}}],
        "metadata": {"demo_truth": [{"mode": "CF3", "agent": "buyer_agent", "evidence": [10]}], "batch": "b1"},
    }


def test_lanes_one_per_agent_colored_by_principal():
    t = build_trace(canonical_run())
    assert [(lane["index"], lane["agent"], lane["principal"], lane["color"]) for lane in t["lanes"]] == [
        (0, "buyer_agent", "buyer", 0), (1, "seller_agent", "seller", 1), (2, "bank_agent", "bank", 2)]
    assert t["n_lanes"] == 3
    assert t["lanes"][0]["principal_name"] == "Dana (buyer)"
    assert t["lanes"][2]["principal_name"] == "bank"  # no name: the id


def test_placement_of_every_event():
    t = build_trace(canonical_run())
    got = {e["seq"]: (e["placement"], e["lane"], e["col_start"], e["col_end"]) for e in t["events"]}
    assert got == {
        0: ("system", None, 1, 3),
        1: ("private", 0, 1, 1),        # a discovery inside buyer_agent's environment
        2: ("principal", 0, 1, 1),      # principal -> its agent: in the agent's lane
        3: ("shared", 0, 1, 2),
        4: ("private", 1, 2, 2),
        5: ("private", 1, 2, 2),
        6: ("shared", 1, 1, 2),
        7: ("shared", 2, 1, 3),
        8: ("private", 0, 1, 1),
        9: ("principal", 0, 1, 1),      # agent -> its principal
        10: ("shared", 0, 1, 3),
        11: ("shared", 1, 1, 3),
        12: ("system", None, 1, 3),
    }
    assert t["counts"] == {"total": 13, "shared": 5, "private": 4, "principal": 2, "system": 2}


def test_shared_arrows_direction_and_ends():
    t = {e["seq"]: e for e in build_trace(canonical_run())["events"]}
    assert t[3]["direction"] == "right"
    assert t[3]["cells"] == [{"lane": 0, "role": "from"}, {"lane": 1, "role": "to"}]
    assert t[6]["direction"] == "left"
    assert t[6]["cells"] == [{"lane": 0, "role": "to"}, {"lane": 1, "role": "from"}]
    # bank (lane 2) -> buyer (lane 0): the lane in between is only passed over
    assert t[7]["direction"] == "left"
    assert [c["role"] for c in t[7]["cells"]] == ["to", "pass", "from"]
    assert t[10]["direction"] == "right" and [c["role"] for c in t[10]["cells"]] == ["from", "to", "to"]
    assert t[11]["direction"] == "both" and [c["role"] for c in t[11]["cells"]] == ["to", "from", "to"]
    # private and principal rows carry no arrow
    assert t[4]["cells"] == [] and t[4]["direction"] is None
    assert t[2]["principal_dir"] == "from_principal" and t[2]["principal"] == "buyer"
    assert t[9]["principal_dir"] == "to_principal" and t[9]["principal"] == "buyer"


def test_reachable_matrix_from_discovery_and_cards_vs_contacts():
    r = build_trace(canonical_run())["reach"]
    assert r["agents"] == ["buyer_agent", "seller_agent", "bank_agent"]
    states = {(row["agent"], c["to"]): (c["state"], c["contacted"]) for row in r["rows"] for c in row["cells"]}
    assert states == {
        ("buyer_agent", "buyer_agent"): ("self", 0),
        ("buyer_agent", "seller_agent"): ("both", 2),      # discovery #1; events 3 and 10
        ("buyer_agent", "bank_agent"): ("both", 1),        # discovery #1; event 10
        ("seller_agent", "buyer_agent"): ("both", 2),      # registry #12 to seller, reply to #3; 6 and 11
        ("seller_agent", "seller_agent"): ("self", 0),
        ("seller_agent", "bank_agent"): ("contacted", 1),  # event 11, never discovered, bank spoke later
        ("bank_agent", "buyer_agent"): ("contacted", 1),   # event 7, before buyer ever wrote to bank
        ("bank_agent", "seller_agent"): ("reachable", 0),  # bank's agent card; seller wrote at #11
        ("bank_agent", "bank_agent"): ("self", 0),
    }
    assert r["unused"] == [{"from": "bank_agent", "to": "seller_agent"}]
    assert r["discovery_seqs"] == [1, 12]
    assert r["known"] is True
    cell = next(c for row in r["rows"] if row["agent"] == "seller_agent" for c in row["cells"] if c["to"] == "buyer_agent")
    assert cell["sources"] == ["discovery #12", "reply to #3"]
    bank_seller = next(c for row in r["rows"] if row["agent"] == "bank_agent" for c in row["cells"]
                       if c["to"] == "seller_agent")
    assert bank_seller["sources"] == ["agent card", "reply to #11"]


def test_reach_unknown_without_discovery_or_cards():
    agents = [{"id": "a", "metadata": {}}, {"id": "b", "metadata": {}}]
    r = build_reach(agents, [ev(0, "message", "a", ["b"]), ev(1, "message", "b", ["a"], "private")])
    assert r["known"] is False
    cells = {(row["agent"], c["to"]): c["state"] for row in r["rows"] for c in row["cells"]}
    # a private event addressed to a peer is not a contact across the boundary; b could have
    # answered a's message but never did
    assert cells == {("a", "a"): "self", ("a", "b"): "contacted", ("b", "a"): "reachable", ("b", "b"): "self"}
    assert r["unused"] == [{"from": "b", "to": "a"}]


def test_reply_channel_counts_as_reachable():
    agents = [{"id": "a"}, {"id": "b"}]
    r = build_reach(agents, [ev(0, "message", "a", ["b"]), ev(1, "message", "b", ["a"])])
    cells = {(row["agent"], c["to"]): (c["state"], c["sources"]) for row in r["rows"] for c in row["cells"]}
    assert cells[("b", "a")] == ("both", ["reply to #0"])
    assert cells[("a", "b")] == ("contacted", [])


def test_public_registry_discovery_reaches_everybody():
    agents = [{"id": "a"}, {"id": "b"}, {"id": "c"}]
    r = build_reach(agents, [ev(0, "discovery", "system", data={"cards": [{"name": "c"}]})])
    reach = {(row["agent"], c["to"]) for row in r["rows"] for c in row["cells"] if c["reachable"]}
    assert reach == {("a", "c"), ("b", "c")}


def test_private_state_and_records_per_agent():
    t = build_trace(canonical_run())
    agents = {a["id"]: a for a in t["agents"]}
    assert agents["buyer_agent"]["private_state"] == {"budget_usd": 18500}
    assert '"budget_usd": 18500' in agents["buyer_agent"]["private_state_json"]
    assert agents["seller_agent"]["private_state_json"] is None
    assert [r["seq"] for r in agents["seller_agent"]["records"]] == [4, 5]
    assert [r["seq"] for r in agents["buyer_agent"]["records"]] == [8]  # the discovery is not a record
    assert agents["buyer_agent"]["n_private"] == 2
    assert agents["buyer_agent"]["principal_name"] == "Dana (buyer)"


def test_principal_names_shown_for_principal_exchanges():
    t = {e["seq"]: e for e in build_trace(canonical_run())["events"]}
    assert t[2]["actor_name"] == "Dana (buyer)" and t[2]["recipient_names"] == ["buyer_agent"]
    assert t[9]["actor_name"] == "buyer_agent" and t[9]["recipient_names"] == ["Dana (buyer)"]
    assert t[0]["actor_name"] == "system"


def test_principals_outcomes_and_blind_spot():
    t = build_trace(canonical_run())
    cards = {p["id"]: p for p in t["principals"]}
    assert (cards["buyer"]["failed"], cards["seller"]["failed"], cards["bank"]["failed"]) == (True, False, None)
    assert cards["buyer"]["agents"] == ["buyer_agent"]
    assert t["aggregate_success"] is True
    assert len(t["blind_spots"]) == 1 and "Dana (buyer)" in t["blind_spots"][0] and "0.20" in t["blind_spots"][0]
    low = canonical_run()
    low["aggregate_score"] = 0.3
    assert build_trace(low)["blind_spots"] == []
    # no `success` flag: the score against the threshold decides
    run = canonical_run()
    run["principals"][1]["outcome"] = {"success": None, "score": 0.4, "metrics": {}}
    assert {p["id"]: p["failed"] for p in build_trace(run, success_threshold=0.5)["principals"]}["seller"] is True
    assert {p["id"]: p["failed"] for p in build_trace(run, success_threshold=0.3)["principals"]}["seller"] is False


def test_demo_truth_hidden_unless_asked():
    hidden = build_trace(canonical_run())
    assert hidden["demo_truth"] is None
    assert "demo_truth" not in (hidden["metadata_json"] or "") and '"batch": "b1"' in hidden["metadata_json"]
    shown = build_trace(canonical_run(), show_demo_truth=True)
    assert shown["demo_truth"] == [{"mode": "CF3", "agent": "buyer_agent", "evidence": [10]}]
    run = canonical_run()
    run["events"][3]["metadata"] = {"demo_truth": "x", "k": 1}
    e3 = build_trace(run)["events"][3]
    assert "demo_truth" not in e3["metadata_json"] and '"k": 1' in e3["metadata_json"]


def test_anchors_times_and_folding():
    run = canonical_run()
    run["events"][6]["content"] = "\n".join(f"line {i}" for i in range(30))
    t = {e["seq"]: e for e in build_trace(run, fold_lines=14)["events"]}
    assert t[6]["anchor"] == "e-6"
    assert t[6]["content_folded"] is True and t[6]["content_lines"] == 30
    assert t[3]["content_folded"] is False
    assert t[0]["t_rel"] == "+0:05" and t[3]["t_rel"] == "+1:05" and t[4]["t_rel"] is None
    assert t[5]["parent_seq"] == 4
    assert t[5]["data_json"].startswith("{\n  \"result\"") and t[5]["data_open"] is True
    assert t[3]["data_json"] is None


def test_events_sorted_by_seq_and_empty_run():
    run = canonical_run()
    run["events"] = list(reversed(run["events"]))
    assert [e["seq"] for e in build_trace(run)["events"]] == list(range(13))
    empty = {"run_id": "x", "scenario": {"id": "s", "family": "f"}}
    t = build_trace(empty)
    assert t["events"] == [] and t["lanes"] == [] and t["reach"]["rows"] == []


def test_bad_input_names_the_field():
    with pytest.raises(TraceInputError, match="run.run_id"):
        build_trace({"scenario": {}})
    run = canonical_run()
    del run["events"][2]["actor"]
    with pytest.raises(TraceInputError, match=r"events\[2\]\.actor"):
        build_trace(run)
    run = canonical_run()
    del run["agents"][1]["id"]
    with pytest.raises(TraceInputError, match=r"agents\[1\]\.id"):
        build_trace(run)


def test_place_event_principal_without_agents_is_full_width_but_marked():
    p = place_event({"actor": "boss", "recipients": [], "visibility": "private"}, {"a": 0, "b": 1},
                    {"boss": []}, 2)
    assert (p["placement"], p["lane"], p["col_start"], p["col_end"], p["principal"]) == ("principal", None, 1, 2, "boss")


def test_small_helpers():
    assert format_offset(3725) == "+1:02:05" and format_offset(59.6) == "+1:00" and format_offset(None) is None
    assert should_fold("a" * 10, 9, 5) and not should_fold("a\nb", 10, 2) and should_fold("a\nb\nc", 10, 2)
    assert summarize({"a": 1, "b": 2}) == "{a, b}" and summarize([1, 2, 3]) == "[3 items]"
    assert summarize("x  y\nz") == "x y z"


_LANES = {"a1": 0, "a2": 1, "a3": 2}
_PRINCIPALS = {"p1": ["a1", "a2"], "p2": [], "a3": ["a1"]}  # p2 has no agent; a3 is agent and principal id


@pytest.mark.parametrize("actor, recipients, visibility, expected", [
    ("a1", ["a2"], None, ("shared", None)),               # shared is the default visibility
    ("a1", ["a2", "p1"], "shared", ("shared", None)),     # an agent among the recipients wins
    ("a1", ["a2"], "private", ("private", None)),         # private to an agent: the actor's own lane
    ("a1", ["p1"], "private", ("principal", "to_principal")),
    ("a1", ["a1", "p2"], None, ("principal", "to_principal")),  # itself is no agent recipient
    ("a1", ["a1"], None, ("private", None)),
    ("a1", [], None, ("private", None)),
    ("a1", ["stranger"], None, ("private", None)),        # an undeclared recipient
    ("a3", ["p1"], None, ("principal", "to_principal")),  # an agent's lane first, its principal id after
    ("p1", [], None, ("principal", "from_principal")),
    ("p2", ["a2"], "private", ("principal", "from_principal")),
    ("system", ["a1"], None, ("system", None)),
    ("stranger", ["a1"], None, ("system", None)),
])
def test_placement_of_by_hand(actor, recipients, visibility, expected):
    """`placement_of` on hand-worked cases of every rule, and `place_event` (which uses it) gives
    the same placement with its geometry."""
    event = {"seq": 1, "actor": actor, "recipients": recipients}
    if visibility is not None:
        event["visibility"] = visibility
    assert placement_of(event, _LANES, _PRINCIPALS) == expected
    placed = place_event(event, _LANES, _PRINCIPALS, 3)
    assert (placed["placement"], placed["principal_dir"]) == expected
    if expected == ("principal", "to_principal"):
        assert placed["principal"] in recipients and placed["lane"] == _LANES[actor]
