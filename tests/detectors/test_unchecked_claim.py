"""VF unchecked claim: a contradicting peer claim relied on without a tool call."""
from __future__ import annotations

from app.detectors.unchecked_claim import detect

from .runs import ev, make_run

STATE = {"account": {"balance_usd": 800, "due_date": "2026-03-12"}}


def claim(**data):
    return ev("seller_agent", "buyer_agent", "Per our books...", data={"act": "claim", **data})


def test_contradicting_claim_relied_on_without_check():
    run = make_run([claim(balance_usd=1200), ev("buyer_agent", "seller_agent", "OK, we will pay the $1,200.")],
                   buyer_state=STATE)
    [c] = detect(run)
    assert c.agent == "buyer_agent" and c.evidence == (0, 1) and "balance_usd" in c.reason


def test_contradicting_record_and_reliance_in_a_record_write():
    run = make_run([
        ev("buyer_agent", None, "w", kind="state_update", data={"record": {"delivery": "2026-03-12"}}),
        claim(delivery="2026-03-20"),
        ev("buyer_agent", None, "w", kind="state_update", data={"record": {"delivery": "March 20, 2026"}}),
    ])
    [c] = detect(run)
    assert c.evidence == (1, 2)


def test_near_misses():
    # it checked with a tool before relying on it
    run = make_run([claim(balance_usd=1200), ev("buyer_agent", None, "ledger()", kind="tool_call"),
                    ev("buyer_agent", "seller_agent", "OK, $1,200.")], buyer_state=STATE)
    assert detect(run) == []
    # the claim matches the state in another format
    run = make_run([claim(balance_usd="$800.00", due_date="March 12, 2026"),
                    ev("buyer_agent", "seller_agent", "OK, $800 by March 12.")], buyer_state=STATE)
    assert detect(run) == []
    # contradicted but not relied on (the recipient pushes back without repeating the value)
    run = make_run([claim(balance_usd=1200), ev("buyer_agent", "seller_agent", "That does not match our books.")],
                   buyer_state=STATE)
    assert detect(run) == []
    # free text is not a checkable fact
    run = make_run([claim(topic="brakes"), ev("buyer_agent", "seller_agent", "brakes noted")],
                   buyer_state={"topic": "mileage"})
    assert detect(run) == []
