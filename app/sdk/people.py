"""The people of generated stories: name pools to draw them from, and where a seed holds them.

- `PEOPLE`: a pool of (first, last) names, distinct first names and last names; an environment
  takes a prefix (`PEOPLE[:40]`) or builds its own, e.g. every pairing of two word lists
  (`name_grid`). Train draws the even positions, test the odd ones (app/taskgen/splits.py).
- `PersonColumns`: which columns of which tables hold a person's name, declared by the
  environment (`TaskGenerator(people=...)`); the framework lists a task's `entities` and a
  distractor's people with it. Default: `first_name` and `last_name` in any table.

A leaf of the SDK: standard library only.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Name = tuple[str, str]

PEOPLE: tuple[Name, ...] = (
    ("Mia", "Chen"), ("Noah", "Patel"), ("Ava", "Kowalski"), ("Liam", "Okafor"), ("Zara", "Haddad"),
    ("Ethan", "Larsen"), ("Chloe", "Dubois"), ("Mateo", "Silva"), ("Nina", "Petrova"),
    ("Oscar", "Lindqvist"), ("Leila", "Rahimi"), ("Kenji", "Watanabe"), ("Ines", "Moreau"),
    ("Felix", "Brandt"), ("Aisha", "Bello"), ("Lucas", "Ferreira"), ("Maya", "Goldberg"),
    ("Samir", "Nasser"), ("Elena", "Rossi"), ("Jonah", "Fischer"), ("Priya", "Raman"),
    ("Theo", "Novak"), ("Hana", "Sato"), ("Victor", "Almeida"), ("Clara", "Jensen"),
    ("Rafael", "Costa"), ("Ingrid", "Holm"), ("Tariq", "Aziz"), ("Lena", "Vogel"),
    ("Marco", "Bianchi"), ("Sofia", "Nieminen"), ("Daniel", "Oyelaran"), ("Yara", "Mansour"),
    ("Pavel", "Dvorak"), ("Ruth", "Adeyemi"), ("Kai", "Nakamura"), ("Alma", "Quintero"),
    ("Bruno", "Keller"), ("Freya", "Olsen"), ("Hugo", "Marchetti"), ("Iris", "Kaplan"),
    ("Jamal", "Wright"), ("Kira", "Ivanova"), ("Leo", "Hartmann"), ("Mina", "Park"),
    ("Nils", "Berg"), ("Omar", "Saleh"), ("Paula", "Mendes"), ("Quinn", "Gallagher"),
    ("Rosa", "Delgado"), ("Sven", "Aalto"), ("Tessa", "Byrne"), ("Umar", "Farouk"),
    ("Vera", "Lund"), ("Wes", "Tanaka"), ("Xenia", "Popescu"), ("Yusuf", "Demir"),
    ("Zoe", "Whitaker"), ("Arno", "Vos"), ("Bea", "Santos"), ("Cyril", "Mercier"),
)  # fmt: skip


def name_pool(size: int | None = None, *, replace: Mapping[int, Name] | None = None) -> list[Name]:
    """The first `size` names of PEOPLE (all: None), with some positions replaced."""
    pool = list(PEOPLE[:size])
    for position, name in (replace or {}).items():
        pool[position] = name
    return pool


def name_grid(
    firsts: Iterable[str], lasts: Iterable[str], shuffle: str | None = None
) -> list[Name]:
    """Every (first, last) pairing, shuffled with `Random(shuffle)` when given."""
    last_names = list(lasts)
    pairs = [(f, last) for f in firsts for last in last_names]
    if shuffle is not None:
        random.Random(shuffle).shuffle(pairs)
    return pairs


@dataclass(frozen=True)
class PersonColumns:
    """Where a seed holds people: `first` and `last` name columns (`last=None`: `first` holds
    the whole name), in `tables` (None: any table that has them)."""

    first: str = "first_name"
    last: str | None = "last_name"
    tables: frozenset[str] | None = None

    def name(self, row: Mapping[str, Any]) -> str | None:
        """The person a row names, or None."""
        if self.last is None:
            return str(row[self.first]) if row.get(self.first) else None
        if row.get(self.first) and row.get(self.last):
            return f"{row[self.first]} {row[self.last]}"
        return None

    def of(self, seed: Mapping[str, Any]) -> list[str]:
        """The people ("First Last") of a seed's rows, sorted."""
        found = {
            self.name(row)
            for table, rows in (seed.get("rows") or {}).items()
            if self.tables is None or table in self.tables
            for row in rows
        }
        return sorted(n for n in found if n is not None)
