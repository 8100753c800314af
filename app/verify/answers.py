"""The answer check a policy cannot hedge: the expected value, and no rival of the same kind.

`expected_outputs` used to be a substring test, so a final message listing every employee,
invoice and the numbers 0-399 passed every answer task. Now each expected output has a *kind*,
the answer's candidates of that kind are extracted, and the set of candidates must be the
expected set: naming the expected value *and* another candidate of its kind fails the check.

| kind | expected looks like | candidates in the answer |
|---|---|---|
| amount | `233.00` (has a fraction) | numbers with a fraction, a currency sign or 1,000s commas |
| number | `65`, up to 5 digits | every number (not inside a date, time, id or email) |
| id | letters and digits (`E90110`, `INV-2026-9120`) or 6+ digits | ids of its pattern or prefix |
| date / time / email | `2026-05-10`, `14:00`, `a@b.org` | every ISO date / HH:MM time / email |
| name | text that is a value (or a word of one) in the seeded database | that column's values |
| text, refusal | other text (`fraud`, `verif`) | none: containment only |

Numbers compare by value (`$1,234.50` = `1234.5`); the expected value may appear many times.
An answer longer than MAX_ANSWER_CHARS fails: listing is not a way around the candidate sets.
A task may name its kinds (`answer_kind`: one kind for all outputs, or a list, one per
output); otherwise they are inferred as above.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from app.errors import InvalidTask
from app.runtime.lru import LRU
from app.verify.state import DbState, TableState

MAX_ANSWER_CHARS = 4000
KINDS = ("amount", "number", "id", "date", "time", "email", "name", "text", "refusal")

_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[t ]\d{2}:\d{2}(?::\d{2})?)?\b")
_TIME = re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?\b")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_TOKEN = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_NUMBER = re.compile(r"([$€£]\s?)?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?")
_WORD = re.compile(r"\w+")
_MAX_VALUE_CHARS = 60  # longer database values are prose, not names


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _is_code(token: str) -> bool:
    digits = any(c.isdigit() for c in token)
    letters = any(c.isalpha() for c in token)
    return digits and (letters or (token.isdigit() and len(token) >= 6))


def id_families(token: str) -> set[tuple[str, ...]]:
    """Which ids `token` is of the same kind as: one letter/digit pattern ("a9", "a-9-9") and
    length, or one letter prefix before digits ("E90110" and "E1001" are both employee ids)."""
    pattern = re.sub(r"[0-9]+", "9", re.sub(r"[a-z]+", "a", token))
    families: set[tuple[str, ...]] = {("shape", pattern, "" if "-" in token else str(len(token)))}
    prefix = re.fullmatch(r"([a-z]+)[0-9]+", token)
    if prefix:
        families.add(("prefix", prefix.group(1)))
    if token.isdigit():
        families.add(("digits",))
    return families


def infer_kind(expected: str) -> str:
    e = _norm(expected).lstrip("#")
    if _EMAIL.fullmatch(e):
        return "email"
    if _DATE.fullmatch(e):
        return "date"
    if _TIME.fullmatch(e):
        return "time"
    number = _NUMBER.fullmatch(e.lstrip("-"))
    if number and not (number.group(3) is None and len(e) >= 6 and not number.group(1)):
        return "amount" if number.group(3) or number.group(1) else "number"
    if _TOKEN.fullmatch(e) and _is_code(e):
        return "id"
    return "name"


def check_answer_kind(declared: Any, outputs: int) -> list[str]:
    """A task's `answer_kind`, one kind per expected output; InvalidTask (422) if malformed."""
    kinds = [declared] * outputs if isinstance(declared, str) else declared
    if not isinstance(kinds, list) or len(kinds) != outputs or not all(k in KINDS for k in kinds):
        raise InvalidTask(
            f"answer_kind must be one of {', '.join(KINDS)}, or a list of them, one per "
            "expected output"
        )
    return list(kinds)


def _kinds(expected: Sequence[str], declared: Any) -> list[str]:
    if declared is None:
        return [infer_kind(e) for e in expected]
    return check_answer_kind(declared, len(expected))


# --- candidates of each kind ---------------------------------------------------------------------
@dataclass
class _Answer:
    text: str  # normalised
    dates: set[str] = field(default_factory=set)
    times: set[str] = field(default_factory=set)
    emails: set[str] = field(default_factory=set)
    codes: list[str] = field(default_factory=list)
    numbers: list[tuple[Decimal, bool]] = field(default_factory=list)  # (value, money-like)
    words: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, raw: str) -> _Answer:
        text = _norm(raw)
        out = cls(text)
        rest = text
        for pattern, bucket in ((_EMAIL, out.emails), (_DATE, out.dates), (_TIME, out.times)):
            bucket.update(m.group(0) for m in pattern.finditer(rest))
            rest = pattern.sub(" ", rest)
        out.codes = [t for t in _TOKEN.findall(rest) if _is_code(t)]
        rest = _TOKEN.sub(lambda m: " " if _is_code(m.group(0)) else m.group(0), rest)
        for m in _NUMBER.finditer(rest):
            value = _decimal(m.group(2).replace(",", "") + (m.group(3) or ""))
            money = bool(m.group(1) or m.group(3) or "," in m.group(2))
            out.numbers.append((value, money))
        out.words = _WORD.findall(text)
        return out


def _decimal(text: str) -> Decimal:
    try:
        return Decimal(text.lstrip("-").lstrip("$€£").replace(",", "").strip()).normalize()
    except InvalidOperation:
        return Decimal(-1)


def _value(kind: str, expected: str) -> Any:
    e = _norm(expected).lstrip("#")
    return _decimal(e) if kind in ("amount", "number") else e


def _found(kind: str, answer: _Answer, expected: Sequence[str]) -> set[Any]:
    if kind == "amount":
        return {v for v, money in answer.numbers if money}
    if kind == "number":
        return {v for v, _ in answer.numbers}
    if kind == "id":
        families = set().union(*(id_families(_value(kind, e)) for e in expected))
        return {c for c in answer.codes if id_families(c) & families}
    return {"date": answer.dates, "time": answer.times, "email": answer.emails}[kind]


# --- names: the seeded database says what else is a candidate ------------------------------------
Column = tuple[str, str]  # (table, column)
Words = tuple[str, ...]
# Both caches are bounded by bytes too (estimated: ~120 bytes a word tuple kept), so a working
# set of many tasks evicts instead of growing the process (`answer_cache_mb`, keep_answers_at_most).
_WORDS_BYTES = 120
_vocab_cache: LRU[int, tuple[DbState, dict[Column, frozenset[Words]]]] = LRU(
    64, max_bytes=64 * 2**20, size_of=lambda e: _WORDS_BYTES * sum(map(len, e[1].values()))
)
# Per table state (a seeded state shares most of them with the snapshot's dump, and a patched
# one is its base's counts plus the patch): column -> how many rows hold each word tuple.
_counts_cache: LRU[int, tuple[TableState, list[Counter[Words]]]] = LRU(
    256, max_bytes=64 * 2**20, size_of=lambda e: _WORDS_BYTES * sum(map(len, e[1]))
)
_vocab_lock = threading.Lock()


def keep_answers_at_most(max_bytes: int) -> None:
    """The byte bound of each of the answer checker's caches (per process)."""
    with _vocab_lock:
        for cache in (_vocab_cache, _counts_cache):
            cache.max_bytes = max_bytes
            cache.shrink()


def _vocabulary(state: DbState) -> dict[Column, frozenset[Words]]:
    """Each text column's distinct values, as word tuples (cached per seeded state)."""
    with _vocab_lock:
        hit = _vocab_cache.get(id(state))
    if hit is not None and hit[0] is state:
        return hit[1]
    vocab: dict[Column, frozenset[Words]] = {}
    for table in state.values():
        for column, counts in zip(table.columns, _word_counts(table), strict=True):
            if len(counts) > 1:
                vocab[(table.name, column)] = frozenset(counts)
    with _vocab_lock:
        _vocab_cache.put(id(state), (state, vocab))
    return vocab


def _word_counts(table: TableState) -> list[Counter[Words]]:
    """Per column, how many rows hold each value's word tuple (only values that may be names:
    short text, no email); from the base's counts and the patch for a patched table."""
    with _vocab_lock:
        hit = _counts_cache.get(id(table))
    if hit is not None and hit[0] is table:
        return hit[1]
    origin = table.origin
    if origin is None or origin.base.origin is not None:
        counts = [Counter(_words(row[i]) for row in table.rows) for i in range(len(table.columns))]
    else:
        counts = []
        for i, base in enumerate(_word_counts(origin.base)):
            patch: Counter[Words] = Counter(_words(row[i]) for row in origin.added)
            patch.subtract(_words(row[i]) for row in origin.removed)
            column = base.copy() if any(patch.values()) else base
            for words, n in patch.items():
                if n:
                    column[words] += n
                    if column[words] <= 0:
                        del column[words]
            counts.append(column)
    for column in counts:
        column.pop((), None)
    with _vocab_lock:
        _counts_cache.put(id(table), (table, counts))
    return counts


def _words(value: Any) -> Words:
    # Emails are a kind of their own, and their words are no names.
    if isinstance(value, str) and len(value) <= _MAX_VALUE_CHARS and "@" not in value:
        return tuple(_WORD.findall(_norm(value)))
    return ()


def _name_groups(
    expected: str, vocab: Mapping[Column, frozenset[tuple[str, ...]]]
) -> list[tuple[Column, int, int, tuple[str, ...]]]:
    """Where `expected` is a name: (column, word offset, width, the words), for each column
    holding it as a whole value, else holding its words at one position of their values, else
    the same for each of its words."""
    words = tuple(_WORD.findall(_norm(expected)))
    if not words:
        return []
    whole = [(col, 0, 0, words) for col, values in vocab.items() if words in values]
    if whole:
        return whole
    groups = []
    first = words[0]
    for col, values in vocab.items():
        for value in values:
            if first not in value:  # most values: one C-level test instead of a slice per word
                continue
            for start in range(len(value) - len(words) + 1):
                if value[start : start + len(words)] == words:
                    groups.append((col, start, len(words), words))
                    break
            else:
                continue
            break
    if not groups and len(words) > 1:
        # "Anna Weber" where first and last names are two columns: each word on its own.
        for word in words:
            groups.extend(_name_groups(word, vocab))
    return groups


def _names_found(
    answer: _Answer, candidates: set[tuple[str, ...]], longer: set[tuple[str, ...]]
) -> set[tuple[str, ...]]:
    """Candidates the answer names, except those only named inside a longer candidate
    ("Blender" inside "Portable Blender")."""
    words = answer.words
    grams: dict[int, set[tuple[str, ...]]] = {}
    found = set()
    for cand in candidates:
        n = len(cand)
        if n not in grams:
            grams[n] = {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}
        if cand not in grams[n]:
            continue
        starts = [i for i in range(len(words) - n + 1) if tuple(words[i : i + n]) == cand]
        covering = [c for c in longer if len(c) > n and set(cand) <= set(c)]
        if any(not _inside(words, i, n, covering) for i in starts):
            found.add(cand)
    return found


def _inside(words: Sequence[str], start: int, n: int, covering: list[tuple[str, ...]]) -> bool:
    for c in covering:
        for s in range(max(0, start + n - len(c)), start + 1):
            if tuple(words[s : s + len(c)]) == c:
                return True
    return False


@dataclass(frozen=True)
class Hedge:
    kind: str
    expected: list[str]
    also_named: list[str]

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "expected": self.expected, "also_named": self.also_named}


def hedged_outputs(
    expected: Sequence[str], answer: str, declared: Any = None, seed_state: DbState | None = None
) -> list[Hedge]:
    """The kinds whose candidates in `answer` are more than the expected values (or, for an
    answer over MAX_ANSWER_CHARS, one 'length' entry). Missing values are `missing_outputs`'."""
    if not expected:
        return []
    if len(answer) > MAX_ANSWER_CHARS:
        return [Hedge("length", [f"<= {MAX_ANSWER_CHARS} chars"], [f"{len(answer)} chars"])]
    kinds = _kinds(expected, declared)
    parsed = _Answer.parse(answer)
    hedges = []
    by_kind: dict[str, list[str]] = {}
    for e, kind in zip(expected, kinds, strict=True):
        by_kind.setdefault(kind, []).append(e)
    for kind, values in by_kind.items():
        if kind in ("text", "refusal"):
            continue
        if kind == "name":
            hedges.extend(_name_hedges(values, parsed, seed_state))
            continue
        want = {_value(kind, e) for e in values}
        extra = _found(kind, parsed, values) - want
        if extra:
            shown = sorted(format(x, "f") if isinstance(x, Decimal) else str(x) for x in extra)
            hedges.append(Hedge(kind, list(values), shown[:20]))
    return hedges


def _name_hedges(values: Sequence[str], answer: _Answer, state: DbState | None) -> list[Hedge]:
    if state is None:
        return []
    vocab = _vocabulary(state)
    wanted: dict[tuple[Column, int, int], set[tuple[str, ...]]] = {}
    named: dict[tuple[Column, int, int], list[str]] = {}
    for e in values:
        for col, start, width, words in _name_groups(e, vocab):
            wanted.setdefault((col, start, width), set()).add(words)
            named.setdefault((col, start, width), []).append(e)
    hedges = []
    for (col, start, width), expected_words in wanted.items():
        column_values = vocab[col]
        if width:  # a word (or expected_words) at one position of the column's values
            candidates = {
                v[start : start + width] for v in column_values if len(v) >= start + width
            }
        else:
            candidates = set(column_values)
        found = _names_found(answer, candidates, set(column_values))
        extra = found - expected_words
        if extra:
            shown = sorted(" ".join(x) for x in extra)[:20]
            hedges.append(Hedge(f"name ({col[0]}.{col[1]})", named[(col, start, width)], shown))
    return hedges
