"""GR divergence: final records disagree; formatting-only differences and perspective fields do not."""
from __future__ import annotations

from app.detectors.divergence import detect, final_records

from .runs import ev, make_run


def rec(agent, **record):
    return ev(agent, None, "record", kind="state_update", data={"record_type": "order", "op": "create", "record": record})


def test_disagreeing_price_blames_the_side_that_departs_from_the_agreed_terms():
    run = make_run([
        ev("buyer_agent", "seller_agent", "Deal at $18,200.", data={"act": "accept", "terms": {"value": 18200}}),
        rec("buyer_agent", value=18200, date="2026-03-12"),
        rec("seller_agent", value=18900, date="2026-03-12"),
    ])
    [c] = detect(run)
    assert c.agent == "seller_agent" and set(c.evidence) == {1, 2} and "value" in c.reason
    assert set(c.principals) == {"buyer", "seller"}


def test_dates_compared_as_dates_and_blame_both_without_agreed_value():
    run = make_run([rec("buyer_agent", delivery="2026-03-12"), rec("seller_agent", delivery="March 19, 2026")])
    assert {c.agent for c in detect(run)} == {"buyer_agent", "seller_agent"}


def test_records_differing_only_in_formatting_agree():
    run = make_run([
        rec("buyer_agent", price="$18,500.00", delivery="2026-03-12", item="2019 Hatchback", counterparty="Lakeside Motors"),
        rec("seller_agent", price=18500, delivery="Thu, March 12, 2026", item="2019  hatchback", counterparty="Dana Reyes"),
    ])
    assert detect(run) == []


def test_artifact_counts_as_a_record_and_later_writes_replace_earlier_ones():
    run = make_run([
        rec("buyer_agent", value=18000),
        rec("buyer_agent", value=18500),
        ev("seller_agent", "buyer_agent", "Confirmation", kind="artifact", data={"document": {"value": "$18,500"}}),
    ])
    recs = final_records(run)
    assert recs["buyer_agent"]["value"] == (18500, 1) and recs["seller_agent"]["value"] == ("$18,500", 2)
    assert detect(run) == []


def test_keys_only_one_side_holds_are_not_compared():
    run = make_run([rec("buyer_agent", value=1, notes="x"), rec("seller_agent", value=1, stock=3)])
    assert detect(run) == []
