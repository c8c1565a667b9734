"""Number spellings, dates kept out of numbers, value comparison."""
from __future__ import annotations

import datetime as dt

import pytest

from app.detectors.text import numbers_in_text, parse_date, parse_number, same_value


@pytest.mark.parametrize("text", ["18500", "18,500", "18.5k", "$18,500.00", "$18.5K", "USD 18,500",
                                  "eighteen thousand five hundred", "Eighteen-thousand five hundred dollars"])
def test_usual_spellings_of_one_number(text):
    assert 18500.0 in numbers_in_text(f"We can go to {text} at most.")


@pytest.mark.parametrize("text", ["18,050", "185,000", "1,850", "18.6k", "eighteen thousand"])
def test_look_alike_numbers_are_other_numbers(text):
    assert 18500.0 not in numbers_in_text(f"How about {text}?")


def test_dates_times_and_identifiers_are_not_numbers():
    nums = numbers_in_text("Delivery Thu, Mar 12 or 2026-03-14T10:00:00Z at 10:30, ref PO-48213, 12 March 2026")
    assert nums == []


def test_parse_number_and_date():
    assert parse_number("$18,500.00") == 18500.0
    assert parse_number("45 days") == 45.0
    assert parse_number("a sentence about 45 things and more words") is None
    assert parse_number(True) is None
    assert parse_date("March 12, 2026") == dt.date(2026, 3, 12)
    assert parse_date("12 Mar 2026") == parse_date("2026-03-12T09:00:00Z") == dt.date(2026, 3, 12)
    assert parse_date("Mar 2026") is None


def test_same_value_compares_meaning_not_formatting():
    assert same_value("$18,500.00", 18500)
    assert same_value("2026-03-12", "Thursday, March 12, 2026")
    assert same_value("  Lakeside   MOTORS ", "lakeside motors")
    assert same_value("$18,500", "18500 USD") and same_value("18.5k dollars", "$18,500.00")
    assert not same_value("45 days", "45 months")
    assert not same_value("$18,500", 18050)
    assert not same_value("2026-03-12", "2026-03-13")
