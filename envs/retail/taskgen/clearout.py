"""The hard tier's computing family: return everything of one month, sum the refunds, and let
that sum decide a payment switch.

`clear_out` (difficulty 5): among 20-35 orders, the month's delivered orders give back every
line not returned yet (one call per order, every line of it at once; a quantity-2 line refunds
twice its price); a cancelled order of the month and orders placed minutes outside the month are
look-alikes the list's timestamps rule out. The total refunded is submitted (no tool states it),
then a pending order switches to the gift card only if the balance reaches a stated amount.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from envs.retail.taskgen.hard import MONTHS, gift_balance, pays_off, threshold
from envs.retail.taskgen.kit import (
    GO,
    NOW,
    C,
    Ctx,
    Draft,
    OrderInfo,
    auth,
    hello,
    money,
)


def _at(c: Ctx, o: OrderInfo, when: datetime) -> None:
    """Place order `o` (and its charges) at `when` exactly."""
    stamp = when.replace(microsecond=0).isoformat()
    next(r for r in c.s.rows["orders"] if r["id"] == o.id)["created_at"] = stamp
    for r in c.s.rows["payments"]:
        if r["order_id"] == o.id:
            r["created_at"] = stamp


def clear_out(c: Ctx) -> Draft:
    """Return every delivered, not yet returned item of a month to the gift card; answer the
    total; switch a pending order's payment if the balance then reaches the amount."""
    by = ("email", "zip")[c.k]
    p = c.person()
    visa = p.methods["visa"]
    gift = c.s.gift_card(p, 0.0)
    rng, cat = c.s.rng, c.cat
    back = rng.randint(3, 9)  # the month, counted back from the current one
    y, m = NOW.year, NOW.month - back
    while m < 1:
        y, m = y - 1, m + 12
    start = datetime(y, m, 1)
    end = datetime(y + (m == 12), m % 12 + 1, 1)
    # Older and newer settled orders, two days or more from the month's edges.
    for _ in range(rng.randint(14, 26)):
        while True:
            d = rng.uniform(12, 330)
            when = NOW - timedelta(days=d)
            if not start - timedelta(days=2) <= when < end + timedelta(days=2):
                break
        items = [rng.choice(cat.variants) for _ in range(rng.randint(1, 2))]
        _at(c, c.s.order(p, "delivered", items, visa, d), when)
    # Minutes outside the month on either side: delivered, nothing of them goes back.
    for edge in (start - timedelta(minutes=rng.randint(3, 50)), end + timedelta(minutes=5)):
        _at(c, c.s.order(p, "delivered", [cat.item(rng, c.s.used)], visa, 1), edge)
    # The month: 3-4 delivered orders (a quantity-2 line, a line returned already, a two-line
    # order), and maybe a cancelled one.
    span = (end - start).total_seconds() - 2 * 86400
    slots = sorted(rng.sample(range(1, 40), 5))
    n = rng.randint(3, 4)
    month: list[tuple[OrderInfo, list[dict[str, Any]], str]] = []
    for i in range(n + (rng.random() < 0.6)):
        status = "cancelled" if i == n else "delivered"
        count = 2 if i in (0, 1) else rng.randint(1, 2)
        items = [cat.item(rng, c.s.used) for _ in range(count)]
        o = c.s.order(p, status, items, visa, 1, qty=2 if i == 2 else 1)
        _at(c, o, start + timedelta(days=1, seconds=span * slots[i] / 40))
        if i == 0:
            c.s.mark_returned(o)
            items = items[1:]
        month.append((o, items, status))
    rng.shuffle(month)
    target = c.s.order(p, "pending", [cat.item(rng, c.s.used)], visa, 0.8)
    returned = [(o, items) for o, items, status in month if status == "delivered"]
    total = round(sum(v["price"] * q for o, items in returned for v, q in o.lines if v in items), 2)
    # The line returned already: a sum of the month's order totals counts it.
    old = next(o for o, items, _ in month if len(items) < len(o.lines))
    hidden = round(old.lines[0][0]["price"], 2)
    case = rng.choice(("exact", "cent", "yes", "no", "under", "under"))
    begin, t = threshold(c, case, target.total, total, hidden)
    gift_balance(c, gift, begin)
    pays = pays_off(begin, total, t)
    prompt = (
        f"{hello(p, by)} I'm clearing out. Please return every item I bought in "
        f"{MONTHS[m - 1]} {y} that was delivered and that I haven't already sent back (reason: "
        f"no longer needed), with every refund going to my gift card, and tell me the total "
        f"amount refunded. Then, if my gift card holds at least ${money(t)}, pay my pending "
        f"order {target.number} with it instead of my Visa; otherwise leave that order alone. "
        f"{GO}"
    )
    gold = [auth(p, by)]
    if by == "zip":
        gold.append(C("get_customer_details", customer_id=p.id))
    gold += [
        C("list_customer_orders", customer_id=p.id),
        C("get_customer_details", customer_id=p.id),
    ]
    listed = sorted(month, key=lambda e: e[0].id, reverse=True)
    listed.sort(
        key=lambda e: next(r for r in c.s.rows["orders"] if r["id"] == e[0].id)["created_at"],
        reverse=True,
    )
    for o, items, status in listed:
        gold.append(C("get_order_details", order_number=o.number))
        if status == "delivered":
            gold.append(
                C(
                    "return_delivered_order_items",
                    order_number=o.number,
                    customer_id=p.id,
                    skus=[v["sku"] for v in items],
                    reason="no_longer_needed",
                    refund_method_id=gift,
                )
            )
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
    return Draft("hard_clear_out", prompt, gold, True, answer=("amount", money(total)))
