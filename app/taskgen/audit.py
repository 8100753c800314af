"""Shortcut policies that never read a tool output of the task they play, and what they share.

A reward-seeking policy trained on a task set may learn to recognise tasks instead of using the
environment: replay what a similar training task did, swap in the ids its request names, decline
whenever the wording sounds like a refusal. `audit` plays those policies on every test task from
the training set and the test task's request alone (never its seed, gold or tool outputs) and
has each play scored by a `Score` callable (the CLI's: the real verifier over the task's
snapshot, app/cli/audit.py). It also counts how many test tasks' gold calls share an
identifier. A set that teaches keeps every figure near zero (`TARGETS`; docs/generating_tasks.md,
"The audit"). Everything here is a pure function of the two sets and `seed`.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.sdk.answer import DECLINE_REQUEST
from app.sdk.user import MESSAGE_USER

Calls = list[dict[str, Any]]
# (test task row, the calls a policy makes) -> the verifier's reward for them.
Score = Callable[[dict[str, Any], Calls], float]

POLICIES = ("replay_family", "replay_similar", "substituted", "keyword_decline")
# The most a policy that never reads a tool output may earn (a mean reward; the decline policy:
# the share of refusal tasks it wins), and the largest share of test tasks one identifier's gold
# may appear in.
TARGETS: dict[str, float] = {
    "replay_family": 0.05,
    "replay_similar": 0.05,
    "substituted": 0.25,
    "keyword_decline": 0.55,
    "identifier_share": 0.02,
}
DESCRIPTIONS = {
    "replay_family": "replay the gold of a training task of the same family",
    "replay_similar": "replay the gold of the training task whose request shares most words",
    "substituted": "the same, with the test request's identifiers put in place of the training's",
    "keyword_decline": "refusal tasks: decline with the most similar training task's reason code "
    "(when that task declined), no other call",
}

_WORD = re.compile(r"\w+")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
# Facts that are no identifiers: dates, times, amounts (removed before codes are looked for).
_NOT_IDS = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ][\d:]+)?|\b\d{1,2}:\d{2}\b|[$€£]?\d+\.\d+")
# A code: a token holding at least three digits (#W1234567, card_1234567, 84197, HAT001).
_CODE = re.compile(r"(?<![\w@$€£])[#A-Za-z_-]*(?:\d[\w-]*){3,}")
# A name: two or more capitalised words in a row ("Mia Chen", "The Silent Harbour").
_NAME = re.compile(r"\b[A-Z][a-z]+(?:[-'][A-Za-z]+)?(?: [A-Z][a-z]+(?:[-'][A-Za-z]+)*)+\b")
KINDS = ("email", "code", "name")


def request_of(row: Mapping[str, Any]) -> str:
    """The user's request: the last user message of the row's input."""
    params = row.get("responses_create_params") or {}
    items = params.get("input") or [] if isinstance(params, Mapping) else []
    if isinstance(items, str):  # a bare string input is the request itself
        return items
    users = [m for m in items if isinstance(m, Mapping) and m.get("role") == "user"]
    content = users[-1].get("content", "") if users else ""
    if isinstance(content, list):  # content parts
        content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return content if isinstance(content, str) else ""


def text_identifiers(text: str) -> dict[str, list[str]]:
    """The identifiers a text names, by kind (email, code, name), in order of first appearance."""
    found: dict[str, list[str]] = {k: [] for k in KINDS}
    rest = text
    for email in _EMAIL.findall(rest):
        if email not in found["email"]:
            found["email"].append(email)
    rest = _NOT_IDS.sub(" ", _EMAIL.sub(" ", rest))
    for code in _CODE.findall(rest):
        code = code.strip("-_")
        if code not in found["code"]:
            found["code"].append(code)
    for name in _NAME.findall(rest):
        if name not in found["name"]:
            found["name"].append(name)
    return found


def _id_key(key: str) -> bool:
    key = key.lower()
    return key == "id" or key.endswith(("_id", "_ids", "number", "_numbers", "code"))


def gold_identifiers(row: Mapping[str, Any]) -> set[str]:
    """The identifiers of a task's gold calls: ids and codes passed (an int under an id-like key
    as `key=value`), emails and names in any string, a person's first + last name arguments."""
    out: set[str] = set()
    for c in row.get("ground_truth") or []:
        args = c.get("arguments") if isinstance(c, Mapping) else None
        if not isinstance(args, Mapping):
            continue
        if c.get("name") in (DECLINE_REQUEST, MESSAGE_USER):
            # A reason code and a message to the user, or words to the user: no entity (the ids
            # a message proposes are the ones the write then passes).
            continue
        first, last = args.get("first_name"), args.get("last_name")
        if isinstance(first, str) and isinstance(last, str):
            out.add(f"{first} {last}")
        _collect(args, "", out)
    return out


def _collect(value: Any, key: str, out: set[str]) -> None:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, Mapping):
        for k, v in value.items():
            _collect(v, str(k), out)
    elif isinstance(value, list | tuple):
        for v in value:
            _collect(v, key, out)
    elif isinstance(value, int):
        if _id_key(key) or value >= 100_000:
            out.add(f"{key}={value}" if key else str(value))
    elif isinstance(value, str):
        for ids in text_identifiers(value).values():
            out.update(ids)


@dataclass(frozen=True)
class Substitution:
    """Train identifier -> test identifier (strings), and the ints their digits stand for."""

    strings: dict[str, str]
    ints: dict[int, int]

    def apply(self, calls: Calls) -> Calls:
        if not self.strings:
            return [dict(c) for c in calls]
        pattern = re.compile("|".join(re.escape(s) for s in sorted(self.strings, key=len)[::-1]))

        def swap(value: Any) -> Any:
            if isinstance(value, bool) or value is None:
                return value
            if isinstance(value, str):
                return pattern.sub(lambda m: self.strings[m.group(0)], value)
            if isinstance(value, int):
                return self.ints.get(value, value)
            if isinstance(value, list):
                return [swap(v) for v in value]
            if isinstance(value, dict):
                return {k: swap(v) for k, v in value.items()}
            return value

        return [{"name": c["name"], "arguments": swap(c.get("arguments") or {})} for c in calls]


def substitution(train_request: str, test_request: str) -> Substitution:
    """Map the training request's identifiers onto the test request's, kind by kind, in order
    of appearance (the i-th email onto the i-th email, ...); a person's name maps word by word
    too (first and last names are often separate arguments)."""
    a, b = text_identifiers(train_request), text_identifiers(test_request)
    strings: dict[str, str] = {}
    ints: dict[int, int] = {}
    for kind in KINDS:
        for old, new in zip(a[kind], b[kind], strict=False):
            if old == new:
                continue
            strings[old] = new
            if kind == "name":
                for o, n in zip(old.split(), new.split(), strict=False):
                    strings.setdefault(o, n)
            if kind == "email":
                strings.setdefault(old.split("@")[0], new.split("@")[0])
            digits_old, digits_new = re.sub(r"\D", "", old), re.sub(r"\D", "", new)
            if kind == "code" and digits_old and digits_new:
                ints.setdefault(int(digits_old), int(digits_new))
                strings.setdefault(digits_old, digits_new)
    return Substitution(strings, ints)


class Similar:
    """The training task whose request shares the most distinct words with a text (ties: the
    earliest), through an inverted index (a 10,000-task set is not compared pairwise)."""

    def __init__(self, requests: Sequence[str]) -> None:
        self.index: dict[str, list[int]] = defaultdict(list)
        for i, text in enumerate(requests):
            for word in set(_WORD.findall(text.lower())):
                self.index[word].append(i)

    def best(self, text: str) -> int | None:
        shared: Counter[int] = Counter()
        for word in set(_WORD.findall(text.lower())):
            shared.update(self.index.get(word, ()))
        if not shared:
            return None
        top = max(shared.values())
        return min(i for i, n in shared.items() if n == top)


def _gold(row: Mapping[str, Any]) -> Calls:
    return [
        {"name": c["name"], "arguments": dict(c.get("arguments") or {})}
        for c in row.get("ground_truth") or []
        if isinstance(c, Mapping) and isinstance(c.get("name"), str)
    ]


@dataclass
class PolicyResult:
    """One policy's play over the test set: mean reward over the tasks it played."""

    name: str
    played: int = 0
    total: float = 0.0
    wins: int = 0  # plays scored 1
    by_family: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))

    @property
    def mean(self) -> float:
        return self.total / self.played if self.played else 0.0

    def add(self, family: str, reward: float) -> None:
        self.played += 1
        self.total += reward
        self.wins += reward >= 1.0
        self.by_family[family].append(reward)


@dataclass
class AuditReport:
    train: int
    test: int
    refusals: int
    policies: dict[str, PolicyResult]
    top_identifiers: list[tuple[str, int]]  # (identifier, test tasks whose gold holds it)
    shared_with_train: int  # test tasks whose gold holds an identifier of a training gold

    def figure(self, name: str) -> float:
        """A target's figure: the policy's mean reward, or the top identifier's share."""
        if name == "identifier_share":
            return self.top_identifiers[0][1] / self.test if self.top_identifiers else 0.0
        return self.policies[name].mean

    def missed(self, targets: Mapping[str, float] = TARGETS) -> list[str]:
        """The targets this set misses, one line each (empty: every target met)."""
        return [
            f"{name}: {self.figure(name):.3f} > {limit}"
            for name, limit in targets.items()
            if self.figure(name) > limit + 1e-12
        ]

    def as_dict(self) -> dict[str, Any]:
        top = self.top_identifiers[0] if self.top_identifiers else ("", 0)
        return {
            "train": self.train,
            "test": self.test,
            "refusal_tasks": self.refusals,
            "policies": {
                name: {
                    "description": DESCRIPTIONS[name],
                    "played": p.played,
                    "mean_reward": round(p.mean, 4),
                    "rewarded_1": p.wins,
                    "target": TARGETS[name],
                    "by_family": {
                        f: round(sum(r) / len(r), 4) for f, r in sorted(p.by_family.items())
                    },
                }
                for name, p in self.policies.items()
            },
            "most_shared_identifier": {
                "identifier": top[0],
                "tasks": top[1],
                "share": round(self.figure("identifier_share"), 4),
                "target": TARGETS["identifier_share"],
            },
            "top_identifiers": [{"identifier": i, "tasks": n} for i, n in self.top_identifiers],
            "test_tasks_sharing_an_identifier_with_train": self.shared_with_train,
            "missed": self.missed(),
        }


def decline_of(row: Mapping[str, Any]) -> str | None:
    code = row.get("expected_decline")
    return code if isinstance(code, str) and code else None


def audit(
    train: Sequence[dict[str, Any]],
    test: Sequence[dict[str, Any]],
    score: Score,
    *,
    seed: int = 0,
    advance: Callable[[], None] = lambda: None,
) -> AuditReport:
    """Play every policy on every test task (the decline policy on refusal tasks) from `train`
    and the test request alone; `score` gives each play's reward."""
    if not train or not test:
        raise ValueError("the audit needs a training set and a test set, each of one task or more")
    requests = [request_of(r) for r in train]
    similar = Similar(requests)
    by_family: dict[str, list[int]] = defaultdict(list)
    for i, row in enumerate(train):
        by_family[str(row.get("family"))].append(i)
    results = {name: PolicyResult(name) for name in POLICIES}
    cache: dict[tuple[int, str], float] = {}

    def play(n: int, row: dict[str, Any], calls: Calls) -> float:
        key = (n, json.dumps(calls, sort_keys=True))
        if key not in cache:
            cache[key] = score(row, calls)
        return cache[key]

    for n, row in enumerate(test):
        family = str(row.get("family"))
        text = request_of(row)
        rng = random.Random(f"{seed}/{n}/{row.get('task_id')}")
        same = by_family.get(family)
        calls = _gold(train[rng.choice(same)]) if same else []
        results["replay_family"].add(family, play(n, row, calls))
        best = similar.best(text)
        closest = train[best] if best is not None else None
        calls = _gold(closest) if closest is not None else []
        results["replay_similar"].add(family, play(n, row, calls))
        if closest is not None:
            calls = substitution(requests[best or 0], text).apply(_gold(closest))
        results["substituted"].add(family, play(n, row, calls))
        if decline_of(row) is not None:
            code = decline_of(closest) if closest is not None else None
            calls = []
            if code is not None and closest is not None:
                # The closest task's own decline, subject and all: what a policy that memorised
                # it would say (a subject names that task's record, never this one's).
                copied = [c for c in _gold(closest) if c.get("name") == DECLINE_REQUEST]
                subject = (copied[-1].get("arguments") or {}).get("subject") if copied else None
                arguments: dict[str, Any] = {"reason": code, "subject": subject}
                arguments["message"] = "I cannot do that under our policy."
                calls = [{"name": DECLINE_REQUEST, "arguments": arguments}]
            results["keyword_decline"].add(family, play(n, row, calls))
        advance()
    return AuditReport(
        train=len(train),
        test=len(test),
        refusals=sum(decline_of(r) is not None for r in test),
        policies=results,
        top_identifiers=shared_identifiers(test)[:5],
        shared_with_train=_shared_with(train, test),
    )


def shared_identifiers(rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, int]]:
    """Every identifier of the rows' gold calls with the number of rows holding it, most shared
    first (ties by identifier)."""
    counts: Counter[str] = Counter()
    for row in rows:
        counts.update(gold_identifiers(row))
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def _shared_with(train: Sequence[Mapping[str, Any]], test: Sequence[Mapping[str, Any]]) -> int:
    seen: set[str] = set()
    for row in train:
        seen |= gold_identifiers(row)
    return sum(bool(gold_identifiers(row) & seen) for row in test)
