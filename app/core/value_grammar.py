"""The grammar of answer values: one regular expression per honest format, and its reader.

Shared by `values.parse_value` (the whole string is one value) and `value_tokens.tokens` (values
found as whole tokens in free text), so both paths accept exactly the same spellings. Digits are
ASCII `0-9` only: other scripts' digits (`٢٣٣`, `２３３`) are not read as values anywhere.
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import Any

MONTHS = {
    name: i
    for i, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sept", "sep"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
WEEKDAYS = {
    name: i
    for i, names in enumerate(
        (
            ("monday", "mon"),
            ("tuesday", "tues", "tue"),
            ("wednesday", "wed"),
            ("thursday", "thurs", "thur", "thu"),
            ("friday", "fri"),
            ("saturday", "sat"),
            ("sunday", "sun"),
        )
    )
    for name in names
}
# Currency marks and the currency each names: a mark beside an amount says which money it is,
# so an amount in another currency than the expected one is another amount (values.check).
CURRENCY_CODES = (
    "usd", "eur", "gbp", "chf", "cad", "aud", "jpy", "cny", "inr", "mxn", "nzd", "sek", "nok",
    "dkk", "hkd", "sgd",
)  # fmt: skip
CURRENCY_WORDS = ("dollars", "dollar", "euros", "euro", "pounds", "pound", "yen")
_CURRENCY_OF = {
    "$": "USD",
    "us$": "USD",
    "€": "EUR",
    "£": "GBP",
    "¥": "JPY",
    "₹": "INR",
    "ca$": "CAD",
    "c$": "CAD",
    "a$": "AUD",
    "au$": "AUD",
    "dollars": "USD",
    "dollar": "USD",
    "euros": "EUR",
    "euro": "EUR",
    "pounds": "GBP",
    "pound": "GBP",
    "yen": "JPY",
    **{code: code.upper() for code in CURRENCY_CODES},
}
DEFAULT_CURRENCY = "USD"  # an amount written without a mark is in the environment's currency
ZONE = "UTC"  # every environment's clock (the session clock) is UTC


def _alt(words: object) -> str:
    return "|".join(sorted(map(re.escape, words), key=len, reverse=True))  # type: ignore[call-overload]


# A value ends where no word character follows, and no joiner (. - @ + ') that is itself
# followed by a word character: `233.00q`, `233.00.5`, `E90110-x` and `a@b.org_x` are glued.
# A colon between digits glues too (`x15:30`). A possessive `'s` does not ("E90110's boss").
END = r"(?!\w|[.\-@+]\w|(?<=[0-9]):[0-9]|['’](?!s(?!\w))\w)"
_MONTH = rf"(?:{_alt(MONTHS)})\.?"
_WEEKDAY = rf"(?:{_alt(WEEKDAYS)})\.?,?\s+"
_ORD = r"(?:st|nd|rd|th)?"
_WORD_END = r"(?![^\W\d_])"  # a month or weekday name is a whole word

DATE_FORMS = {
    "iso": r"(?P<y>[0-9]{4})-(?P<m>[0-9]{1,2})-(?P<d>[0-9]{1,2})",
    "slash": r"(?P<y>[0-9]{4})/(?P<m>[0-9]{1,2})/(?P<d>[0-9]{1,2})",
    # 03/17/2026 (US) or 17/03/2026: read only when one calendar date fits (read_date)
    "us": r"(?P<a>[0-9]{1,2})/(?P<b>[0-9]{1,2})/(?P<y>[0-9]{4})",
    "mdy": rf"(?:(?P<wd>{_WEEKDAY}))?(?P<mon>{_MONTH}){_WORD_END}\s*"
    rf"(?P<d>[0-9]{{1,2}}){_ORD},?\s+(?P<y>[0-9]{{4}})",
    "dmy": rf"(?:(?P<wd>{_WEEKDAY}))?(?P<d>[0-9]{{1,2}}){_ORD}\s+(?:of\s+)?"
    rf"(?P<mon>{_MONTH}){_WORD_END},?\s+(?P<y>[0-9]{{4}})",
}
_AMPM = r"(?P<ap>[ap])\.?m\b\.?"
# A zone suffix that names the environment's own zone (UTC) and so leaves the value alone:
# `Z`, `+00:00`, `UTC`, `GMT`, `(UTC)`, `local time`. Any other zone is not one of these
# spellings: the value is refused (values._why_not says why).
_ZONE = (
    r"(?P<tz>Z|\s?[+-]00:?00|\s*\(?(?:UTC|GMT)(?:\s?[+-]0{1,2}(?::?00)?)?\)?"
    r"|\s*\(?local\s+time\)?)"
)
TIME_FORMS = {
    "hm": rf"(?P<h>[0-9]{{1,2}}):(?P<mi>[0-9]{{2}})(?::(?P<s>[0-9]{{2}}))?(?:\s*{_AMPM})?"
    rf"{_ZONE}?",
    "h_ampm": rf"(?P<h>[0-9]{{1,2}})\s*{_AMPM}{_ZONE}?",
}
_GROUPS = re.compile(r"\(\?P<\w+>")


def _anonymous(pattern: str) -> str:
    return _GROUPS.sub("(?:", pattern)


DATE = "(?:" + "|".join(_anonymous(p) for p in DATE_FORMS.values()) + ")"
TIME = "(?:" + "|".join(_anonymous(p) for p in TIME_FORMS.values()) + ")"
DATETIME_SEP = r"(?:T|\s*,?\s*(?:(?:at|@)\s*)?)"
DATETIME = rf"(?P<date>{DATE}){DATETIME_SEP}(?P<time>{TIME})"
# A day without a year ("May 7", "7th of May"): not a date value, but not a number either.
MONTHDAY = (
    rf"(?:{_WEEKDAY})?(?:{_MONTH}){_WORD_END}\s*[0-9]{{1,2}}{_ORD}(?![0-9])"
    rf"|[0-9]{{1,2}}{_ORD}\s+(?:of\s+)?(?:{_MONTH}){_WORD_END}"
)

_NUM = r"(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]+)?"
_CODE = rf"(?:{_alt(CURRENCY_CODES)})(?![^\W\d_])"
_CUR_AFTER = rf"(?:{_alt(CURRENCY_CODES + CURRENCY_WORDS)})(?![^\W\d_])"
SIGNS = "$€£¥₹"
_SIGN = rf"(?:(?:US|CA|AU|C|A)\$|[{SIGNS}])"
# amount: a number with a currency sign or code, or a fraction, or thousands separators.
AMOUNT_FORMS = {
    "sign": rf"(?:-{_SIGN}\s?|{_SIGN}\s?-?){_NUM}(?:\s?{_CODE})?",
    "code_first": rf"{_CODE}\s?{_SIGN}?-?{_NUM}",
    "code_after": rf"-?{_NUM}\s?(?:[{SIGNS}]|{_CUR_AFTER})",
    "money_like": r"-?(?:[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?|[0-9]+\.[0-9]+)",
}
AMOUNT = "(?:" + "|".join(AMOUNT_FORMS.values()) + ")"
NUMBER = rf"-?{_NUM}"
ORDINAL = r"[0-9]+(?:st|nd|rd|th)"
# An id: groups of letters and digits joined by - or _, with at least one digit; a group is
# letters then digits (E90110, sg160), a capitalised code (238UP9, 10A), or letters (INV).
_ID_GROUP = r"(?:[A-Za-z]*[0-9]+|[A-Z0-9]+|[A-Za-z]+)"
ID = rf"#?(?=[\w\-]*[0-9]){_ID_GROUP}(?:[-_]{_ID_GROUP})*"
ID_WHOLE = r"#?[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*"  # a submitted id: any one such token
EMAIL = r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)+"
WORD = r"[^\W\d_]+(?:[.'’\-][^\W\d_]+)*"
BOOLEANS = {"yes": True, "y": True, "true": True, "no": False, "n": False, "false": False}
NUMBER_WORDS = frozenset(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty "
    "ninety hundred thousand million dozen".split()
)

_DATE_RES = [re.compile(p, re.I) for p in DATE_FORMS.values()]
_CURRENCY_MARK = re.compile(
    rf"(?:US|CA|AU|C|A)\$|[{SIGNS}]|(?<![^\W\d_])(?:{_alt(CURRENCY_CODES + CURRENCY_WORDS)})"
    r"(?![^\W\d_])",
    re.I,
)
_TIME_RES = [re.compile(p, re.I) for p in TIME_FORMS.values()]
_DATETIME_RE = re.compile(DATETIME, re.I)


class Unreadable(ValueError):
    """The text has the shape of a value but is not one (2026-02-30, 25:00, wrong weekday)."""


def read_date(text: str) -> dt.date:
    for pattern in _DATE_RES:
        m = pattern.fullmatch(text)
        if not m:
            continue
        groups = m.groupdict()
        if groups.get("a"):
            return _month_day_or_day_month(
                text, int(groups["y"]), int(groups["a"]), int(groups["b"])
            )
        month = MONTHS[groups["mon"].rstrip(".").lower()] if groups.get("mon") else int(groups["m"])
        try:
            day = dt.date(int(groups["y"]), month, int(groups["d"]))
        except ValueError as e:
            raise Unreadable(f"'{text}' is not a calendar date") from e
        weekday = (groups.get("wd") or "").rstrip(" ,.\t\n").lower()
        if weekday and WEEKDAYS[weekday] != day.weekday():
            raise Unreadable(f"'{text}': {day.isoformat()} is a {day.strftime('%A')}")
        return day
    raise Unreadable(f"'{text}' is not a date")


def _month_day_or_day_month(text: str, year: int, a: int, b: int) -> dt.date:
    """`a/b/year`: the one calendar date it can be (month/day or day/month), else Unreadable."""
    readings = set()
    for month, day in ((a, b), (b, a)):
        try:
            readings.add(dt.date(year, month, day))
        except ValueError:
            continue
    if not readings:
        raise Unreadable(f"'{text}' is not a calendar date")
    if len(readings) > 1:
        first, second = sorted(readings, key=lambda d: d.month != a)
        raise Unreadable(
            f"'{text}' is ambiguous: {first.isoformat()} (month first) or {second.isoformat()} "
            "(day first); write 2026-03-17 or March 17, 2026"
        )
    return readings.pop()


def read_currency(text: str) -> str | None:
    """The currency an amount's spelling names (`US$`, `€`, `JPY`, `dollars`), None when it
    names none; Unreadable when it names two (`€5 USD`)."""
    named = {_CURRENCY_OF[m.group(0).lower()] for m in _CURRENCY_MARK.finditer(text)}
    if len(named) > 1:
        raise Unreadable(f"'{text}' names two currencies: {' and '.join(sorted(named))}")
    return named.pop() if named else None


def read_time(text: str) -> dt.time:
    for pattern in _TIME_RES:
        m = pattern.fullmatch(text)
        if not m:
            continue
        g = m.groupdict()
        hour, minute, second = int(g["h"]), int(g.get("mi") or 0), int(g.get("s") or 0)
        if g.get("ap"):
            if not 1 <= hour <= 12:
                raise Unreadable(f"'{text}': {hour} is not an hour on a 12-hour clock")
            hour = hour % 12 + (12 if g["ap"].lower() == "p" else 0)
        try:
            return dt.time(hour, minute, second)
        except ValueError as e:
            raise Unreadable(f"'{text}' is not a time of day") from e
    raise Unreadable(f"'{text}' is not a time")


def read_datetime(text: str) -> dt.datetime:
    m = _DATETIME_RE.fullmatch(text)
    if not m:
        raise Unreadable(f"'{text}' is not a date and time")
    return dt.datetime.combine(read_date(m.group("date")), read_time(m.group("time")))


def read_monthday(text: str) -> tuple[int, int]:
    """(month, day) of a day written without a year."""
    month = next(MONTHS[w] for w in re.findall(r"[a-z]+", text.lower()) if w in MONTHS)
    day = int(re.findall(r"[0-9]+", text)[0])
    if not 1 <= day <= 31:
        raise Unreadable(f"'{text}' is not a day of the month")
    return month, day


def read_decimal(text: str) -> Decimal:
    """The number in an amount or number spelling: signs, currency and separators dropped."""
    negative = "-" in text
    digits = re.search(r"[0-9][0-9,]*(?:\.[0-9]+)?", text)
    if digits is None:
        raise Unreadable(f"'{text}' has no digits")
    value = Decimal(digits.group(0).replace(",", ""))
    return -value if negative else value


def read_value(kind: str, text: str) -> Any:
    """The value of `text`, a spelling of `kind` (Decimal, date, time, datetime, (month, day),
    or casefolded str for an id, email or word)."""
    if kind in ("amount", "number"):
        return read_decimal(text)
    if kind == "date":
        return read_date(text)
    if kind == "time":
        return read_time(text)
    if kind == "datetime":
        return read_datetime(text)
    if kind == "monthday":
        return read_monthday(text)
    if kind == "id":
        return text.lstrip("#").casefold()
    return text.casefold()
