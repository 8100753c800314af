"""Stories with several requests or orders in one conversation (difficulty 5 to 8)."""

from __future__ import annotations

from envs.retail.taskgen.kit import (
    GO,
    NOT_PENDING,
    C,
    Ctx,
    Draft,
    addr_text,
    auth,
    hello,
    nice,
    the,
)

# ---- several entities in one conversation -------------------------------------------------------


def cancel_two(c: Ctx) -> Draft:
    """Both recent orders cancelled; or (the forbidden twin) the older has moved on: cancel the
    newer, decline the other."""
    rule = c.rule("order_not_pending")
    p = c.person()
    c.s.history(p, c.cat, 1)
    avoid = c.s.used
    a = c.s.order(p, "pending", [c.cat.item(c.s.rng, avoid)], p.methods["visa"], 1)
    status = c.s.rng.choice(NOT_PENDING[:2]) if rule else "pending"
    b = c.s.order(p, status, [c.cat.item(c.s.rng, avoid)], c.s.gift_card(p, 20.0), 2)
    prompt = (
        f"{hello(p, 'email')} Please cancel my two most recent orders; I no longer need them. {GO}"
    )
    gold = [
        auth(p, "email"),
        C("list_customer_orders", customer_id=p.id),
        C("get_order_details", order_number=a.number),
        C("get_order_details", order_number=b.number),
        C("cancel_pending_order", order_number=a.number, customer_id=p.id,
          reason="no_longer_needed"),
    ]  # fmt: skip
    if rule:
        return Draft("multi_cancel", prompt, gold, True, decline=rule)
    gold.append(
        C(
            "cancel_pending_order",
            order_number=b.number,
            customer_id=p.id,
            reason="no_longer_needed",
        )
    )
    return Draft("multi_cancel", prompt, gold, True)


def cancel_one_of_two(c: Ctx) -> Draft:
    """One order can be cancelled, the other has shipped: do the first, explain the second."""
    p = c.person()
    avoid = c.s.used
    a = c.s.order(p, "pending", [c.cat.item(c.s.rng, avoid)], p.methods["visa"], 1)
    b = c.s.order(p, "shipped", [c.cat.item(c.s.rng, avoid)], p.methods["visa"], 5)
    prompt = (
        f"{hello(p, 'email')} I ordered two things by mistake: {the(a.lines[0][0])} and "
        f"{the(b.lines[0][0])}. Please cancel both orders. {GO}"
    )
    gold = [
        auth(p, "email"),
        C("list_customer_orders", customer_id=p.id),
        C("get_order_details", order_number=a.number),
        C("get_order_details", order_number=b.number),
        C("cancel_pending_order", order_number=a.number, customer_id=p.id,
          reason="ordered_by_mistake"),
    ]  # fmt: skip
    # The pending order is cancelled, the shipped one declined: an action and a refusal.
    return Draft("multi_partial_refusal", prompt, gold, True, decline="order_not_pending")


def cancel_and_return(c: Ctx) -> Draft:
    p = c.person()
    avoid = c.s.used
    gift = c.s.gift_card(p, 5.0)
    a = c.s.order(p, "pending", [c.cat.item(c.s.rng, avoid)], p.methods["visa"], 1)
    b = c.s.order(
        p,
        "delivered",
        [c.cat.item(c.s.rng, avoid), c.cat.item(c.s.rng, avoid)],
        p.methods["visa"],
        20,
    )
    vb = b.lines[1][0]
    prompt = (
        f"{hello(p, 'email')} Two things. Cancel my pending order {a.number}, I ordered it by "
        f"mistake. And return {the(vb)} from order {b.number}, it is defective; put that refund "
        f"on my gift card. {GO}"
    )
    gold = [
        auth(p, "email"),
        C("list_customer_orders", customer_id=p.id),
        C("get_order_details", order_number=a.number),
        C(
            "cancel_pending_order",
            order_number=a.number,
            customer_id=p.id,
            reason="ordered_by_mistake",
        ),
        C("get_order_details", order_number=b.number),
        C("get_customer_details", customer_id=p.id),
        C(
            "return_delivered_order_items",
            order_number=b.number,
            customer_id=p.id,
            skus=[vb["sku"]],
            reason="defective",
            refund_method_id=gift,
        ),
    ]
    return Draft("multi_cancel_return", prompt, gold, True)


def move_everything(c: Ctx) -> Draft:
    """New default address, and both pending orders re-routed to it."""
    by = ("email", "zip")[c.k]
    p = c.person()
    c.s.history(p, c.cat, 1)
    avoid = c.s.used
    a = c.s.order(p, "pending", [c.cat.item(c.s.rng, avoid)], p.methods["visa"], 1)
    b = c.s.order(p, "pending", [c.cat.item(c.s.rng, avoid)], p.methods["visa"], 2)
    new = c.s.new_address()
    prompt = (
        f"{hello(p, by)} I'm moving tomorrow. Make {addr_text(new)} my default address, and send "
        f"all my pending orders there too. {GO}"
    )
    gold = [auth(p, by)]
    if by == "zip":
        gold.append(C("get_customer_details", customer_id=p.id))
    gold += [
        C("update_customer_default_address", customer_id=p.id, **new),
        C("list_customer_orders", customer_id=p.id, status="pending"),
    ]
    for o in (a, b):
        gold += [
            C("get_order_details", order_number=o.number),
            C("modify_pending_order_address", order_number=o.number, customer_id=p.id, **new),
        ]
    return Draft("multi_address", prompt, gold, True)


def exchange_and_cancel(c: Ctx) -> Draft:
    p = c.person()
    avoid = c.s.used
    old, new = c.cat.swap(c.s.rng, avoid, "up")
    gift = c.s.gift_card(p, 150.0)
    a = c.s.order(p, "delivered", [old], p.methods["visa"], 10)
    b = c.s.order(p, "pending", [c.cat.item(c.s.rng, avoid)], gift, 1)
    prompt = (
        f"{hello(p, 'email')} I'd like to exchange the {old['product']} I received for "
        f"{nice(new['options'])} and pay the difference with my gift card. Also please cancel my "
        f"pending order, I no longer need it. {GO}"
    )
    gold = [
        auth(p, "email"),
        C("get_customer_details", customer_id=p.id),
        C("list_customer_orders", customer_id=p.id),
        C("get_order_details", order_number=a.number),
        C("get_product_details", product_id=old["product_id"]),
        C(
            "exchange_delivered_order_items",
            order_number=a.number,
            customer_id=p.id,
            from_skus=[old["sku"]],
            to_skus=[new["sku"]],
            payment_method_id=gift,
        ),
        C("get_order_details", order_number=b.number),
        C(
            "cancel_pending_order",
            order_number=b.number,
            customer_id=p.id,
            reason="no_longer_needed",
        ),
    ]
    return Draft("multi_exchange_cancel", prompt, gold, True)


def rework_order(c: Ctx) -> Draft:
    """Items, address and payment of one pending order, in that order."""
    p = c.person()
    avoid = c.s.used
    old, new = c.cat.swap(c.s.rng, avoid, "up")
    gift = c.s.gift_card(p, 900.0)
    o = c.s.order(p, "pending", [old, c.cat.item(c.s.rng, avoid)], p.methods["visa"])
    addr = c.s.new_address()
    prompt = (
        f"{hello(p, 'email')} Three changes to my pending order {o.number}: the {old['product']} "
        f"should be {nice(new['options'])} (charge the difference to my Visa), ship it to "
        f"{addr_text(addr)}, and once that is done, pay the whole order (difference included) "
        f"with my gift card instead. {GO}"
    )
    gold = [
        auth(p, "email"),
        C("get_customer_details", customer_id=p.id),
        C("get_order_details", order_number=o.number),
        C("get_product_details", product_id=old["product_id"]),
        C(
            "modify_pending_order_items",
            order_number=o.number,
            customer_id=p.id,
            from_skus=[old["sku"]],
            to_skus=[new["sku"]],
            payment_method_id=p.methods["visa"],
        ),
        C("modify_pending_order_address", order_number=o.number, customer_id=p.id, **addr),
        C(
            "modify_pending_order_payment",
            order_number=o.number,
            customer_id=p.id,
            payment_method_id=gift,
        ),
    ]
    return Draft("multi_modify", prompt, gold, True)


def return_and_repay(c: Ctx) -> Draft:
    """A return, and a payment switch the gift card's balance may not cover (then declined)."""
    rule = c.rule("insufficient_balance")
    p = c.person()
    avoid = c.s.used
    gift = c.s.gift_card(p, 0.0)
    a = c.s.order(p, "delivered", [c.cat.item(c.s.rng, avoid)], p.methods["visa"], 14)
    b = c.s.order(p, "pending", [c.cat.item(c.s.rng, avoid)], p.methods["visa"], 1)
    balance = b.total * (c.s.rng.uniform(0.2, 0.95) if rule else c.s.rng.uniform(1.0, 3.0))
    next(m for m in c.s.rows["payment_methods"] if m["code"] == gift)["balance"] = round(
        max(balance, b.total if not rule else 0.0), 2
    )
    va = a.lines[0][0]
    prompt = (
        f"{hello(p, 'email')} Please return {the(va)} I received, it's not as described; refund "
        f"it to my Visa. And my pending order should be paid with my gift card, not the Visa. {GO}"
    )
    gold = [
        auth(p, "email"),
        C("list_customer_orders", customer_id=p.id),
        C("get_order_details", order_number=a.number),
        C(
            "return_delivered_order_items",
            order_number=a.number,
            customer_id=p.id,
            skus=[va["sku"]],
            reason="not_as_described",
            refund_method_id=p.methods["visa"],
        ),
        C("get_order_details", order_number=b.number),
        C("get_customer_details", customer_id=p.id),
    ]
    if rule:
        return Draft("multi_return_payment", prompt, gold, True, decline=rule)
    gold.append(
        C(
            "modify_pending_order_payment",
            order_number=b.number,
            customer_id=p.id,
            payment_method_id=gift,
        )
    )
    return Draft("multi_return_payment", prompt, gold, True)


def return_and_exchange(c: Ctx) -> Draft:
    p = c.person()
    avoid = c.s.used
    old, new = c.cat.swap(c.s.rng, avoid, "down")
    a = c.s.order(p, "delivered", [c.cat.item(c.s.rng, avoid)], p.methods["visa"], 25)
    b = c.s.order(p, "delivered", [old, c.cat.item(c.s.rng, avoid)], p.methods["visa"], 12)
    gift = c.s.gift_card(p, 0.0)
    va = a.lines[0][0]
    prompt = (
        f"{hello(p, 'email')} I have two delivered orders. Return {the(va)}, it was the wrong "
        f"item; refund to my gift card. And exchange the {old['product']} for "
        f"{nice(new['options'])}; any refund of the difference can go to my Visa. {GO}"
    )
    gold = [
        auth(p, "email"),
        C("list_customer_orders", customer_id=p.id, status="delivered"),
        C("get_order_details", order_number=a.number),
        C("get_order_details", order_number=b.number),
        C("get_product_details", product_id=old["product_id"]),
        C("get_customer_details", customer_id=p.id),
        C(
            "return_delivered_order_items",
            order_number=a.number,
            customer_id=p.id,
            skus=[va["sku"]],
            reason="wrong_item",
            refund_method_id=gift,
        ),
        C(
            "exchange_delivered_order_items",
            order_number=b.number,
            customer_id=p.id,
            from_skus=[old["sku"]],
            to_skus=[new["sku"]],
            payment_method_id=p.methods["visa"],
        ),
    ]
    return Draft("multi_return_exchange", prompt, gold, True)
