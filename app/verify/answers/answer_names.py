"""Names on the text answer path: the seeded database says what else is a candidate.

An expected name is found in the database's text columns (as a whole value, as words at one
position of values, or word by word); the column's other values are its rivals. Words are
`\\w+` runs of casefolded text, the same split for the database values and the answer.
"""

from __future__ import annotations

import functools
import re
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.core.lru import LRU
from app.verify.state.dump import DbState, TableState

_WORD = re.compile(r"\w+")
_MAX_VALUE_CHARS = 60  # longer database values are prose, not names


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def name_words(text: str) -> tuple[str, ...]:
    """The words a name is compared by."""
    return tuple(_WORD.findall(_norm(text)))


@dataclass(frozen=True)
class Hedge:
    """An answer kind whose candidates in the answer are more than the expected values."""

    kind: str
    expected: list[str]
    also_named: list[str]

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "expected": self.expected, "also_named": self.also_named}


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
    words: Sequence[str], candidates: set[tuple[str, ...]], longer: set[tuple[str, ...]]
) -> set[tuple[str, ...]]:
    """Candidates the answer's words name, except those only named inside a longer candidate
    ("Blender" inside "Portable Blender")."""
    grams: dict[int, set[tuple[str, ...]]] = {}
    found = set()
    for cand in candidates:
        n = len(cand)
        if n not in grams:
            grams[n] = {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}
        if cand not in grams[n]:
            if _glued(words, cand):
                found.add(cand)
            continue
        starts = [i for i in range(len(words) - n + 1) if tuple(words[i : i + n]) == cand]
        covering = [c for c in longer if len(c) > n and set(cand) <= set(c)]
        if any(not _inside(words, i, n, covering) for i in starts):
            found.add(cand)
    return found


_PLURAL = ("", "s", "es")


@functools.lru_cache(maxsize=8)
def _joined_cached(words: tuple[str, ...]) -> str:
    return " ".join(words)


def _joined(words: Sequence[str]) -> str:
    return _joined_cached(tuple(words))


def _glued(words: Sequence[str], cand: tuple[str, ...]) -> bool:
    """Whether the answer names `cand` glued to letters ("qfarid nowakq", "abcblenderdef"):
    its first word ending an answer word, its last word starting the next one's, and letters
    added on either side (a plural "s" or "es" is English, not glue)."""
    n, first, last = len(cand), cand[0], cand[-1]
    if n == 1 and len(first) < 4:
        return False
    joined = _joined(words)
    if first not in joined or last not in joined:  # most candidates: one C-level search
        return False
    for i in range(len(words) - n + 1):
        head, tail = words[i], words[i + n - 1]
        if n == 1:
            at = head.find(first)
            if at > 0 or (at == 0 and head[len(first) :] not in _PLURAL):
                return True
            continue
        if not (head.endswith(first) and tail.startswith(last)):
            continue
        if tuple(words[i + 1 : i + n - 1]) == cand[1:-1] and (
            head != first or tail[len(last) :] not in _PLURAL
        ):
            return True
    return False


def _inside(words: Sequence[str], start: int, n: int, covering: list[tuple[str, ...]]) -> bool:
    for c in covering:
        for s in range(max(0, start + n - len(c)), start + 1):
            if tuple(words[s : s + len(c)]) == c:
                return True
    return False


def name_hedges(values: Sequence[str], words: Sequence[str], state: DbState | None) -> list[Hedge]:
    """Per database column holding an expected name: the other names of that column that
    `words` (every word of the answer, glued ones included) names."""
    if state is None:
        return []
    vocab = _vocabulary(state)
    wanted: dict[tuple[Column, int, int], set[tuple[str, ...]]] = {}
    named: dict[tuple[Column, int, int], list[str]] = {}
    for e in values:
        for col, start, width, group in _name_groups(e, vocab):
            wanted.setdefault((col, start, width), set()).add(group)
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
        found = _names_found(words, candidates, set(column_values))
        extra = found - expected_words
        if extra:
            shown = sorted(" ".join(x) for x in extra)[:20]
            hedges.append(Hedge(f"name ({col[0]}.{col[1]})", named[(col, start, width)], shown))
    return hedges
