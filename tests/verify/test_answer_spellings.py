"""Answers as people write them: every unambiguous spelling of the expected value is accepted,
every ambiguous or different one is refused with a reason (`values.check`, the scorer of
`submit_answer`). Table-driven over answer kinds; the list in docs/verification.md."""

from __future__ import annotations

import pytest

from app.core.values import check, tokens

# (kind, expected, spellings a person writes for it)
HONEST = [
    (
        "datetime",
        "2026-03-17 11:00",
        [
            "2026-03-17T11:00:00Z",
            "2026-03-17T11:00:00+00:00",
            "2026-03-17T11:00+0000",
            "2026-03-17 11:00 UTC",
            "2026-03-17 11:00 GMT",
            "2026-03-17 11:00 (UTC)",
            "2026-03-17 11:00 local time",
            "03/17/2026 11:00 AM",
            "03/17/2026 11:00",
            "3/17/2026 11 am",
            "17/03/2026 11:00",
            "March 17, 2026 at 11:00 AM UTC",
        ],
    ),
    ("time", "14:00", ["14:00 UTC", "2 PM UTC", "2:00 pm local time", "14:00Z", "14:00 +00:00"]),
    ("date", "2026-03-17", ["03/17/2026", "3/17/2026", "17/03/2026", "2026-03-17"]),
    ("date", "2026-05-05", ["05/05/2026"]),  # both readings are one date
    (
        "amount",
        "72.99",
        ["US$72.99", "USD 72.99", "72.99 USD", "$72.99", "$ 72.99", "72.99 dollars", "72.99"],
    ),
    ("amount", "€72.99", ["€72.99", "72.99 EUR", "EUR 72.99", "72.99 euros", "72.99"]),
    ("id", ["E1", "E2"], ["- E1\n- E2", "* E1\n* E2", "1. E1\n2. E2", "1) E1\n2) E2"]),
    ("id", ["E1", "E2"], ["E1 / E2", "E1/E2", "E1 | E2", "E1 & E2", '["E1", "E2"]', "E1, E2"]),
    (
        "name",
        ["Anna Weber", "Jonas Vogel"],
        [
            "- Anna Weber\n- Jonas Vogel",
            "1. Anna Weber\n2. Jonas Vogel",
            "Anna Weber / Jonas Vogel",
            "Anna Weber | Jonas Vogel",
            "Anna Weber & Jonas Vogel",
            '["Anna Weber", "Jonas Vogel"]',
        ],
    ),
    (
        "amount",
        ["233.00", "5.00"],
        ["1. 233.00\n2. 5.00", "- $233.00\n- $5.00", "233.00 / 5.00", "233.00 | 5.00"],
    ),
    ("amount", ["233.00", "5.00"], ['["233.00", "5.00"]', "233.00 & 5.00"]),
    (
        "date",
        ["2026-03-17", "2026-03-18"],
        ["03/17/2026 & 03/18/2026", '["2026-03-17", "2026-03-18"]'],
    ),
    ("name", "Yara Mansour", ["Yara Mansour", "Yara Mansour!", "**Yara Mansour**"]),
]


@pytest.mark.parametrize(
    "kind, expected, submitted", [(k, e, s) for k, e, spellings in HONEST for s in spellings]
)
def test_honest_spellings_are_accepted(kind, expected, submitted):
    verdict = check(kind, expected, submitted)
    assert verdict.ok, verdict.reason


# (kind, expected, a spelling of another value or of no one value, what the reason says)
REFUSED = [
    ("amount", "72.99", "€72.99", "in EUR; the answer is in USD"),
    ("amount", "72.99", "72.99 JPY", "in JPY"),
    ("amount", "72.99", "¥72.99", "in JPY"),
    ("amount", "72.99", "72.99 euros", "in EUR"),
    ("amount", "72.99", "CA$72.99", "in CAD"),
    ("amount", "€72.99", "$72.99", "in USD; the answer is in EUR"),
    ("amount", "72.99", "€72.99 USD", "two currencies"),
    ("amount", ["72.99", "5.00"], ["72.99", "€5.00"], "in EUR"),
    ("name", "Yara Mansour", "Yara Mansour?", "doubt"),
    ("name", "Yara Mansour", "Yara Mansour (?)", "doubt"),
    ("text", "cancelled", "cancelled?!", "doubt"),
    ("text", "cancelled", "¿cancelled", "doubt"),
    ("boolean", True, "yes?", "doubt"),
    ("id", ["E1", "E2"], ["E1", "E2?"], "doubt"),
    ("datetime", "2026-03-17 11:00", "2026-03-17T11:00:00+02:00", "in UTC"),
    ("datetime", "2026-03-17 11:00", "2026-03-17 11:00 EST", "in UTC"),
    ("time", "14:00", "14:00 CET", "in UTC"),
    ("time", "14:00", "14:00 UTC+2", "in UTC"),
    ("date", "2026-05-07", "05/07/2026", "ambiguous"),
    ("date", "2026-03-17", "02/30/2026", "not a calendar date"),
    ("name", "Yara Mansour", "Yara Mansour | Omar Haddad", "a list of names"),
    ("id", ["E1", "E2"], "E1 or E2", "'or'"),
    ("id", ["E1", "E2"], "- E1\nE2 maybe E3", "list item"),
]


@pytest.mark.parametrize("kind, expected, submitted, reason", REFUSED)
def test_different_or_doubtful_spellings_are_refused(kind, expected, submitted, reason):
    verdict = check(kind, expected, submitted)
    assert not verdict.ok
    assert reason in verdict.reason


def test_the_text_path_reads_zone_suffixes_and_us_dates_as_one_value():
    found = tokens("Booked for 03/17/2026 11:00 AM UTC, see you then")
    assert [t.kind for t in found if t.kind not in ("word",)] == ["datetime"]
    ambiguous = tokens("on 05/07/2026")
    assert "date" not in [t.kind for t in ambiguous]  # never the expected value
    assert any(t.kind == "opaque" for t in ambiguous)  # a rival of every digit-bearing kind
    assert [t.kind for t in tokens("paid US$72.99 today")] == ["word", "amount", "word"]


@pytest.mark.parametrize(
    "message, ok",
    [
        ("The total is US$72.99.", True),
        ("The total is 72.99 USD.", True),
        ("The total is $72.99.", True),
        ("The total is €72.99.", False),
        ("The total is 72.99 JPY.", False),
        ("The total is $72.99 (about €67.10).", False),
    ],
)
def test_the_text_path_refuses_another_currency(message: str, ok: bool) -> None:
    from app.core.tasks import ExpectedAnswer
    from app.verify.answers.submitted import text_answer_match

    match = text_answer_match(ExpectedAnswer("amount", "72.99"), message)
    assert match.ok is ok, match.evidence["reason"]
