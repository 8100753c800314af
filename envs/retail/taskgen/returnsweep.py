"""The hard tier's per-record family: a bulk return where each order's verdict joins facts from
three tool outputs under the policy's return window, its exception and the exception's limit.

`return_sweep` (difficulty 5): "return everything I still can". Each delivered order's verdict
needs its placement date (the list), the customer's membership (their profile) and, past the
365-day window, the item's category (the product): silver and gold members may return
electronics and audio up to 730 days back, at most three items so, the most recent first.
Boundaries on the day (365 in, 366 out; 730 in, 731 out), one over the cap, look-alikes that fail
one condition (a line returned already, an order not delivered), and twins where every record or
none qualifies. Orders the customer names that a tool refuses are declined, each by number.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import Any

from envs.retail.taskgen.clearout import _at
from envs.retail.taskgen.kit import GO, NOW, C, Ctx, Draft, OrderInfo, auth, hello

WINDOW, EXTENDED, CAP = 365, 730, 3  # the policy's "Return window" (days, items)
LONG_LIFE = ("electronics", "audio")  # the categories the extension covers
MEMBERS = ("silver", "gold")


@dataclass
class Record:
    """One order of the sweep: its age in days, what the gold does with it and why."""

    order: OrderInfo
    age: int
    status: str
    verdict: str  # window, extension, returned_before, category, membership, expired, cap,
    # not_delivered, declined
    skus: list[str]
    product_id: int  # the first item's product, whose category decides past the window
    category: str


def _variant(c: Ctx, long_life: bool, settled: bool = False) -> dict[str, Any]:
    """A variant of an unused product of a long-life category, or of another category: the
    story's own copy, or a base one for an order no gold reads (`settled`). Past 16 copies
    (18 product lines) a copied product recurs."""
    kind = [v for v in c.cat.variants if (v["category"] in LONG_LIFE) == long_life]
    if c.cat.world is not None and len(c.cat.lines) >= 16 and not settled:
        copies = [v for per in c.cat.copies.values() for v in per.values()]
        return c.s.rng.choice([v for v in copies if (v["category"] in LONG_LIFE) == long_life])
    base = {c.cat.origin.get(pid, pid) for pid in c.s.used}
    pool = [v for v in kind if v["product_id"] not in base] or kind
    if c.cat.prefer_fresh and not settled:  # the shipped set: of the products the story has
        # not used, those no earlier gold named, else none an earlier gold passed by id
        pool = (
            [v for v in pool if v["product_id"] not in c.cat.stale]
            or [v for v in pool if v["product_id"] not in c.cat.looked_up]
            or pool
        )
    v = c.s.rng.choice(pool)
    if not settled:
        v = c.cat.own(v, whole=False)
    c.s.used.add(v["product_id"])
    return v


def _placed(c: Ctx, o: OrderInfo, age: int) -> None:
    """Place `o` exactly `age` calendar days before today, at a time of day."""
    day = NOW.date() - timedelta(days=age)
    minutes = c.s.rng.randint(7 * 60, 22 * 60)
    _at(c, o, datetime.combine(day, time()) + timedelta(minutes=minutes))


def _ages(
    c: Ctx, lo: int, hi: int, n: int, taken: set[int], must: tuple[int, ...] = ()
) -> list[int]:
    """`n` distinct ages in [lo, hi] (the `must` ones first), none already taken."""
    out = [a for a in must if a not in taken][:n]
    taken.update(out)
    pool = [a for a in range(lo, hi + 1) if a not in taken]
    more = c.s.rng.sample(pool, n - len(out))
    taken.update(more)
    return out + more


def return_sweep(c: Ctx) -> Draft:
    """Return every item the return window allows; skip the rest; decline named orders a tool
    refuses."""
    by = ("email", "zip")[c.k]
    rng = c.s.rng
    p = c.person()
    visa = p.methods["visa"]
    shape = rng.choice(("mixed", "mixed", "mixed", "mixed", "all", "none"))
    membership = rng.choice(("regular", "regular", "silver", "gold"))
    if shape != "mixed":  # everything or nothing past the window, by category and date
        membership = rng.choice(MEMBERS)
    # The shipped set (no world: base products, fresh ones first) has named the ten long-life
    # products in earlier rows already: its first row is a regular member's, whose gold returns
    # no long-life item; its second a gold member's whose exception decides and whose limit
    # binds (its long-life products, by SKU, recur; none an earlier gold passed by id).
    shipped = c.s.b.world is None
    if shipped:
        shape, membership = "mixed", ("regular", "gold")[c.k]
    member = membership in MEMBERS
    cust = next(r for r in c.s.rows["customers"] if r["id"] == p.id)
    cust["membership"] = membership
    cust["created_at"] = (NOW - timedelta(days=1200)).isoformat()
    taken: set[int] = set()
    records: list[Record] = []

    def add(age: int, status: str, long_life: bool, n_items: int = 1) -> Record:
        settled = status != "delivered" or age > EXTENDED  # no gold reads it
        items = [_variant(c, long_life, settled)]
        items += [_variant(c, False, settled) for _ in range(n_items - 1)]
        o = c.s.order(p, status, items, visa)
        _placed(c, o, age)
        skus = [v["sku"] for v in items]
        r = Record(o, age, status, "", skus, items[0]["product_id"], items[0]["category"])
        records.append(r)
        return r

    # Inside the 365-day window: returned, unless the line went back already.
    # Sizes keep the gold within 15-30 calls (a member's order past the window costs 2-3).
    if shape == "mixed":
        n_window = rng.randint(2, 3) if member else rng.randint(4, 5)
    else:
        n_window = rng.randint(5, 7) if shape == "all" else 0
    edge = (WINDOW,) if rng.random() < 0.6 else ()
    for age in _ages(c, 120, WINDOW, n_window, taken, edge):
        r = add(age, "delivered", rng.random() < 0.4 and not shipped, rng.randint(1, 2))
        r.verdict = "window"
        if shape == "mixed" and len(r.skus) == 2 and rng.random() < 0.6:
            c.s.mark_returned(r.order, 1)
            r.skus = r.skus[:1]
    # Past it, within 730 days: one item each; long-life items of members qualify, up to 3.
    if shape == "all":
        kinds = [True] * rng.randint(2, CAP)
    elif shape == "none":
        kinds = [False] * rng.randint(5, 7)
    elif member:
        qualifying = rng.choice((1, 2, 3, 4, 4, 5))
        if shipped:  # one over the limit at least
            qualifying = max(qualifying, CAP + 1)
        kinds = [True] * qualifying + [False] * rng.randint(
            max(1, 4 - qualifying), min(3, 7 - qualifying)
        )
    else:
        kinds = [True] * rng.randint(2, 4) + [False] * rng.randint(2, 3)
    rng.shuffle(kinds)
    edges = tuple(a for a in (WINDOW + 1, EXTENDED) if rng.random() < 0.6)
    for age, long_life in zip(
        _ages(c, WINDOW + 1, EXTENDED, len(kinds), taken, edges), kinds, strict=True
    ):
        add(age, "delivered", long_life)
    # Past 730 days: long-life items (a member's look-alike that fails only the date).
    if shape != "all":
        edge = (EXTENDED + 1,) if rng.random() < 0.6 else ()
        for age in _ages(c, EXTENDED + 1, 900, rng.randint(2, 3), taken, edge):
            add(age, "delivered", True).verdict = "expired"
    # Not delivered yet (or cancelled), recent, long-life: skipped, never declined.
    # (As many as bring the history to 12 orders at least.)
    for age in _ages(c, 2, 60, max(rng.randint(2, 3), 12 - len(records)), taken):
        add(
            age, rng.choice(("pending", "processed", "shipped", "cancelled")), True
        ).verdict = "not_delivered"
    # Newest first, as the list shows them; the extension goes to the most recent first.
    records.sort(key=lambda r: r.age)
    used = 0
    for r in records:
        if r.verdict or r.age <= WINDOW:
            continue
        long_life = r.category in LONG_LIFE
        if not member:
            r.verdict = "membership" if long_life else "category"
        elif not long_life:
            r.verdict = "category"
        elif used < CAP:
            r.verdict, used = "extension", used + 1
        else:
            r.verdict = "cap"
    # Orders the customer names: their own not yet delivered, or someone else's.
    code = "" if shape == "all" else c.rule("order_not_delivered", "other_customer")
    if shape == "none":
        code = code or rng.choice(("order_not_delivered", "other_customer"))
    named: list[Record] = []
    if code:
        for age in _ages(c, 1, 20, rng.randint(1, 2), taken):
            owner = c.owner(p, code)
            status = (
                rng.choice(("processed", "shipped"))
                if code == "order_not_delivered"
                else ("delivered")
            )
            v = _variant(c, rng.random() < 0.5 and not shipped)
            o = c.s.order(owner, status, [v], owner.methods["visa"])
            _placed(c, o, age)
            named.append(
                Record(o, age, status, "declined", [v["sku"]], v["product_id"], v["category"])
            )
    else:  # the named orders are the customer's own, returned like the rest
        named = [r for r in records if r.verdict == "window"][: rng.randint(0, 2)]
    return _draft(c, by, p.id, visa, records, named, code, member, shape, p)


def _draft(
    c: Ctx,
    by: str,
    cid: int,
    visa: str,
    records: list[Record],
    named: list[Record],
    code: str,
    member: bool,
    shape: str,
    p: Any,
) -> Draft:
    """The request and the gold: read every order a verdict needs, newest first, return what
    qualifies, then decline the named orders a tool refuses."""
    numbers = " and ".join(r.order.number for r in named)
    also = (
        f" That includes my order{'s' if len(named) > 1 else ''} {numbers}; make sure "
        f"{'they are' if len(named) > 1 else 'it is'} part of it."
        if named
        else ""
    )
    prompt = (
        f"{hello(p, by)} I'm moving abroad and want to send back everything I still can. Please "
        f"return every item of mine that your return policy still allows (reason: no longer "
        f"needed), with each refund going back to the card that paid for it.{also} Leave "
        f"anything that doesn't qualify as it is. {GO}"
    )
    gold = [auth(p, by), C("get_customer_details", customer_id=cid)]
    gold.append(C("list_customer_orders", customer_id=cid))
    for r in records:
        if r.status != "delivered" or r.age > EXTENDED:
            continue
        gold.append(C("get_order_details", order_number=r.order.number))
        if r.age > WINDOW and member:
            gold.append(C("get_product_details", product_id=r.product_id))
        if r.verdict in ("window", "extension"):
            gold.append(_return(r, cid, visa))
    refused = []
    for r in named:
        if r.verdict == "declined":
            gold.append(C("get_order_details", order_number=r.order.number))
            refused.append(_return(r, cid, visa))
    family = "hard_return_sweep"
    writes = any(r.verdict in ("window", "extension") for r in records)
    if not refused:
        return Draft(family, prompt, gold, writes)
    return Draft(
        family,
        prompt,
        gold,
        writes,
        decline=code,
        forbidden=(refused[0], code),
        also_refused=tuple(refused[1:]),
    )


def _return(r: Record, cid: int, visa: str) -> dict[str, Any]:
    return C(
        "return_delivered_order_items",
        order_number=r.order.number,
        customer_id=cid,
        skus=r.skus,
        reason="no_longer_needed",
        refund_method_id=visa,
    )
