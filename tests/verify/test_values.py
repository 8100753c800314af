"""Answer values: every accepted spelling reads as its value, everything else is NotOneValue
with a readable reason, and the tokenizer finds values only as whole tokens."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.values import (
    KINDS,
    NotOneValue,
    answers_equal,
    check,
    describe,
    parse_answer,
    parse_value,
    tokens,
)

D = Decimal
DAY = dt.date(2026, 5, 7)
TEN = dt.time(10, 0)
AT_TEN = dt.datetime(2026, 5, 7, 10, 0)

ACCEPTED = [
    (
        "amount",
        [
            "233",
            "233.00",
            "$233.00",
            "233.00 USD",
            "USD 233",
            "233 dollars",
            "**233.00**",
            "233.00.",
            "'233.00'",
            233,
            233.0,
            "$ 233",
            "€233",
            "233.00 EUR",
        ],
        D("233"),
    ),
    ("amount", ["1,234.50", "$1,234.50", "1234.5", "USD 1,234.50"], D("1234.5")),
    ("amount", ["€12.5", "12.50", "£12.50"], D("12.5")),
    ("amount", ["-5.00", "$-5", "-$5.00"], D("-5")),
    ("number", ["65", "65.0", 65, "`65`", "65."], D(65)),
    ("number", ["1,000", "1000", 1000.0], D(1000)),
    ("id", ["E90110", "e90110", "#E90110", "**E90110**", "E90110."], "e90110"),
    ("id", ["INV-2026-9120", "inv-2026-9120", "#INV-2026-9120"], "inv-2026-9120"),
    ("id", ["22100601", 22100601], "22100601"),
    (
        "date",
        [
            "2026-05-07",
            "2026/05/07",
            "2026/5/7",
            "May 7, 2026",
            "7 May 2026",
            "May 7 2026",
            "Thursday, May 7, 2026",
            "Thu May 7, 2026",
            "May 7th, 2026",
            "7th of May 2026",
            "Sept. 7, 2026".replace("Sept", "May"),
            "may 7, 2026",
            "MAY 7, 2026",
        ],
        DAY,
    ),
    ("time", ["10:00", "10:00:00", "10 am", "10:00 AM", "10am", "10 a.m.", "10AM"], TEN),
    ("time", ["22:30", "10:30 pm", "10:30pm"], dt.time(22, 30)),
    ("time", ["12 am", "00:00"], dt.time(0, 0)),
    ("time", ["12 pm", "12:00"], dt.time(12, 0)),
    (
        "datetime",
        [
            "2026-05-07 10:00",
            "2026-05-07 at 10:00",
            "2026-05-07T10:00:00",
            "2026-05-07T10:00",
            "May 7, 2026 at 10 am",
            "Thursday, May 7, 2026, 10:00",
            "2026-05-07 @ 10:00",
            "7 May 2026 10:00 AM",
        ],
        AT_TEN,
    ),
    (
        "email",
        ["jake.morrow@gmail.com", "Jake.Morrow@Gmail.com", "<jake.morrow@gmail.com>".strip("<>")],
        "jake.morrow@gmail.com",
    ),
    (
        "name",
        ["Anna Weber", "anna  weber", '"Anna Weber"', "Anna Weber.", "**Anna Weber**"],
        "anna weber",
    ),
    ("text", ["Fraud", "fraud.", " FRAUD "], "fraud"),
    ("boolean", ["yes", "Yes", "y", "true", "TRUE", True], True),
    ("boolean", ["no", "N", "false", False], False),
]


@pytest.mark.parametrize("kind, raw, value", [(k, r, v) for k, raws, v in ACCEPTED for r in raws])
def test_accepted_spellings_read_as_their_value(kind, raw, value):
    assert parse_value(kind, raw) == value
    assert answers_equal(kind, value, parse_value(kind, raw))


REJECTED = [
    ("amount", "233.00 or 234.00", "two amounts: 233.00 and 234.00"),
    ("amount", "233.00, 234.00, 235.00, 236.00", "4 amounts"),
    ("amount", "q233.00q", "'q233.00q' is not an amount"),
    ("amount", "٢٣٣", "only the digits 0-9"),
    ("amount", "２３３", "only the digits 0-9"),
    ("amount", "The refund is 233.00", "with other text around it"),
    ("amount", "two hundred", "'two hundred' is not an amount"),
    ("amount", True, "a boolean"),
    ("amount", ["233.00"], "a list is not one value"),
    ("amount", "", "empty"),
    ("amount", "-$-5", "$-5 with other text around it"),
    ("number", "65 employees", "with other text around it"),
    ("number", "sixty-five", "is not a number"),
    ("number", "65 or 66", "two numbers"),
    ("number", "abc65def", "glued"),
    ("number", float("nan"), "is not a number"),
    ("id", "E90110, E90111", "two ids"),
    ("id", "E90110.x", "glued"),
    ("date", "2026-05-07 10:00", "is a datetime, not a date"),
    ("name", 7, "no letters"),
    ("date", "05/07/2026", "ambiguous"),
    ("date", "May 7", "not a date"),
    ("date", "2026-02-30", "not a calendar date"),
    ("date", "Friday, May 7, 2026", "is a Thursday"),
    ("date", "2026-05-07 or 2026-05-08", "two dates"),
    ("time", "25:00", "not a time of day"),
    ("time", "13 pm", "12-hour clock"),
    ("time", "10", "not a time"),
    ("datetime", "2026-05-07", "is a date, not a datetime"),
    ("email", "a@b.org, c@d.org", "two emails"),
    ("name", "1234", "no letters"),
    ("boolean", "maybe", "not yes/no"),
    ("boolean", 1, "not a boolean"),
    ("vibes", "x", "unknown answer kind"),
]


@pytest.mark.parametrize("kind, raw, reason", REJECTED)
def test_rejections_say_why(kind, raw, reason):
    with pytest.raises(NotOneValue) as e:
        parse_value(kind, raw)
    assert reason in e.value.reason


def test_sub_cent_amounts_are_other_amounts():
    assert parse_value("amount", "233.004") != parse_value("amount", "233.00")
    assert parse_value("amount", "233.000") == parse_value("amount", "233.00")
    assert describe("amount", parse_value("amount", "233")) == "233.00"


def test_lists_are_sets():
    many = parse_answer("amount", ["233.00", "$1,234.50", "233"], many=True)
    assert many == frozenset({D("233"), D("1234.5")})
    assert parse_answer("amount", "233.00, 1,234.50 and $5", many=True) == frozenset(
        {D(233), D("1234.5"), D(5)}
    )
    assert parse_answer("date", "May 7, 2026\nMay 8, 2026", many=True) == {
        DAY,
        dt.date(2026, 5, 8),
    }
    assert parse_answer("name", "Anna Weber, Jonas Vogel", many=True) == {
        "anna weber",
        "jonas vogel",
    }
    for raw, reason in (
        ("233.00 or 234.00", "'or'"),
        ("233.00 plus 234.00", "'plus' between values"),
        (["233.00", ["234"]], "itself a list"),
        (["233.00", "x"], "list item 'x'"),
        (233, "a list of amounts is expected"),
    ):
        with pytest.raises(NotOneValue) as e:
            parse_answer("amount", raw, many=True)
        assert reason in e.value.reason
    assert not answers_equal("amount", frozenset({D(1)}), D(1))


def test_check_gives_readable_verdicts():
    assert check("datetime", "2026-05-07 10:00", "2026-05-07 at 10:00").ok
    assert check("amount", "233.00", "$233").ok
    wrong = check("amount", "233.00", "234")
    assert not wrong.ok and wrong.reason == "submitted 234.00, expected 233.00"
    assert "two amounts" in check("amount", "233.00", "233.00 or 234.00").reason
    listed = check("name", "Anna Weber", "Anna Weber and Jonas Vogel")
    assert not listed.ok and "a list of names" in listed.reason
    assert check("name", "Smith, John", "smith, john").ok  # the expected has the comma
    assert check("id", ["E1", "E2"], ["e2", "#E1", "E1"]).ok
    assert not check("id", ["E1", "E2"], ["E1"]).ok


def test_tokens_are_whole_and_typed():
    text = "Your next appointment is on 2026-05-07 at 10:00; refund $1,234.50 for E90110's order."
    found = {(t.kind, t.value) for t in tokens(text) if t.kind != "word"}
    assert found == {("datetime", AT_TEN), ("amount", D("1234.5")), ("id", "e90110")}
    glued = "q233.00q _Anna Weber_ qE90110q abc123def ٢٣٣ 233.00.5 E90110_"
    kinds = [(t.kind, t.text) for t in tokens(glued)]
    assert ("amount", "233.00") not in kinds and ("id", "E90110") not in kinds
    assert [t for t in kinds if t[0] == "opaque"] == [
        ("opaque", "q233.00q"),
        ("opaque", "_Anna"),
        ("opaque", "Weber_"),
        ("opaque", "qE90110q"),
        ("opaque", "abc123def"),
        ("opaque", "٢٣٣"),
        ("opaque", "233.00.5"),
        ("opaque", "E90110_"),
    ]
    # Zero-width characters glue rather than separate.
    assert tokens("q\u200b233.00\u200bq")[0].kind == "opaque"


# --- properties ----------------------------------------------------------------------------------
cents = st.integers(min_value=0, max_value=10**9)
AMOUNT_FORMATS = [
    lambda c: f"{c // 100}.{c % 100:02d}",
    lambda c: f"${c // 100:,}.{c % 100:02d}",
    lambda c: f"{c // 100:,}.{c % 100:02d} USD",
    lambda c: f"USD {c // 100}.{c % 100:02d}",
    lambda c: f"€{c // 100}.{c % 100:02d}",
    lambda c: f"**{c // 100}.{c % 100:02d}**",
]
GLUE = st.sampled_from(["q", "_", "x.", "é", "٣", ".5", "-x", "@x", "q9"])


@settings(max_examples=200, deadline=None)
@given(cents, st.sampled_from(range(len(AMOUNT_FORMATS))))
def test_any_amount_rendering_parses_back_equal(c, i):
    value = D(c) / 100
    text = AMOUNT_FORMATS[i](c)
    assert parse_value("amount", text) == value
    whole = [t for t in tokens(f"The refund is {text}.") if t.kind == "amount"]
    assert [t.value for t in whole] == [value]


@settings(max_examples=200, deadline=None)
@given(cents, GLUE, GLUE)
def test_glued_amounts_never_parse_nor_tokenize(c, left, right):
    text = f"{c // 100}.{c % 100:02d}"
    glued = f"{left}{text}{right}"
    with pytest.raises(NotOneValue):
        parse_value("amount", glued)
    assert all(t.kind == "opaque" or t.value != D(c) / 100 for t in tokens(glued))


DATE_FORMATS = [
    lambda d: d.isoformat(),
    lambda d: d.strftime("%Y/%m/%d"),
    lambda d: f"{d:%B} {d.day}, {d.year}",
    lambda d: f"{d.day} {d:%B} {d.year}",
    lambda d: f"{d:%b} {d.day} {d.year}",
    lambda d: f"{d:%A}, {d:%B} {d.day}, {d.year}",
]
TIME_FORMATS = [
    lambda t: t.strftime("%H:%M"),
    lambda t: t.strftime("%H:%M:%S"),
    lambda t: f"{(t.hour % 12) or 12}:{t.minute:02d} {'PM' if t.hour >= 12 else 'AM'}",
]
dates = st.dates(min_value=dt.date(1900, 1, 1), max_value=dt.date(2999, 12, 31))
times = st.times().map(lambda t: t.replace(second=0, microsecond=0))
SEPS = [" ", " at ", "T", ", ", " @ "]


@settings(max_examples=300, deadline=None)
@given(
    dates,
    times,
    st.sampled_from(range(len(DATE_FORMATS))),
    st.sampled_from(range(len(TIME_FORMATS))),
    st.sampled_from(SEPS),
)
def test_any_datetime_rendering_parses_back_equal(d, t, di, ti, sep):
    ds, ts = DATE_FORMATS[di](d), TIME_FORMATS[ti](t)
    assert parse_value("date", ds) == d
    assert parse_value("time", ts) == t
    if sep == "T" and di != 0:
        sep = " "  # the ISO T joins ISO dates only, as a person writes it
    both = f"{ds}{sep}{ts}"
    assert parse_value("datetime", both) == dt.datetime.combine(d, t)
    found = [tk.value for tk in tokens(f"It is on {both}.") if tk.kind == "datetime"]
    assert found == [dt.datetime.combine(d, t)]


@settings(max_examples=200, deadline=None)
@given(dates, GLUE)
def test_glued_dates_never_parse(d, glue):
    with pytest.raises(NotOneValue):
        parse_value("date", f"{glue}{d.isoformat()}{glue}")


ids = st.from_regex(r"[A-Z]{1,3}[0-9]{2,6}(-[0-9]{2,4})?", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(ids, st.sampled_from(["{}", "#{}", "**{}**", "{}.", "'{}'"]), st.booleans())
def test_any_id_rendering_parses_back_equal(ident, shape, lower):
    raw = shape.format(ident.lower() if lower else ident)
    assert parse_value("id", raw) == ident.casefold()
    assert [t.value for t in tokens(f"Order {raw} is paid") if t.kind == "id"] == [ident.casefold()]


@settings(max_examples=200, deadline=None)
@given(ids, st.sampled_from(["q", "x", "_"]))
def test_glued_ids_are_never_the_id(ident, glue):
    glued = f"{glue}{ident}{glue}"
    try:
        assert parse_value("id", glued) != ident.casefold()
    except NotOneValue:
        pass
    assert all(t.value != ident.casefold() for t in tokens(glued))


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=-(10**12), max_value=10**12), st.sampled_from(["{}", "{:,}", "{}.0"]))
def test_any_number_rendering_parses_back_equal(n, shape):
    assert parse_value("number", shape.format(n)) == n
    found = tokens(f"There are {shape.format(n)} rows.")
    assert [t.value for t in found if t.kind in ("number", "amount")] == [D(n)]


def test_every_kind_has_an_accepted_case():
    assert {k for k, _, _ in ACCEPTED} == set(KINDS)
