"""The hard tier: one conversation, four intents that interact, over a long order history.

`account_cleanup` (difficulty 5, gold of 11-15 calls):
- search: return an item from the order placed on a given date, among 10-24 delivered orders
  (only the list's dates find it), refunded to the gift card;
- a cancel the data may forbid (the order has moved on, or is another customer's): then the gold
  does everything else and declines with that rule's code;
- a condition on a computed balance: pay a pending order with the gift card only if it holds at
  least a stated amount *after* the return's refund (before it, after it, or never enough: the
  story draws which), so the order of the changes matters;
- a new default address that every order still pending must follow (not a cancelled one).
Fair: every fact is in the request, the policy or a tool's output; the gold scores 1, a no-op 0.
"""

from __future__ import annotations

import math

from envs.retail.taskgen.kit import (
    GO,
    NOT_PENDING,
    C,
    Ctx,
    Draft,
    addr_text,
    auth,
    hello,
    money,
    the,
)


def account_cleanup(c: Ctx) -> Draft:
    """Return by date, cancel (the data may forbid it), a conditional payment switch, a move."""
    by = ("email", "zip")[c.k]
    p = c.person()
    gift = c.s.gift_card(p, 0.0)  # its balance is set once the amounts are known
    rng, cat = c.s.rng, c.cat
    # The returned item's product appears in no other order of the story.
    target = cat.item(rng, c.s.used)
    others = [v for v in cat.variants if v["product_id"] != target["product_id"]]
    # Two days apart at least: with the orders' time of day, no two share a calendar date.
    days = sorted(2 * d for d in rng.sample(range(10, 200), rng.randint(10, 24)))
    when = rng.choice(days)
    for d in days:
        items = [rng.choice(others) for _ in range(rng.randint(1, 2))]
        if d == when:
            items = [target, *items[:1]]
        o = c.s.order(p, "delivered", items, p.methods["visa"], d)
        if d == when:
            returned = o
    placed = next(o for o in c.s.rows["orders"] if o["id"] == returned.id)["created_at"]
    date = placed[:10]
    # The cancel: allowed, or forbidden by the order's status or owner.
    rule = c.rule("order_not_pending", "other_customer")
    owner = c.owner(p, rule)
    status = rng.choice(NOT_PENDING[:2]) if rule == "order_not_pending" else "pending"
    doomed = c.s.order(owner, status, [rng.choice(others)], owner.methods["visa"], 2)
    # Two pending orders follow the new address; the first may switch to the gift card.
    switch = c.s.order(p, "pending", [rng.choice(others)], p.methods["visa"], 1)
    stay = c.s.order(p, "pending", [rng.choice(others)], p.methods["visa"], 0.5)
    refund = target["price"]
    threshold = float(math.ceil(switch.total))
    case = rng.choice(("before", "after", "never"))
    balance = {
        "before": threshold + rng.uniform(1, 60),
        "after": max(0.0, threshold - refund * rng.uniform(0.2, 0.9)),
        "never": max(0.0, threshold - refund - rng.uniform(1, 40)),
    }[case]
    balance = round(balance, 2)
    rows = c.s.rows["payment_methods"]
    next(m for m in rows if m["code"] == gift)["balance"] = balance
    pays = round(balance + refund, 2) >= threshold
    new = c.s.new_address()
    prompt = (
        f"{hello(p, by)} A few things today. First, return {the(target)} from the order I placed "
        f"on {date}; it's defective. Put the refund on my gift card. Second, please cancel my "
        f"order {doomed.number}, I no longer need it. Third, once the refund is on the gift "
        f"card: if it then holds at least ${money(threshold)}, pay my pending order "
        f"{switch.number} with the gift card instead of my Visa; otherwise leave that order's "
        f"payment alone. Last, I've moved: make {addr_text(new)} my default address and send "
        f"every order of mine that is still pending there. {GO}"
    )
    gold = [auth(p, by)]
    if by == "zip":
        gold.append(C("get_customer_details", customer_id=p.id))
    gold += [
        C("list_customer_orders", customer_id=p.id),
        C("get_order_details", order_number=returned.number),
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
    if not rule:
        gold.append(
            C(
                "cancel_pending_order",
                order_number=doomed.number,
                customer_id=p.id,
                reason="no_longer_needed",
            )
        )
    gold.append(C("get_order_details", order_number=switch.number))
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
        return Draft("hard_account_cleanup", prompt, gold, True, decline=rule)
    return Draft("hard_account_cleanup", prompt, gold, True)
