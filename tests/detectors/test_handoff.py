"""DD dropped hand-off: requests and questions without a reply; promises never kept."""
from __future__ import annotations

from app.detectors.handoff import detect

from .runs import ev, make_run


def test_unanswered_question_blames_the_asked_agent():
    run = make_run([ev("buyer_agent", "seller_agent", "Has the car been in any accidents?")])
    [c] = detect(run)
    assert c.agent == "seller_agent" and c.evidence == (0,) and c.principals == ("buyer",)


def test_linked_run_needs_a_linked_reply():
    run = make_run([
        ev("seller_agent", "buyer_agent", "Price is $21,000."),
        ev("buyer_agent", "seller_agent", "Any accidents?", parent=0),
        ev("buyer_agent", "seller_agent", "Would $18,000 work?", parent=0),
        ev("seller_agent", "buyer_agent", "I can do $20,000.", parent=2),
    ])
    [c] = detect(run)
    assert c.evidence == (1,)  # the later counter-offer got an answer, the question did not


def test_answered_requests_and_delegations_are_fine():
    run = make_run([
        ev("buyer_agent", "seller_agent", "Could you check stock?", data={"act": "request"}),
        ev("seller_agent", "buyer_agent", "In stock.", parent=0),
    ])
    assert detect(run) == []
    # no links anywhere: any later message back counts as the reply
    run = make_run([ev("buyer_agent", "seller_agent", "Any accidents?"), ev("seller_agent", "buyer_agent", "None.")])
    assert detect(run) == []
    run = make_run([ev("buyer_agent", "seller_agent", "Please arrange the inspection.", kind="delegation")])
    assert [c.agent for c in detect(run)] == ["seller_agent"]
    # a question to the agent's own principal is not a hand-off to a peer
    assert detect(make_run([ev("buyer_agent", "buyer", "OK to sign?")])) == []


def test_promised_follow_up_that_never_came():
    run = make_run([
        ev("buyer_agent", "seller_agent", "Deal?"),
        ev("seller_agent", "buyer_agent", "Deal. I'll send over the service history later today.", parent=0),
        ev("buyer_agent", "seller_agent", "Thanks.", parent=1),
    ])
    [c] = detect(run)
    assert c.agent == "seller_agent" and c.evidence == (1,) and "promised" in c.reason
    run["events"].append({**run["events"][2], "seq": 3, "actor": "seller_agent", "recipients": ["buyer_agent"],
                          "kind": "artifact", "content": "Service history", "parent_seq": 1})
    assert detect(run) == []
