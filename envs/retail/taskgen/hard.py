"""The hard tier: several intents whose order matters, over a long history, with a balance the
agent works out and a threshold drawn at it, a cent under it, or where a refund decides.

- `account_cleanup`: return an item found by month + option among 25-40 orders (a look-alike of
  the same item in another month, another option of it in that month), cancel an order partly
  paid by gift card (the data may forbid it), then switch a pending order to the gift card only
  if the balance after both refunds reaches a stated amount, then move every pending order.
- `cancel_sweep`: cancel every order placed on or after a date (some may have shipped: each is
  declined by number), then pay another order with the gift card only if a stated amount stays on
  it; only the refunds of the cancels that happen count.
Fair: every fact is in the request, the policy or a tool's output; the gold scores 1, a no-op 0.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from envs.retail.taskgen.kit import (
    GO,
    NOT_PENDING,
    NOW,
    C,
    Ctx,
    Draft,
    OrderInfo,
    Person,
    addr_text,
    auth,
    hello,
    money,
    nice,
)

MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip


def gift_balance(c: Ctx, code: str, balance: float) -> None:
    row = next(m for m in c.s.rows["payment_methods"] if m["code"] == code)
    row["balance"] = balance


def _placed(c: Ctx, order_id: int) -> str:
    return str(next(o for o in c.s.rows["orders"] if o["id"] == order_id)["created_at"])


def threshold(
    c: Ctx, case: str, base: float, known: float, hidden: float, whole: bool = True
) -> tuple[float, float]:
    """(start balance, threshold T >= `base`: whole dollars, or `base` plus whole dollars) so
    that the final balance `start + known` sits where `case` says against T: `exact` (= T),
    `cent` (T - 0.01), `yes` (above), `no` (below), `over` (T reached only with `hidden`, a
    refund the final balance holds, counted), `under` (T missed by less than `hidden`, a refund
    a refused cancel or a naive order of steps would add)."""
    rng = c.s.rng
    t = round((math.ceil(base) if whole else base) + rng.randint(0, 30), 2)
    while True:
        final = {
            "exact": t,
            "cent": t - 0.01,
            "yes": t + rng.uniform(1, 30),
            "no": t - rng.uniform(1, 30),
            "over": t + rng.uniform(0, hidden * 0.8),  # reached only with `hidden` in `known`
            "under": t - rng.uniform(0.01, hidden),  # missed by less than `hidden`
        }[case]
        start = round(final - known, 2)
        if start >= 0:
            return start, t
        t = round(t + math.ceil(-start) + rng.randint(1, 10), 2)


def pays_off(start: float, known: float, t: float) -> bool:
    return round(start + known, 2) >= t


def account_cleanup(c: Ctx) -> Draft:
    """Return found by month + option, a cancel that refunds the gift card (or is refused), a
    payment switch on the balance after both refunds, a move of every pending order."""
    by = ("email", "zip")[c.k]
    p = c.person()
    visa = p.methods["visa"]
    gift = c.s.gift_card(p, 0.0)  # its balance is set once the amounts are known
    rng, cat = c.s.rng, c.cat
    # The returned product has two options at least: one bought in the month, one not.
    pids = [
        pid for pid, vs in sorted(cat.by_product.items()) if len({v["options"] for v in vs}) >= 2
    ]
    pid = rng.choice(cat.base.fresh(pids) if cat.prefer_fresh else pids)
    variants = cat.product(pid)
    target, other = rng.sample(variants, 2)
    while other["options"] == target["options"]:
        other = rng.choice(variants)
    c.s.used.add(target["product_id"])
    c.s.used.add(pid)
    others = [v for v in cat.variants if v["product_id"] != pid]
    # 25-40 delivered orders, two days apart at least, over about eleven months.
    days = sorted(2 * d for d in rng.sample(range(10, 170), rng.randint(25, 40)))

    def month(d: float) -> tuple[int, int] | None:
        """The (year, month) an order `d` days back lands in whatever its time of day, or None
        when it could straddle a month's edge."""
        a, b = NOW - timedelta(days=d), NOW - timedelta(days=d + 1)
        return (a.year, a.month) if (a.year, a.month) == (b.year, b.month) else None

    by_month: dict[tuple[int, int], list[int]] = {}
    for d in days:
        m = month(d)
        if m is not None:
            by_month.setdefault(m, []).append(d)
    months = [m for m, ds in sorted(by_month.items()) if len(ds) >= 2]
    when = rng.choice(months)
    day_target, day_other = rng.sample(by_month[when], 2)
    day_alike = rng.choice([d for m, ds in by_month.items() if m != when for d in ds])
    orders: dict[int, OrderInfo] = {}
    for d in days:
        items = [rng.choice(others) for _ in range(rng.randint(1, 2))]
        if d == day_target:
            items = [target, *items[:1]]
        elif d == day_other:
            items = [*items[:1], other]
        elif d == day_alike:
            items = [target]
        orders[d] = c.s.order(p, "delivered", items, visa, d)
    returned = orders[day_target]
    in_month = [orders[d] for d in sorted(by_month[when])]  # newest first, as the list shows
    # The cancel: allowed, or forbidden by the order's status or owner; p's is partly gift paid.
    rule = c.rule("order_not_pending", "order_not_pending", "other_customer")
    owner = c.owner(p, rule)
    status = rng.choice(NOT_PENDING[:2]) if rule == "order_not_pending" else "pending"
    doomed_item = rng.choice(others)
    g = round(doomed_item["price"] * rng.uniform(0.3, 0.8), 2)
    pay: Any = [(gift, g), (visa, 0.0)] if owner is p else owner.methods["visa"]
    doomed = c.s.order(owner, status, [doomed_item], pay, 2)
    gift_back = g if owner is p and not rule else 0.0
    hidden = g if owner is p else round(rng.uniform(5, 30), 2)
    switch = c.s.order(p, "pending", [rng.choice(others)], visa, 1)
    stay = c.s.order(p, "pending", [rng.choice(others)], visa, 0.5)
    refund = target["price"]
    cases: tuple[str, ...] = ("exact", "cent", "yes", "no")
    if owner is p:  # the partly gift-paid order's refund decides, or would for a naive order
        cases += ("under", "under") if rule else ("over", "over", "under")
    case = rng.choice(cases)
    known = round(refund + gift_back, 2)
    start, t = threshold(c, case, switch.total, known, hidden)
    gift_balance(c, gift, start)
    pays = pays_off(start, known, t)
    new = c.s.new_address()
    y, mo = when
    prompt = (
        f"{hello(p, by)} A few things today. First, return the {target['product']} "
        f"({nice(target['options'])}) I bought in {MONTHS[mo - 1]} {y}; it's defective. Put the "
        f"refund on my gift card. Second, please cancel my order {doomed.number}, I no longer "
        f"need it. Third, once both of those are done: if my gift card then holds at least "
        f"${money(t)}, pay my pending order {switch.number} with the gift card instead of my "
        f"Visa; otherwise leave that order's payment alone. Last, I've moved: make "
        f"{addr_text(new)} my default address and send every order of mine that is still "
        f"pending there. {GO}"
    )
    gold = [auth(p, by)]
    if by == "zip":
        gold.append(C("get_customer_details", customer_id=p.id))
    gold.append(C("list_customer_orders", customer_id=p.id))
    gold += [C("get_order_details", order_number=o.number) for o in in_month]
    gold += [
        C("get_customer_details", customer_id=p.id),
        C(
            "return_delivered_order_items",
            order_number=returned.number,
            customer_id=p.id,
            skus=[target["sku"]],
            reason="defective",
            refund_method_id=gift,
        ),
        C("get_order_details", order_number=doomed.number),
    ]
    cancel = C(
        "cancel_pending_order",
        order_number=doomed.number,
        customer_id=p.id,
        reason="no_longer_needed",
    )
    if not rule:
        gold.append(cancel)
    gold += [
        C("get_customer_details", customer_id=p.id),
        C("get_order_details", order_number=switch.number),
    ]
    if pays:
        gold.append(
            C(
                "modify_pending_order_payment",
                order_number=switch.number,
                customer_id=p.id,
                payment_method_id=gift,
            )
        )
    gold.append(C("update_customer_default_address", customer_id=p.id, **new))
    for o in (switch, stay):
        if o is not switch:
            gold.append(C("get_order_details", order_number=o.number))
        gold.append(
            C("modify_pending_order_address", order_number=o.number, customer_id=p.id, **new)
        )
    if rule:
        return Draft(
            "hard_account_cleanup", prompt, gold, True, decline=rule, forbidden=(cancel, rule)
        )
    return Draft("hard_account_cleanup", prompt, gold, True)


def _paid(c: Ctx, p: Person, gift: str, item: dict[str, Any]) -> tuple[Any, float]:
    """How a swept order is paid (gift card, gift card + Visa, Visa): payments, gift part."""
    kind = c.s.rng.choice(("gift", "split", "split", "visa"))
    if kind == "gift":
        return gift, round(item["price"], 2)
    if kind == "split":
        g = round(item["price"] * c.s.rng.uniform(0.2, 0.8), 2)
        return [(gift, g), (p.methods["visa"], 0.0)], g
    return p.methods["visa"], 0.0


def cancel_sweep(c: Ctx) -> Draft:
    """Cancel every order since a date (some may have moved on: each declined by number), then a
    gift card payment that depends on the refunds of the cancels that happened."""
    by = ("email", "zip")[c.k]
    p = c.person()
    visa = p.methods["visa"]
    gift = c.s.gift_card(p, 0.0)
    rng, cat = c.s.rng, c.cat
    for k in range(rng.randint(10, 18)):  # older, settled orders
        items = [cat.background(rng, c.s.used) for _ in range(rng.randint(1, 2))]
        c.s.order(p, "delivered", items, visa, 12 + 9 * k + rng.uniform(0, 6))
    # The one to pay, and a pending order of the day before the cutoff (not swept).
    target = c.s.order(p, "pending", [cat.item(rng, c.s.used)], visa, rng.uniform(6.5, 9))
    c.s.order(p, "pending", [cat.item(rng, c.s.used)], visa, rng.uniform(5.45, 5.5))
    # Swept: placed from 00:00 on the cutoff day (5 days and 10 hours back) on.
    n = rng.randint(4, 6)
    refused = rng.sample(range(n), rng.randint(1, 2)) if not c.allowed() else []
    swept = []
    for i in range(n):
        item = cat.item(rng, c.s.used)
        pay, g = _paid(c, p, gift, item)
        if i in refused and g == 0.0:  # a refused order's gift part is what a naive count adds
            g = round(item["price"] * rng.uniform(0.3, 0.7), 2)
            pay = [(gift, g), (visa, 0.0)]
        status = rng.choice(NOT_PENDING[:2]) if i in refused else "pending"
        days = 4.45 if i == 0 else rng.uniform(0.05, 4.4)
        swept.append((c.s.order(p, status, [item], pay, days), g, status))
    swept.sort(key=lambda s: _placed(c, s[0].id), reverse=True)  # as the list shows them
    cancelled = [(o, g) for o, g, st in swept if st == "pending"]
    declined = [o for o, _, st in swept if st != "pending"]
    known = round(sum(g for _, g in cancelled), 2)
    hidden = round(sum(g for o, g, _ in swept if o in declined), 2)
    cases: tuple[str, ...] = ("exact", "cent", "yes", "no") + (
        ("under", "under") if declined else ()
    )
    case = rng.choice(cases)
    keep = float(rng.randint(5, 40))
    start, t = threshold(c, case, target.total + keep, known, hidden or 10.0, whole=False)
    keep = round(t - target.total, 2)  # the threshold, as what stays after paying
    gift_balance(c, gift, start)
    pays = pays_off(start, known, t)
    day = (NOW - timedelta(days=5.4)).date()
    prompt = (
        f"{hello(p, by)} Please cancel every order I placed on or after "
        f"{MONTHS[day.month - 1]} {day.day}, {day.year} (that day included); I no longer need "
        f"them. Once those cancellations are done, pay my order {target.number} with my gift "
        f"card instead of my Visa, but only if at least ${money(keep)} would still be left on "
        f"the gift card after paying it; otherwise leave that order as it is. {GO}"
    )
    gold = [auth(p, by)]
    if by == "zip":
        gold.append(C("get_customer_details", customer_id=p.id))
    gold.append(C("list_customer_orders", customer_id=p.id))
    writes = []
    for o, _, st in swept:
        gold.append(C("get_order_details", order_number=o.number))
        call = C(
            "cancel_pending_order",
            order_number=o.number,
            customer_id=p.id,
            reason="no_longer_needed",
        )
        writes.append(call)
        if st == "pending":
            gold.append(call)
    gold += [
        C("get_customer_details", customer_id=p.id),
        C("get_order_details", order_number=target.number),
    ]
    if pays:
        gold.append(
            C(
                "modify_pending_order_payment",
                order_number=target.number,
                customer_id=p.id,
                payment_method_id=gift,
            )
        )
    if not declined:
        return Draft("hard_cancel_sweep", prompt, gold, True)
    refused_calls = [w for w, (_, _, st) in zip(writes, swept, strict=True) if st != "pending"]
    return Draft(
        "hard_cancel_sweep",
        prompt,
        gold,
        True,
        decline="order_not_pending",
        forbidden=(refused_calls[0], "order_not_pending"),
        also_refused=tuple(refused_calls[1:]),
    )
