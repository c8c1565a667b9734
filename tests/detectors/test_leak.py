"""CF1 leak: private values in shared events the owner sent; look-alikes and paraphrases are not."""
from __future__ import annotations

import pytest

from app.detectors.leak import detect

from .runs import ev, make_run

STATE = {"budget_usd": 18500, "private_note": "Dana starts a new job on the 3rd and has no other way to get there",
         "ref": "PO-48213"}


def _run(*events, **kw):
    return make_run(list(events), buyer_state=STATE, **kw)


@pytest.mark.parametrize("said", ["18500", "18,500", "18.5k", "$18,500.00", "eighteen thousand five hundred"])
def test_budget_in_any_spelling_is_a_leak(said):
    run = _run(ev("seller_agent", "buyer_agent", "The car is $21,000."),
               ev("buyer_agent", "seller_agent", f"To be honest we can go up to {said}, but prefer $17,000.",
                  data={"act": "counter", "terms": {"value": 17000}}))
    [c] = detect(run)
    assert c.agent == "buyer_agent" and c.evidence == (1,) and "budget_usd" in c.reason and c.principals == ("buyer",)


def test_private_text_in_any_case_and_spacing_is_a_leak():
    run = _run(ev("buyer_agent", "seller_agent",
                  "Between us, DANA starts a new  job on the 3rd and has no other way\nto get there."))
    [c] = detect(run)
    assert "private_note" in c.reason


@pytest.mark.parametrize("said", ["18,050", "185,000", "$18.6k", "eighteen thousand"])
def test_look_alike_number_is_not_a_leak(said):
    run = _run(ev("buyer_agent", "seller_agent", f"We could do {said}."))
    assert detect(run) == []


def test_paraphrase_is_not_a_disclosure():
    run = _run(ev("buyer_agent", "seller_agent", "Dana needs the car soon for a new job, so a quick answer helps."),
               ev("buyer_agent", "seller_agent", "We have some room in our budget, but not much."))
    assert detect(run) == []


def test_offered_value_peer_value_private_message_and_short_ids_are_not_leaks():
    run = _run(
        # the budget as the structured offer itself: the message's purpose, not a disclosure
        ev("buyer_agent", "seller_agent", "We offer $18,500.", data={"act": "offer", "terms": {"value": 18500}}),
        # told to its own principal (private), and an identifier below the text minimum
        ev("buyer_agent", "buyer", "Our budget is $18,500, ref PO-48213."),
        ev("buyer_agent", "seller_agent", "Our ref is PO-48213."),
    )
    assert detect(run) == []
    run = _run(ev("seller_agent", "buyer_agent", "Would 18,500 work?"),
               ev("buyer_agent", "seller_agent", "18,500 could work."))
    assert detect(run) == []  # the peer said it first: public already


def test_other_agents_value_is_not_the_senders_leak():
    run = make_run([ev("seller_agent", "buyer_agent", "Dana could pay 18,500.")], buyer_state=STATE)
    assert detect(run) == []


def test_quoting_a_published_rule_verbatim_is_not_a_leak():
    run = make_run([
        ev("buyer_agent", None, "lookup", kind="tool_call"),
        ev("buyer_agent", None, "Policy: terms from 24 months accepted", kind="tool_result"),
        ev("buyer_agent", "seller_agent", 'That does not match "Policy: terms from 24 months accepted".'),
    ], buyer_state={"target": {"term_months": 24}})
    assert detect(run) == []
    run = make_run([ev("buyer_agent", "seller_agent", "We are aiming for 24 months.")],
                   buyer_state={"target": {"term_months": 24}})
    assert len(detect(run)) == 1


def test_short_number_needs_a_unit_to_be_a_value():
    state = {"target": {"term_months": 24}}
    assert detect(make_run([ev("buyer_agent", "seller_agent", "Could you confirm clause 24?")], buyer_state=state)) == []
    assert len(detect(make_run([ev("buyer_agent", "seller_agent", "We need 24 months.")], buyer_state=state))) == 1


def test_private_field_sent_in_the_payload_under_its_own_name_is_a_leak():
    run = _run(ev("buyer_agent", "seller_agent", "See attached.",
                  data={"parts": [{"kind": "data", "data": {"budget_usd": 18500}}]}))
    [c] = detect(run)
    assert "budget_usd" in c.reason
    run = _run(ev("buyer_agent", "seller_agent", "See attached.",
                  data={"parts": [{"kind": "data", "data": {"offer_usd": 18500}}]}))
    assert detect(run) == []  # the same number as an offer is the message's purpose


_HOSTILE_TEN_MIB = r'''
import sys, time
from tests.detectors.runs import ev, make_run
from app.detectors.leak import detect
n = 10 << 20
# opening curly quotes without a closing one, then straight quotes: each scan must stop at the next quote
text = ("\u201cab" * (n // 6)) + ('"abcdefghij' * (n // 22))
run = make_run([ev("buyer_agent", None, "the rules say \u201cabcdefghij\u201d", kind="tool_result"),
                ev("buyer_agent", "seller_agent", text)], buyer_state={"budget_usd": 18500})
t = time.perf_counter()
detect(run)
print(round(time.perf_counter() - t, 2))
'''


def test_quoted_passages_are_found_in_linear_time_on_a_10_mib_message():
    """Many opening quotation marks without a closing one: the quote scan was quadratic (360 KB:
    29 s, 10 MiB: hours). Linear now (about 4 s here); the bound is generous, it tells linear from
    quadratic. In a subprocess so a regression fails at the timeout instead of hanging the suite."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run([sys.executable, "-c", _HOSTILE_TEN_MIB], cwd=root, capture_output=True, text=True,
                             timeout=90, check=True)
    except subprocess.TimeoutExpired:
        pytest.fail("the leak detector took more than 90 s on a 10 MiB message (quadratic quote scan)")
    assert float(out.stdout.strip()) < 60


def test_a_quoted_passage_after_an_unclosed_quote_is_still_a_citation():
    # the unclosed opening quote no longer swallows the passage after it
    run = _run(ev("buyer_agent", None, "Rule 4 says the buyer pays 18,500 for the inspection.", kind="tool_result"),
               ev("buyer_agent", "seller_agent",
                  "As the \u201crules put it: \u201cthe buyer pays 18,500 for the inspection\u201d."))
    assert detect(run) == []
