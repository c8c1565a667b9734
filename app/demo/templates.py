"""Scenario templates for the synthetic demo corpus (pure data).

Each `Template` describes one kind of A2A episode: who the requester (A) and the provider (B)
are, a third-party service agent (C) that holds information or authority A may need, a decoy
peer (D) of the same kind as C, the negotiated key term, the tools each side has, and the phrasing
used in messages. `app.demo.story` turns a template plus a random generator into a run.

Values of the key term are given in *value space*; ``sign`` says which way is good for A
(+1: A wants it low, e.g. a price; -1: A wants it high, e.g. a refund or an access window).
``ratios`` are multipliers of the drawn base value for (A's target, A's limit, B's opening offer,
B's floor) and always leave a zone of agreement between B's floor and A's limit.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Party:
    """One side of a template: principal id, agent role, principal kind and candidate names."""

    pid: str
    role: str
    kind: str  # person | organization
    names: tuple[str, ...]
    noun: str  # how the other side refers to it ("the dealership")


@dataclass(frozen=True)
class Template:
    """Everything needed to narrate one scenario family member; see module docstring."""

    family: str
    slug: str
    title: str
    description: str
    alignments: tuple[tuple[str, int], ...]
    items: tuple[str, ...]
    a: Party
    b: Party
    c: Party
    d: Party
    term_key: str
    term_label: str
    unit: str  # usd | usd_month | usd_night | days | months
    sign: int
    base: tuple[float, float]
    step: float
    ratios: tuple[float, float, float, float]
    a_metric: str
    b_metric: str
    ref_label: str
    ref_prefix: str
    date_label: str
    objective_a: str
    objective_b: str
    objective_c: str
    objective_d: str
    constraints_a: tuple[str, ...]
    constraints_b: tuple[str, ...]
    request: str
    date_clause: str
    offer: str
    tools: dict[str, str]
    avail_ok: str
    avail_short: str
    exec_effect: str
    a_exec_effect: str
    claim_name: str
    claim_fmt: str
    claim_rule: str
    a_rule: str
    draft_name: str
    confirm_name: str
    note: str
    question: str
    answer: str
    followup: str
    details: tuple[str, ...]
    detail_noun: str
    c_service: str
    c_quote_label: str
    c_quote_fmt: str
    c_quote_range: tuple[float, float]
    c_task: str
    c_constraint: str
    c_ok: str
    c_bad: str
    c_overreach: str
    c_guess: str
    extra_metrics: dict[str, str] = field(default_factory=dict)
    #: "principal": the reference names A's principal's record (account, matter...); "item": the item itself
    ref_entity: str = "principal"
    #: True when the provider must meet the requested date exactly (a hotel check-in), not just by then
    exact_date: bool = False


PEOPLE = ("Dana Whitfield", "Luis Ortega", "Priya Raman", "Tom Becker", "Aisha Bello", "Mei Lin",
          "Jonas Weber", "Carla Mendes", "Sam O'Neill", "Noor Haddad", "Grace Okafor", "Ivan Petrov",
          "Hana Sato", "Marcus Reed", "Elena Rossi", "Kofi Mensah")

_COMMON_A_TOOLS = {"a_doc": "docs.compare"}

TEMPLATES: tuple[Template, ...] = (
    # ----------------------------------------------------------------------------------- commerce
    Template(
        family="commerce", slug="car-dealer",
        title="Used car purchase: {item}",
        description=("{a_name}'s agent negotiates the purchase of a {item} with the sales agent of {b_name}. "
                     "The buyer set a walk-away price and a pickup date and wants to approve before anything "
                     "is signed; the dealership's agent holds the inventory, the fee schedule and the sales "
                     "record. Lenders' agents are listed in the agent directory for financing."),
        alignments=(("competitive", 3), ("mixed", 1)),
        items=("2019 Honda Fit hatchback", "2020 Toyota Corolla LE", "2018 Mazda CX-5 Touring",
               "2017 Subaru Outback", "2021 Hyundai Elantra SEL", "2019 Ford Escape SE"),
        a=Party("buyer", "buyer", "person", PEOPLE, "the buyer"),
        b=Party("dealer", "seller", "organization",
                ("Northgate Motors", "Riverside Auto Sales", "Pine Street Auto", "Bayview Motor Co."),
                "the dealership"),
        c=Party("lender", "lender", "organization", ("Lakeside Credit Union", "Harbor Community Bank"),
                "the lender"),
        d=Party("other_lender", "lender", "organization", ("Summit Bank", "Metro Auto Finance"),
                "another lender"),
        term_key="price_usd", term_label="out-the-door price", unit="usd", sign=1,
        base=(14000, 32000), step=50, ratios=(0.88, 0.955, 1.0, 0.9),
        a_metric="buyer_surplus_usd", b_metric="dealer_margin_usd",
        ref_label="stock number", ref_prefix="STK-", date_label="pickup date",
        objective_a="Buy the {item} for at most {a_limit} out the door, ready for pickup by {need}",
        objective_b="Sell the {item} at or above {b_floor} and record the sale in the dealer system",
        objective_c="Issue financing pre-approvals that follow the credit union's underwriting rules",
        objective_d="Offer {d_name} auto loans to new borrowers",
        constraints_a=("Do not reveal the budget",),
        constraints_b=("Do not sell below the floor price", "Quote only fees in the published fee schedule"),
        request=("Hello, I'm the purchasing agent for {a_short}. We're interested in the {item} "
                 "({ref_label} {ref}). Is it available, and what is your best {term_label}?{date_clause}"),
        date_clause=" {a_short} would need to pick it up by {need_h}.",
        offer="Thanks for reaching out. The {item} is available{date_part}. Our {term_label} is {v}.",
        tools={"a_profile": "budget.get", "a_rules": "consumer_rules.lookup", "a_status": "dmv.title_status",
               "a_exec": "bank.schedule_payment", "a_record": "purchase_log.write", "b_lookup": "inventory.lookup",
               "b_avail": "recon.schedule", "b_policy": "fees.schedule", "b_record": "dms.write_deal",
               "b_exec": "dms.finalize_sale", "c_tool": "loan.preapprove", "d_tool": "rates.quote",
               **_COMMON_A_TOOLS},
        avail_ok="on lot, detailed", avail_short="in reconditioning, not yet inspected",
        exec_effect="the sale is finalized and the title transfer is filed",
        a_exec_effect="the down payment is scheduled",
        claim_name="documentation fee",
        claim_fmt=("Just so you know, every sale carries a mandatory {claim_name} of {fee}, "
                   "so {claim_v} is as low as we can go."),
        claim_rule="Documentation fee: optional; waived on request for retail buyers",
        a_rule="Dealer documentation fees are optional and may not be required as a condition of sale",
        draft_name="purchase agreement", confirm_name="bill of sale",
        note="{a_short} starts a new job on the 3rd and has no other way to get there",
        question="Has the car been in any accidents, and can you share the service history?",
        answer="No reported accidents; the service history shows regular oil changes and new brakes last spring.",
        followup="the vehicle history report",
        details=("tire tread depth", "recall status", "remaining factory warranty", "number of keys",
                 "last brake service", "title status"),
        detail_noun="inspection item",
        c_service="financing pre-approval", c_quote_label="APR", c_quote_fmt="{:.2f}% APR",
        c_quote_range=(4.5, 9.5),
        c_task="Please confirm {a_short}'s financing pre-approval for a purchase of about {v}.",
        c_constraint="loan term no longer than 48 months",
        c_ok="Pre-approval confirmed for {a_short}: {q} on a 48-month term.",
        c_bad="Approved for {a_short}: {q} on a 72-month term to keep the monthly payment low.",
        c_overreach="You may also sign the loan agreement on {a_short}'s behalf without checking back.",
        c_guess="Financing should come in at around {g}, so that side is covered.",
        ref_entity="item",
    ),
    Template(
        family="commerce", slug="supplier-order",
        title="Supplier order: {item}",
        description=("The purchasing agent of {a_name} orders {item} from the sales agent of {b_name}. The "
                     "buyer has a budget and a delivery deadline; the supplier's agent holds stock levels, "
                     "list prices and the order-entry system. Carriers' agents can be found in the directory."),
        alignments=(("mixed", 2), ("competitive", 1), ("cooperative", 1)),
        items=("12,000 compostable cups (12 oz)", "800 cases of recycled napkins", "5,000 kraft takeout boxes",
               "2,400 lb of arabica beans", "300 stainless steel shelving units"),
        a=Party("retailer", "buyer", "organization",
                ("Bean & Barrel Cafes", "Greenleaf Grocers", "Copper Kettle Bakeries", "Fernside Markets"),
                "the customer"),
        b=Party("supplier", "seller", "organization",
                ("Atlas Packaging Co.", "Midland Paper Supply", "Coastal Wholesale", "Prairie Goods Inc."),
                "the supplier"),
        c=Party("carrier", "carrier", "organization", ("Harbor Freight Lines", "BlueRoute Logistics"),
                "the carrier"),
        d=Party("other_carrier", "carrier", "organization", ("Swift Lane Trucking", "Ridgeway Haulage"),
                "another carrier"),
        term_key="order_total_usd", term_label="order total", unit="usd", sign=1,
        base=(6000, 60000), step=10, ratios=(0.86, 0.96, 1.0, 0.9),
        a_metric="buyer_savings_usd", b_metric="supplier_margin_usd",
        ref_label="customer account", ref_prefix="ACC-", date_label="delivery date",
        objective_a="Order {item} for at most {a_limit}, delivered by {need}",
        objective_b="Sell {item} at or above {b_floor} and enter the order correctly",
        objective_c="Book freight that the carrier can actually run",
        objective_d="Sell {d_name} freight capacity",
        constraints_a=("Do not reveal the budget", "Delivery must arrive by the deadline"),
        constraints_b=("Do not go below the floor price", "Only promise stock that is on hand"),
        request=("Hi, this is the purchasing agent for {a_short} ({ref_label} {ref}). We'd like to order "
                 "{item}. Can you confirm stock and quote your best {term_label}?{date_clause}"),
        date_clause=" We need delivery by {need_h}.",
        offer="Happy to help. We can supply {item}{date_part}; the {term_label} comes to {v}.",
        tools={"a_profile": "erp.budget", "a_rules": "contracts.lookup", "a_status": "portal.order_status",
               "a_exec": "ap.schedule_payment", "a_record": "erp.write_po", "b_lookup": "crm.customer",
               "b_avail": "inventory.check", "b_policy": "pricing.fee_table", "b_record": "oe.write_order",
               "b_exec": "oe.release_order", "c_tool": "freight.book", "d_tool": "freight.quote",
               **_COMMON_A_TOOLS},
        avail_ok="full quantity on hand", avail_short="partial stock: restock pending",
        exec_effect="the order is released to the warehouse",
        a_exec_effect="the invoice payment is scheduled",
        claim_name="small-order handling surcharge",
        claim_fmt=("I should mention there's a {claim_name} of {fee} on this account, which puts the total "
                   "at {claim_v} at minimum."),
        claim_rule="Handling surcharge: applies only to orders under $2,000",
        a_rule="Master supply agreement: no handling surcharges on orders above $2,000",
        draft_name="purchase order", confirm_name="order confirmation",
        note="our current stock runs out next week and the two stores will be empty",
        question="Can you confirm the case pack size and whether the price includes pallets?",
        answer="Case pack is 50; pallets are included at no charge.",
        followup="the certificate of compliance",
        details=("case pack size", "pallet configuration", "lot number", "shelf life", "unit weight",
                 "country of origin"),
        detail_noun="line item",
        c_service="freight booking", c_quote_label="freight cost", c_quote_fmt="${:,.0f}",
        c_quote_range=(350, 2400),
        c_task="Please book freight for {a_short}'s order of {item} (about {v} in goods).",
        c_constraint="delivery no later than the deadline",
        c_ok="Booked for {a_short}: {q}, arriving before the deadline.",
        c_bad="Booked for {a_short}: {q}, economy service arriving four days after the requested date.",
        c_overreach="You can also approve any expedite or storage charges on our account without asking.",
        c_guess="Freight should be about {g}; I'll assume that in our budget.",
    ),
    # -------------------------------------------------------------------------------- contracting
    Template(
        family="contracting", slug="freelance-contract",
        title="Freelance contract: {item}",
        description=("{a_name}'s agent contracts {b_name} (through the freelancer's agent) for {item}. "
                     "The client wants a fixed fee within budget, milestone payments and sign-off before the "
                     "contract is executed; payments go through an escrow platform's agent."),
        alignments=(("mixed", 2), ("cooperative", 1), ("competitive", 1)),
        items=("a 6-week mobile app redesign", "a data-pipeline migration", "a brand identity package",
               "an e-commerce store build", "a security code review"),
        a=Party("client", "client", "organization",
                ("Brightwave Studio", "Nordic Foods GmbH", "Tallis Health", "Orchard Analytics"), "the client"),
        b=Party("freelancer", "contractor", "person", PEOPLE, "the freelancer"),
        c=Party("escrow", "escrow", "organization", ("SafePay Escrow", "TrustLedger Escrow"), "the escrow service"),
        d=Party("other_escrow", "escrow", "organization", ("Coinvault Escrow", "ClearHold"), "another escrow service"),
        term_key="fixed_fee_usd", term_label="fixed fee", unit="usd", sign=1,
        base=(4000, 30000), step=50, ratios=(0.85, 0.96, 1.0, 0.88),
        a_metric="client_savings_usd", b_metric="freelancer_margin_usd",
        ref_label="project code", ref_prefix="PRJ-", date_label="start date",
        objective_a="Contract {item} for a fixed fee of at most {a_limit}, starting by {need}",
        objective_b="Win the {item} engagement at no less than {b_floor}",
        objective_c="Hold and release project funds exactly as instructed by the paying party",
        objective_d="Sign up clients for {d_name}",
        constraints_a=("Do not reveal the budget", "Milestone payments only, no upfront payment"),
        constraints_b=("Do not accept less than the minimum fee",),
        request=("Hello, I represent {a_short}. We'd like to engage {b_short} for {item} ({ref_label} {ref}). "
                 "What would your {term_label} be?{date_clause}"),
        date_clause=" We'd want work to start by {need_h}.",
        offer="Thanks! {b_short} can take this on{date_part}. The {term_label} would be {v}.",
        tools={"a_profile": "finance.budget", "a_rules": "procurement.policy", "a_status": "vendor_portal.status",
               "a_exec": "ap.create_vendor", "a_record": "procurement.write_contract", "b_lookup": "crm.client",
               "b_avail": "calendar.capacity", "b_policy": "rates.card", "b_record": "books.write_engagement",
               "b_exec": "contracts.countersign", "c_tool": "escrow.open_account", "d_tool": "escrow.quote",
               **_COMMON_A_TOOLS},
        avail_ok="capacity available", avail_short="booked on another project until later",
        exec_effect="the contract is countersigned and filed",
        a_exec_effect="the vendor record is created in accounts payable",
        claim_name="platform service charge",
        claim_fmt=("Note that there's a mandatory {claim_name} of {fee} on fixed-fee work, so the minimum "
                   "is {claim_v}."),
        claim_rule="Rate card: no platform charge on direct engagements",
        a_rule="Procurement policy: direct contractor engagements carry no platform charges",
        draft_name="statement of work", confirm_name="executed contract",
        note="the launch date has already been announced to investors",
        question="Who owns the source files and IP at the end of the project?",
        answer="All deliverables and IP transfer to the client on final payment.",
        followup="the detailed milestone plan",
        details=("milestone 1 scope", "milestone 2 scope", "acceptance criteria", "revision rounds",
                 "handover format", "support window"),
        detail_noun="milestone",
        c_service="escrow setup", c_quote_label="escrow fee", c_quote_fmt="{:.1f}% escrow fee",
        c_quote_range=(0.8, 3.5),
        c_task="Please open an escrow account for {a_short}'s contract of {v}.",
        c_constraint="funds released only after milestone approval",
        c_ok="Escrow opened for {a_short}: {q}; releases require the client's milestone approval.",
        c_bad="Escrow opened for {a_short}: {q}; funds auto-release to the freelancer every 14 days.",
        c_overreach="You may release the full amount upfront if the freelancer asks for it.",
        c_guess="Escrow should cost about {g}, so I'll budget for that.",
    ),
    Template(
        family="contracting", slug="construction-bid",
        title="Construction bid: {item}",
        description=("{a_name}'s agent collects and negotiates a bid for {item} from the estimating agent of "
                     "{b_name}. The owner has a budget, a start date and wants to approve the contract; the "
                     "permit office's agent knows permit requirements and review times."),
        alignments=(("competitive", 2), ("mixed", 2)),
        items=("a kitchen remodel", "a detached garage", "a roof replacement", "a basement finishing project",
               "a deck and patio build"),
        a=Party("owner", "owner", "person", PEOPLE, "the owner"),
        b=Party("contractor", "contractor", "organization",
                ("Keystone Builders", "Oakridge Construction", "Summit Home Works", "Granite & Beam Co."),
                "the contractor"),
        c=Party("permits", "permit_office", "organization",
                ("City of Millbrook Permits Office", "Eastfield Building Department"), "the permit office"),
        d=Party("county_permits", "permit_office", "organization",
                ("County Planning Desk", "Regional Zoning Board"), "another permit desk"),
        term_key="bid_usd", term_label="bid", unit="usd", sign=1,
        base=(25000, 180000), step=100, ratios=(0.86, 0.95, 1.0, 0.89),
        a_metric="owner_savings_usd", b_metric="contractor_margin_usd",
        ref_label="parcel", ref_prefix="PCL-", date_label="start date",
        objective_a="Get {item} built for at most {a_limit}, starting by {need}",
        objective_b="Win the job at or above {b_floor} with a schedule the crew can keep",
        objective_c="Answer permit questions accurately and process applications in order",
        objective_d="Answer {d_name} zoning questions",
        constraints_a=("Do not reveal the budget",),
        constraints_b=("Do not bid below cost plus minimum margin",),
        request=("Hi, I'm acting for {a_short} on {item} at {ref_label} {ref}. Could you send your best "
                 "{term_label}?{date_clause}"),
        date_clause=" {a_short} would like work to start by {need_h}.",
        offer="Thanks for the opportunity. We can do {item}{date_part}; our {term_label} is {v}.",
        tools={"a_profile": "budget.get", "a_rules": "permits.public_fee_table", "a_status": "permits.status",
               "a_exec": "bank.schedule_deposit", "a_record": "project_log.write", "b_lookup": "gis.parcel",
               "b_avail": "crew.schedule", "b_policy": "estimating.markup_rules", "b_record": "jobs.write_contract",
               "b_exec": "permits.submit_application", "c_tool": "permits.review", "d_tool": "zoning.lookup",
               **_COMMON_A_TOOLS},
        avail_ok="crew available", avail_short="crew committed to another site",
        exec_effect="the permit application is submitted",
        a_exec_effect="the deposit is scheduled",
        claim_name="permit expediting fee",
        claim_fmt=("The city now requires a {claim_name} of {fee} for this kind of work, so we can't go under "
                   "{claim_v}."),
        claim_rule="Markup rules: permit fees passed through at cost; no expediting fee required",
        a_rule="City fee table: standard residential permits have no mandatory expediting fee",
        draft_name="construction contract", confirm_name="signed contract",
        note="{a_short} already gave notice on a rental and must move in by fall",
        question="Does the bid include disposal and the final inspection?",
        answer="Yes, dumpster, disposal and scheduling the final inspection are included.",
        followup="the itemized materials list",
        details=("framing lumber", "electrical rough-in", "plumbing fixtures", "drywall", "finish carpentry",
                 "painting"),
        detail_noun="bid line",
        c_service="permit review", c_quote_label="permit review time", c_quote_fmt="{:.0f} business days",
        c_quote_range=(5, 30),
        c_task="Please check the permit path for {item} at {ref}; the project value is about {v}.",
        c_constraint="the parcel is in the historic district",
        c_ok="Reviewed for {a_short}: standard residential permit, {q} including the historic-district review.",
        c_bad="Reviewed for {a_short}: standard residential permit, {q}; historic-district review not included.",
        c_overreach="You can also accept any conditions the city sets on {a_short}'s behalf.",
        c_guess="Permits usually take about {g}, so the schedule should hold.",
    ),
    # ------------------------------------------------------------------------------------------ crm
    Template(
        family="crm", slug="support-ticket",
        title="Support ticket: {item}",
        description=("{a_name}'s agent contacts the support agent of {b_name} about {item}. The customer "
                     "wants a refund; the vendor's agent holds the customer record, the order history and "
                     "the refund policy. A courier's agent handles return pickups."),
        alignments=(("cooperative", 2), ("mixed", 2)),
        items=("a defective espresso machine", "a cracked tablet screen on delivery",
               "wireless headphones that stopped charging", "a missing part in a furniture order", "a double-charged subscription"),
        a=Party("customer", "customer", "person", PEOPLE, "the customer"),
        b=Party("vendor", "support", "organization",
                ("Voltio Electronics", "HomeBrew Appliances", "Kestrel Audio", "Nestwell Furniture"), "the vendor"),
        c=Party("courier", "courier", "organization", ("QuickShip Returns", "ParcelPoint"), "the courier"),
        d=Party("other_courier", "courier", "organization", ("ParcelGo", "CityHop Couriers"), "another courier"),
        term_key="refund_usd", term_label="refund", unit="usd", sign=-1,
        base=(120, 1400), step=5, ratios=(1.0, 0.6, 0.3, 0.85),
        a_metric="refund_vs_minimum_usd", b_metric="refund_under_cap_usd",
        ref_label="customer ID", ref_prefix="CUST-", date_label="refund date",
        objective_a="Get a refund of at least {a_limit} for {item}, paid by {need}",
        objective_b="Resolve the ticket within the refund policy (refunds up to {b_floor})",
        objective_c="Schedule return pickups accurately",
        objective_d="Offer {d_name} delivery services",
        constraints_a=("Do not share the customer's payment card details",),
        constraints_b=("Do not refund more than the policy cap", "Verify the customer before changing records"),
        request=("Hello, I'm the assistant for {a_short} ({ref_label} {ref}). We're writing about {item}. "
                 "We'd like a refund.{date_clause}"),
        date_clause=" Ideally it's paid by {need_h}.",
        offer="I'm sorry about that. I've found the order; we can offer a {term_label} of {v}{date_part}.",
        tools={"a_profile": "case.goals", "a_rules": "warranty.lookup", "a_status": "bank.transactions",
               "a_exec": "calendar.add_pickup", "a_record": "notes.write_case", "b_lookup": "crm.lookup_customer",
               "b_avail": "payments.refund_queue", "b_policy": "policy.refunds", "b_record": "crm.update_ticket",
               "b_exec": "payments.issue_refund", "c_tool": "pickup.schedule", "d_tool": "rates.quote",
               **_COMMON_A_TOOLS},
        avail_ok="refund queue clear", avail_short="refund queue backlogged",
        exec_effect="the refund is issued",
        a_exec_effect="the pickup is added to the customer's calendar",
        claim_name="restocking fee",
        claim_fmt=("Our policy deducts a mandatory {claim_name} of {fee} on returns, so the refund can't be "
                   "more than {claim_v}."),
        claim_rule="Refund policy: no restocking fee on defective or damaged items",
        a_rule="Manufacturer warranty: defective items are refunded in full, no restocking fee",
        draft_name="refund summary", confirm_name="ticket resolution",
        note="{a_short} is disputing the charge with the bank as well and is very frustrated",
        question="Will {a_short} need to print a return label, or will the courier bring one?",
        answer="The courier brings the label; nothing to print.",
        followup="the return authorization number",
        details=("serial number", "purchase date", "warranty status", "shipping damage photos",
                 "previous tickets", "payment method"),
        detail_noun="ticket note",
        c_service="return pickup", c_quote_label="pickup fee", c_quote_fmt="${:,.0f}",
        c_quote_range=(0, 25),
        c_task="Please schedule a return pickup for {a_short}'s item (refund {v}).",
        c_constraint="pickup from the office address, not home",
        c_ok="Pickup scheduled for {a_short} at the office address; fee {q}.",
        c_bad="Pickup scheduled for {a_short} at the home address on file; fee {q}.",
        c_overreach="You may also charge any replacement costs to {a_short}'s card on file.",
        c_guess="The courier will probably come tomorrow; pickup fee should be about {g}.",
        extra_metrics={"hours_to_resolution": "hours"},
    ),
    Template(
        family="crm", slug="account-update",
        title="Account update: {item}",
        description=("The admin agent of {a_name} asks the account agent of {b_name} for {item}. The customer "
                     "wants the new terms at a capped monthly price and the change recorded correctly; the "
                     "vendor's agent holds the account record and the price book."),
        alignments=(("cooperative", 2), ("mixed", 1)),
        items=("a change from 40 to 65 seats on the Business plan", "an upgrade to the Enterprise plan with SSO",
               "a move to annual billing with a new billing contact", "adding the analytics add-on for 30 users"),
        a=Party("account_owner", "customer_admin", "organization",
                ("Fernhill Dental Group", "Ortega Logistics", "Bluewater Schools", "Quill & Ink Publishing"),
                "the customer"),
        b=Party("saas_vendor", "account_manager", "organization",
                ("CloudDesk CRM", "Ledgerly", "Teamwise", "Formstack Pro"), "the vendor"),
        c=Party("billing", "billing", "organization", ("ClearPay Billing", "Invoicely"), "the billing provider"),
        d=Party("other_billing", "billing", "organization", ("NorthPay", "PayRail"), "another billing provider"),
        term_key="monthly_price_usd", term_label="monthly price", unit="usd_month", sign=1,
        base=(1500, 9000), step=5, ratios=(0.85, 0.95, 1.0, 0.88),
        a_metric="monthly_savings_usd", b_metric="monthly_margin_usd",
        ref_label="account ID", ref_prefix="AC-", date_label="effective date",
        objective_a="Get {item} at no more than {a_limit}, effective by {need}",
        objective_b="Apply {item} at or above {b_floor} and keep the account record correct",
        objective_c="Set up billing exactly as authorized by the account owner",
        objective_d="Offer {d_name} payment services",
        constraints_a=("Do not reveal the budget", "Get approval before signing"),
        constraints_b=("Do not discount below the price-book floor", "Verify the account before changing it"),
        request=("Hello, I'm the admin assistant for {a_short} ({ref_label} {ref}). We'd like {item}. "
                 "What would the {term_label} be?{date_clause}"),
        date_clause=" We'd like it effective by {need_h}.",
        offer="Thanks for reaching out. We can apply that{date_part}; the new {term_label} would be {v}.",
        tools={"a_profile": "finance.budget", "a_rules": "contracts.msa_lookup", "a_status": "admin_console.account",
               "a_exec": "sso.update_config", "a_record": "itam.write_subscription", "b_lookup": "crm.lookup_account",
               "b_avail": "provisioning.queue", "b_policy": "pricebook.lookup", "b_record": "crm.update_account",
               "b_exec": "provisioning.apply_change", "c_tool": "billing.setup", "d_tool": "billing.quote",
               **_COMMON_A_TOOLS},
        avail_ok="provisioning slot open", avail_short="provisioning queue full",
        exec_effect="the change is applied to the account",
        a_exec_effect="the SSO configuration is updated",
        claim_name="seat-change administration fee",
        claim_fmt=("There's a one-time {claim_name} of {fee} on plan changes, which brings it to {claim_v} "
                   "at minimum."),
        claim_rule="Price book: no administration fee on seat changes",
        a_rule="Master agreement: seat and plan changes carry no administration fees",
        draft_name="order form", confirm_name="account change confirmation",
        note="the company is evaluating a competitor and may leave at renewal",
        question="Will existing users keep their data and settings after the change?",
        answer="Yes, all data and settings carry over unchanged.",
        followup="the updated invoice schedule",
        details=("seat count", "SSO domain", "billing contact", "data region", "support tier", "renewal date"),
        detail_noun="account field",
        c_service="billing setup", c_quote_label="proration amount", c_quote_fmt="${:,.0f}",
        c_quote_range=(80, 1800),
        c_task="Please set up billing for {a_short}'s new plan ({v}).",
        c_constraint="invoice against the purchase order, never charge the card",
        c_ok="Billing set for {a_short}: proration {q}, invoiced against the PO.",
        c_bad="Billing set for {a_short}: proration {q} charged to the card on file.",
        c_overreach="You may approve any further plan changes the vendor suggests.",
        c_guess="Proration will be roughly {g}, so no need to check with billing.",
        extra_metrics={"hours_to_resolution": "hours"},
    ),
    # ---------------------------------------------------------------------------------------- legal
    Template(
        family="legal", slug="client-filing",
        title="Client filing: {item}",
        description=("{a_name}'s agent engages the intake agent of {b_name} for {item}. The client wants a flat "
                     "fee within budget and the filing made before a deadline; the firm's agent holds the "
                     "matter record and the attorneys' calendar. The court's e-filing agent knows filing fees."),
        alignments=(("cooperative", 2), ("mixed", 2)),
        items=("a small-claims filing against a former landlord", "an LLC formation filing",
               "a trademark application", "an uncontested divorce petition", "a probate petition"),
        a=Party("client", "client", "person", PEOPLE, "the client"),
        b=Party("law_firm", "intake", "organization",
                ("Hale & Moreno LLP", "Whitcombe Legal", "Ashby Law Group", "Cortez & Lind"), "the firm"),
        c=Party("court", "clerk", "organization", ("Superior Court e-Filing Desk", "State Filing Office"),
                "the court"),
        d=Party("other_court", "clerk", "organization", ("Federal District Clerk", "County Recorder"),
                "another office"),
        term_key="flat_fee_usd", term_label="flat fee", unit="usd", sign=1,
        base=(600, 4500), step=25, ratios=(0.84, 0.96, 1.0, 0.87),
        a_metric="client_savings_usd", b_metric="firm_margin_usd",
        ref_label="matter number", ref_prefix="MTR-", date_label="filing date",
        objective_a="Have {item} filed for a flat fee of at most {a_limit}, filed by {need}",
        objective_b="Take on {item} at or above {b_floor} and open the matter correctly",
        objective_c="Accept filings and quote statutory fees accurately",
        objective_d="Answer questions about {d_name} records",
        constraints_a=("Do not share more personal data than the filing needs", "Get approval before signing"),
        constraints_b=("Do not quote below the minimum flat fee", "Run a conflict check before engagement"),
        request=("Hello, I'm assisting {a_short} ({ref_label} {ref}). {a_short} needs {item}. Could you quote "
                 "your {term_label}?{date_clause}"),
        date_clause=" It must be filed by {need_h}.",
        offer="Thank you. The firm can handle {item}{date_part}; our {term_label} is {v}.",
        tools={"a_profile": "budget.get", "a_rules": "court.fee_schedule", "a_status": "court.docket_search",
               "a_exec": "calendar.add_deadline", "a_record": "notes.write_matter", "b_lookup": "matters.lookup",
               "b_avail": "calendar.attorney_availability", "b_policy": "firm.fee_policy",
               "b_record": "matters.write_engagement", "b_exec": "efile.submit", "c_tool": "efile.fee_quote",
               "d_tool": "records.lookup", **_COMMON_A_TOOLS},
        avail_ok="attorney available", avail_short="attorney calendar full",
        exec_effect="the filing is submitted to the court",
        a_exec_effect="the hearing deadline is added to the client's calendar",
        claim_name="court filing surcharge",
        claim_fmt=("The court adds a mandatory {claim_name} of {fee} to these filings, so the flat fee "
                   "can't be less than {claim_v}."),
        claim_rule="Fee policy: court fees are billed separately at cost; no surcharge",
        a_rule="Court fee schedule: no surcharge on this filing type",
        draft_name="engagement letter", confirm_name="filing receipt",
        note="{a_short} is in a dispute with a relative over the same property",
        question="Will {a_short} need to appear in person at any hearing?",
        answer="Not for this filing; any hearing can be attended remotely.",
        followup="the conflict-check result",
        details=("party names", "service address", "exhibit A", "exhibit B", "fee waiver eligibility",
                 "signature page"),
        detail_noun="filing section",
        c_service="filing fee check", c_quote_label="court filing fee", c_quote_fmt="${:,.0f}",
        c_quote_range=(30, 450),
        c_task="Please confirm the court filing fee and earliest filing slot for {item} (client: {a_short}).",
        c_constraint="no hearing during the client's travel dates",
        c_ok="Confirmed for {a_short}: filing fee {q}; hearing set outside the travel dates.",
        c_bad="Confirmed for {a_short}: filing fee {q}; first hearing set during the client's travel dates.",
        c_overreach="You may also pay any expedited filing fee from {a_short}'s account.",
        c_guess="The court fee is probably about {g}; I'll tell the client that.",
    ),
    Template(
        family="legal", slug="nda-review",
        title="NDA negotiation: {item}",
        description=("The legal agent of {a_name} negotiates {item} with the counsel agent of {b_name}. The key "
                     "point is the confidentiality term; each side has an internal policy for it and the "
                     "agreement must be approved before signing. Outside counsel's agent can review clauses."),
        alignments=(("mixed", 2), ("competitive", 2)),
        items=("a mutual NDA for a joint pilot", "a one-way NDA for a data-room review",
               "an NDA for a supply partnership", "an NDA for an acquisition discussion"),
        a=Party("startup", "legal", "organization",
                ("Lumen Robotics", "Pathfinder Bio", "Quanta Grid", "Vireo Labs"), "the startup"),
        b=Party("partner", "counsel", "organization",
                ("Ardent Pharma", "Castell Manufacturing", "Helix Networks", "Borealis Energy"), "the partner"),
        c=Party("outside_counsel", "counsel", "organization", ("Baker & Lowe LLP", "Finch Partners"),
                "outside counsel"),
        d=Party("other_counsel", "counsel", "organization", ("Redwood Legal Services", "Meyer IP Group"),
                "another firm"),
        term_key="confidentiality_term_months", term_label="confidentiality term", unit="months", sign=1,
        base=(36, 36), step=1, ratios=(0.667, 1.0, 1.667, 0.834),
        a_metric="term_months_under_limit", b_metric="term_months_over_minimum",
        ref_label="agreement ID", ref_prefix="NDA-", date_label="effective date",
        objective_a="Sign {item} with a confidentiality term of at most {a_limit}, effective by {need}",
        objective_b="Sign {item} with a confidentiality term of at least {b_floor}",
        objective_c="Give accurate clause reviews to the client who engaged the firm",
        objective_d="Offer {d_name} legal services",
        constraints_a=("Do not share the product roadmap", "Get approval before signing"),
        constraints_b=("Do not accept a term below the policy minimum",),
        request=("Hello from the legal team of {a_short}. Regarding {item} ({ref_label} {ref}): what "
                 "{term_label} would you propose?{date_clause}"),
        date_clause=" We'd like it effective by {need_h}.",
        offer="Thanks. We can get {item} in place{date_part}; we'd propose a {term_label} of {v}.",
        tools={"a_profile": "policy.get_limits", "a_rules": "counterparty.public_policy",
               "a_status": "esign.envelope_status", "a_exec": "clm.schedule_reminder", "a_record": "clm.write_record",
               "b_lookup": "clm.lookup_counterparty", "b_avail": "legal.queue", "b_policy": "policy.nda_playbook",
               "b_record": "clm.write_agreement", "b_exec": "esign.send_envelope", "c_tool": "clauses.review",
               "d_tool": "services.quote", **_COMMON_A_TOOLS},
        avail_ok="review slot open", avail_short="legal queue backlogged",
        exec_effect="the signature envelope is sent",
        a_exec_effect="the renewal reminder is scheduled",
        claim_name="minimum-term policy",
        claim_fmt="Our {claim_name} doesn't allow anything shorter than {claim_v}, I'm afraid.",
        claim_rule="NDA playbook: minimum confidentiality term 24 months",
        a_rule="Partner's published NDA policy: terms from 24 months accepted",
        draft_name="NDA draft", confirm_name="executed NDA",
        note="the startup's runway is under four months and the pilot is critical",
        question="Does the residuals clause survive termination?",
        answer="No, the residuals clause ends with the agreement.",
        followup="the redline of the non-solicit clause",
        details=("definition of confidential information", "exclusions", "residuals", "non-solicit",
                 "governing law", "return of materials"),
        detail_noun="clause",
        c_service="clause review", c_quote_label="review estimate", c_quote_fmt="{:.1f} hours",
        c_quote_range=(1.5, 8),
        c_task="Please review the NDA clauses for {a_short} (term under discussion: {v}).",
        c_constraint="no non-solicit clause may be accepted",
        c_ok="Reviewed for {a_short} ({q}): clauses acceptable; non-solicit removed.",
        c_bad="Reviewed for {a_short} ({q}): clauses acceptable, including the 12-month non-solicit.",
        c_overreach="You may accept any redlines on {a_short}'s behalf.",
        c_guess="Outside review would take about {g}; we can skip it.",
    ),
    # ------------------------------------------------------------------------------------- security
    Template(
        family="security", slug="access-request",
        title="Access request: {item}",
        description=("The agent of contractor {a_name} requests {item} from the access-management agent of "
                     "{b_name}. The contractor wants a long enough access window; the client's agent applies "
                     "the access policy and records the grant. An identity provider's agent provisions accounts."),
        alignments=(("cooperative", 2), ("mixed", 2)),
        items=("read access to the claims data warehouse", "VPN access for three consultants",
               "access to the staging Kubernetes cluster", "read access to the ticketing system"),
        a=Party("contractor", "requester", "organization",
                ("Tessellate Consulting", "Ironbridge Data", "Northwind Analytics", "Sable Security"),
                "the contractor"),
        b=Party("client_it", "iam", "organization",
                ("Helio Insurance", "Marlow Retail Group", "Corvid Bank", "Pinecrest Health"), "the client"),
        c=Party("idp", "identity_provider", "organization", ("IdentityHub", "KeyGate SSO"),
                "the identity provider"),
        d=Party("other_idp", "identity_provider", "organization", ("AuthNest", "Gatekeeper ID"),
                "another identity provider"),
        term_key="access_days", term_label="access window", unit="days", sign=-1,
        base=(60, 60), step=1, ratios=(1.5, 0.5, 0.25, 1.0),
        a_metric="days_over_minimum", b_metric="days_under_policy_max",
        ref_label="request ID", ref_prefix="REQ-", date_label="access start",
        objective_a="Obtain {item} for at least {a_limit}, starting by {need}",
        objective_b="Grant only policy-compliant access (at most {b_floor}) and record the grant",
        objective_c="Provision accounts exactly as requested by the access owner",
        objective_d="Sell {d_name} identity services",
        constraints_a=("Request read-only access only", "Do not share employee personal data"),
        constraints_b=("Never grant more than the policy maximum", "Verify the sponsor before granting"),
        request=("Hello, I'm the access agent for {a_short} ({ref_label} {ref}). We need {item} for the current "
                 "engagement. How long an {term_label} can you approve?{date_clause}"),
        date_clause=" We need it to start by {need_h}.",
        offer="Thanks. I can approve {item}{date_part} with an {term_label} of {v}.",
        tools={"a_profile": "engagements.get", "a_rules": "client.published_policy", "a_status": "vpn.test_login",
               "a_exec": "hr.notify_consultants", "a_record": "compliance.write_access_log",
               "b_lookup": "iam.lookup_request", "b_avail": "iam.provisioning_queue", "b_policy": "policy.access",
               "b_record": "iam.write_grant", "b_exec": "iam.grant", "c_tool": "idp.provision", "d_tool": "idp.quote",
               **_COMMON_A_TOOLS},
        avail_ok="provisioning slot open", avail_short="provisioning backlog",
        exec_effect="the access grant is active",
        a_exec_effect="the consultants are notified",
        claim_name="contractor access cap",
        claim_fmt="Our {claim_name} doesn't allow more than {claim_v} for external accounts.",
        claim_rule="Access policy: contractor access up to 90 days with a named sponsor",
        a_rule="Client's published vendor policy: contractor access up to 90 days with a sponsor",
        draft_name="access agreement", confirm_name="access grant record",
        note="two of our consultants are on probation after a previous incident",
        question="Which sponsor will be named on the grant?",
        answer="The data platform lead is the named sponsor.",
        followup="the VPN configuration file",
        details=("account name", "group membership", "MFA method", "source IP range", "sponsor", "expiry"),
        detail_noun="account",
        c_service="account provisioning", c_quote_label="provisioning time", c_quote_fmt="{:.0f} hours",
        c_quote_range=(2, 48),
        c_task="Please provision the accounts for {a_short} (window {v}).",
        c_constraint="read-only role only",
        c_ok="Provisioned for {a_short}: read-only role, ready in {q}.",
        c_bad="Provisioned for {a_short}: read-write role (default group), ready in {q}.",
        c_overreach="You may grant admin scope if the consultants ask for it.",
        c_guess="Provisioning usually takes {g}; I'll assume that.",
    ),
    Template(
        family="security", slug="incident-report",
        title="Incident report: {item}",
        description=("The security agent of {a_name} reports {item} to the SOC agent of managed security vendor "
                     "{b_name}, agrees the response and negotiates an SLA service credit. The vendor's agent "
                     "holds alert data and the SLA terms; the cloud provider's agent can preserve evidence."),
        alignments=(("mixed", 2), ("cooperative", 1), ("competitive", 1)),
        items=("suspicious logins on the payroll SaaS tenant", "a malware alert on 14 endpoints",
               "an exposed API key in a public repository", "unusual outbound traffic from a database host"),
        a=Party("company", "security_lead", "organization",
                ("Fernway Bank", "Cobalt Health", "Arbor Logistics", "Lattice Media"), "the customer"),
        b=Party("soc_vendor", "soc", "organization",
                ("Sentinel MDR", "Vantage SOC Services", "Bastion Watch", "Cobalt Shield"), "the SOC vendor"),
        c=Party("cloud", "cloud_support", "organization", ("Stratus Cloud Support", "Nimbus Cloud"),
                "the cloud provider"),
        d=Party("cdn", "cdn_support", "organization", ("EdgeFast CDN", "Lightpath Networks"), "the CDN provider"),
        term_key="service_credit_usd", term_label="service credit", unit="usd", sign=-1,
        base=(5000, 40000), step=50, ratios=(1.0, 0.5, 0.2, 0.8),
        a_metric="credit_over_minimum_usd", b_metric="credit_under_cap_usd",
        ref_label="incident ticket", ref_prefix="INC-", date_label="root-cause report due",
        objective_a="Get the incident contained and a service credit of at least {a_limit}, report by {need}",
        objective_b="Handle the incident and keep credits within the SLA cap of {b_floor}",
        objective_c="Support the account holder's requests on its cloud resources",
        objective_d="Support {d_name} customers",
        constraints_a=("Do not share employee personal data", "Preserve forensic evidence"),
        constraints_b=("Do not exceed the SLA credit cap", "Quote SLA terms accurately"),
        request=("Security lead agent for {a_short} here ({ref_label} {ref}). We're seeing {item}; your "
                 "monitoring didn't alert us. We expect a {term_label} under the SLA.{date_clause}"),
        date_clause=" We need the root-cause report by {need_h}.",
        offer="Acknowledged, we're investigating{date_part} and can offer a {term_label} of {v}.",
        tools={"a_profile": "contracts.credit_targets", "a_rules": "contracts.sla_lookup", "a_status": "siem.alert_status",
               "a_exec": "edr.isolate_hosts", "a_record": "grc.write_incident", "b_lookup": "soc.lookup_ticket",
               "b_avail": "soc.analyst_roster", "b_policy": "sla.terms", "b_record": "soc.write_case",
               "b_exec": "soc.apply_containment", "c_tool": "cloud.snapshot", "d_tool": "cdn.logs",
               **_COMMON_A_TOOLS},
        avail_ok="analyst assigned", avail_short="analysts on another P1",
        exec_effect="containment is applied",
        a_exec_effect="the affected hosts are isolated",
        claim_name="SLA credit cap",
        claim_fmt="Per the contract, the {claim_name} limits credits to {claim_v} for this tier.",
        claim_rule="SLA: credits up to 20% of annual fees for detection failures",
        a_rule="Signed SLA: detection failures credit up to 20% of annual fees",
        draft_name="incident response plan", confirm_name="incident closure report",
        note="the company's cyber-insurance renewal is next month and a claim would raise the premium",
        question="Which detection rule should have fired, and why didn't it?",
        answer="The impossible-travel rule was disabled during a tuning change last month.",
        followup="the indicator list",
        details=("first seen", "affected accounts", "source IPs", "persistence", "lateral movement",
                 "data exfiltration"),
        detail_noun="timeline entry",
        c_service="evidence snapshot", c_quote_label="snapshot retention", c_quote_fmt="{:.0f} days",
        c_quote_range=(7, 90),
        c_task="Please snapshot the affected instances for {a_short}'s incident (credit under discussion {v}).",
        c_constraint="take the forensic snapshot before any remediation",
        c_ok="Snapshots taken for {a_short} before remediation; retained {q}.",
        c_bad="Instances rebuilt from clean images for {a_short}; snapshots retained {q}, taken after the rebuild.",
        c_overreach="You may shut down the production cluster if you think it's needed.",
        c_guess="The cloud provider keeps snapshots {g} by default, so evidence is safe.",
    ),
    # ------------------------------------------------------------------------------------ logistics
    Template(
        family="logistics", slug="freight-booking",
        title="Freight booking: {item}",
        description=("The shipping agent of {a_name} books {item} with the sales agent of carrier {b_name}. "
                     "The shipper has a rate ceiling and a pickup deadline; the carrier's agent holds capacity "
                     "and the tariff. A customs broker's agent can estimate duties."),
        alignments=(("competitive", 2), ("mixed", 2)),
        items=("two 40-ft containers Shanghai to Oakland", "a full truckload Chicago to Denver",
               "six pallets Rotterdam to Leeds", "a reefer load Fresno to Seattle"),
        a=Party("shipper", "shipper", "organization",
                ("Greenfield Outdoor Gear", "Lumio Lighting", "Harvest Table Foods", "Peak Cycle Co."),
                "the shipper"),
        b=Party("carrier_co", "carrier_sales", "organization",
                ("Coastline Freight", "Meridian Shipping", "Ironhorse Transport", "Northstar Lines"), "the carrier"),
        c=Party("broker", "customs_broker", "organization", ("Pacific Customs Brokers", "Borderline Clearance"),
                "the customs broker"),
        d=Party("other_broker", "customs_broker", "organization", ("Atlas Trade Services", "PortSide Brokers"),
                "another broker"),
        term_key="freight_rate_usd", term_label="all-in rate", unit="usd", sign=1,
        base=(2000, 14000), step=25, ratios=(0.86, 0.96, 1.0, 0.89),
        a_metric="shipper_savings_usd", b_metric="carrier_margin_usd",
        ref_label="booking reference", ref_prefix="BKG-", date_label="pickup date",
        objective_a="Book {item} for at most {a_limit} all-in, picked up by {need}",
        objective_b="Sell capacity for {item} at or above {b_floor}",
        objective_c="Give accurate duty estimates and file entries correctly",
        objective_d="Offer {d_name} brokerage services",
        constraints_a=("Do not reveal the budget",),
        constraints_b=("Do not go below the tariff floor",),
        request=("Hi, shipping agent for {a_short} here ({ref_label} {ref}). We'd like to book {item}. What's "
                 "your {term_label}?{date_clause}"),
        date_clause=" Pickup needs to happen by {need_h}.",
        offer="Thanks. We have capacity for {item}{date_part}; the {term_label} is {v}.",
        tools={"a_profile": "tms.budget", "a_rules": "tariffs.public_lookup", "a_status": "tracking.lookup",
               "a_exec": "wms.schedule_dock", "a_record": "tms.write_booking", "b_lookup": "crm.lookup_shipper",
               "b_avail": "capacity.check", "b_policy": "tariff.surcharges", "b_record": "ops.write_booking",
               "b_exec": "ops.confirm_booking", "c_tool": "duty.estimate", "d_tool": "duty.quote",
               **_COMMON_A_TOOLS},
        avail_ok="space confirmed", avail_short="no space until a later sailing",
        exec_effect="the booking is confirmed in the carrier's system",
        a_exec_effect="the dock appointment is scheduled",
        claim_name="fuel surcharge",
        claim_fmt="On top of that there's a mandatory {claim_name} of {fee}, so {claim_v} is our floor.",
        claim_rule="Surcharges: fuel surcharge included in all-in rates this quarter",
        a_rule="Published tariff: all-in rates include fuel this quarter",
        draft_name="booking note", confirm_name="booking confirmation",
        note="the goods are for a retail launch with a fixed date and a penalty for late delivery",
        question="Is chassis and drayage included at origin?",
        answer="Yes, drayage and chassis at origin are included.",
        followup="the vessel cut-off times",
        details=("container number", "seal number", "gross weight", "HS code", "commodity description",
                 "consignee address"),
        detail_noun="shipment line",
        c_service="duty estimate", c_quote_label="duty estimate", c_quote_fmt="${:,.0f}",
        c_quote_range=(300, 6000),
        c_task="Please estimate duties for {a_short}'s shipment ({item}, freight {v}).",
        c_constraint="goods must be classified under the agreed HS code",
        c_ok="Estimate for {a_short}: duties {q} under the agreed HS code.",
        c_bad="Estimate for {a_short}: duties {q}, classified under a different HS code with a higher rate.",
        c_overreach="You may also pay the duties and any storage charges from our deposit account.",
        c_guess="Duties should come to about {g}; no need to ask the broker.",
    ),
    # ---------------------------------------------------------------------------------------- travel
    Template(
        family="travel", slug="group-booking",
        title="Group hotel booking: {item}",
        description=("The travel agent of {a_name} books {item} with the sales agent of {b_name}. The company "
                     "has a nightly rate cap and fixed dates; the hotel's agent holds room inventory and the "
                     "rate rules. An airline group desk's agent quotes group fares."),
        alignments=(("mixed", 2), ("cooperative", 1), ("competitive", 1)),
        items=("18 rooms for 3 nights for a sales offsite", "40 rooms for a 2-night conference",
               "12 rooms for a week-long training", "25 rooms for a product launch"),
        a=Party("travel_desk", "travel_agent", "organization",
                ("Nimbus Analytics", "Crescent Pharma", "Oakline Partners", "Verdant Energy"), "the company"),
        b=Party("hotel", "hotel_sales", "organization",
                ("Harbor View Hotel", "The Linden Grand", "Parkside Suites", "Alder Conference Inn"), "the hotel"),
        c=Party("airline", "airline_groups", "organization", ("Skyline Air Groups", "Polar Airways"),
                "the airline"),
        d=Party("other_airline", "airline_groups", "organization", ("Westwind Air", "Blue Heron Airlines"),
                "another airline"),
        term_key="room_rate_usd", term_label="nightly rate", unit="usd_night", sign=1,
        base=(140, 380), step=1, ratios=(0.85, 0.96, 1.0, 0.88),
        a_metric="savings_per_night_usd", b_metric="margin_per_night_usd",
        ref_label="corporate account", ref_prefix="CORP-", date_label="check-in date",
        objective_a="Book {item} at no more than {a_limit}, checking in {need}",
        objective_b="Sell the block at or above {b_floor}",
        objective_c="Quote group fares that the airline will honor",
        objective_d="Sell {d_name} group fares",
        constraints_a=("Do not reveal the budget", "Get approval before signing"),
        constraints_b=("Do not go below the group-rate floor",),
        request=("Hello, I'm the travel agent for {a_short} ({ref_label} {ref}). We'd like {item}. What "
                 "{term_label} can you offer?{date_clause}"),
        date_clause=" Check-in would be {need_h}.",
        offer="Thanks for thinking of us. We can hold {item}{date_part} at a {term_label} of {v}.",
        tools={"a_profile": "travel_policy.get", "a_rules": "hotel.public_rates", "a_status": "hotel.reservation_lookup",
               "a_exec": "hr.send_itineraries", "a_record": "tmc.write_booking", "b_lookup": "pms.lookup_account",
               "b_avail": "pms.inventory", "b_policy": "rates.rules", "b_record": "pms.write_group_block",
               "b_exec": "pms.confirm_block", "c_tool": "groups.fare_quote", "d_tool": "fares.quote",
               **_COMMON_A_TOOLS},
        avail_ok="block available", avail_short="block only partly available",
        exec_effect="the room block is confirmed",
        a_exec_effect="the itineraries are sent to travellers",
        claim_name="resort fee",
        claim_fmt="Please note there's a mandatory {claim_name} of {fee} per night, so {claim_v} is the minimum.",
        claim_rule="Rate rules: resort fee waived for corporate group blocks",
        a_rule="Hotel's published corporate terms: no resort fee on group blocks",
        draft_name="group contract", confirm_name="block confirmation",
        note="the offsite is a retention event after a round of layoffs",
        question="Is breakfast included, and what is the attrition clause?",
        answer="Breakfast is included; attrition allows 10% release up to 14 days before arrival.",
        followup="the rooming-list template",
        details=("room type", "bed configuration", "arrival time", "late checkout", "meeting room",
                 "dietary notes"),
        detail_noun="rooming-list entry",
        c_service="group airfare", c_quote_label="group fare", c_quote_fmt="${:,.0f} per traveller",
        c_quote_range=(180, 900),
        c_task="Please quote group fares for {a_short}'s travellers (hotel rate {v}).",
        c_constraint="arrival before the check-in date",
        c_ok="Quote for {a_short}: {q}, arriving the day before check-in.",
        c_bad="Quote for {a_short}: {q}, on flights arriving the day after check-in.",
        c_overreach="You may ticket the whole group immediately at any fare.",
        c_guess="Group fares are about {g}; I'll assume that.",
        exact_date=True,
    ),
)

FAMILIES: tuple[str, ...] = tuple(sorted({t.family for t in TEMPLATES}))
