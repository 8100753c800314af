"""Single-request write stories: one change the customer asks for, after the reads it needs."""

from __future__ import annotations

from typing import Any

from envs.retail.taskgen.kit import (
    GO,
    C,
    Ctx,
    Draft,
    addr_text,
    auth,
    hello,
    nice,
    the,
)

# ---- single writes ------------------------------------------------------------------------------


def update_default_address(c: Ctx) -> Draft:
    by = ("email", "zip")[c.k]
    p = c.person()
    c.s.history(p, c.cat, 1)
    new = c.s.new_address()
    prompt = f"{hello(p, by)} I just moved. Please make {addr_text(new)} my default address. {GO}"
    gold = [auth(p, by)]
    if by == "zip":
        gold.append(C("get_customer_details", customer_id=p.id))
    gold.append(C("update_customer_default_address", customer_id=p.id, **new))
    return Draft("update_default_address", prompt, gold, True)


def cancel(c: Ctx) -> Draft:
    by = ("email", "email", "zip", "email")[c.k]
    reason = ("ordered_by_mistake", "no_longer_needed")[c.k % 2]
    why = {
        "ordered_by_mistake": "I ordered it by mistake",
        "no_longer_needed": "I no longer need it",
    }
    p = c.person()
    c.s.history(p, c.cat)
    avoid = c.s.used
    items = [c.cat.item(c.s.rng, avoid) for _ in range(1 + c.k % 2)]
    if c.k == 1:  # split payment: part gift card, part card
        part = round(min(25.0, sum(v["price"] for v in items) * 0.4), 2)
        pay: Any = [(c.s.gift_card(p, 15.0), part), (p.methods["visa"], 0.0)]
    else:
        pay = c.s.gift_card(p, 40.0) if c.k == 0 else p.methods["visa"]
    o = c.s.order(p, "pending", items, pay)
    gold = [auth(p, by)]
    if c.k < 2:
        ask = f"Please cancel order {o.number}, {why[reason]}."
    else:
        c.s.order(p, "pending", [c.cat.item(c.s.rng, avoid)], p.methods["visa"], 2)
        ask = f"Please cancel my pending order with {the(items[0])} in it; {why[reason]}."
        gold.append(C("list_customer_orders", customer_id=p.id, status="pending"))
    gold += [
        C("get_order_details", order_number=o.number),
        C("cancel_pending_order", order_number=o.number, customer_id=p.id, reason=reason),
    ]
    return Draft("cancel", f"{hello(p, by)} {ask} {GO}", gold, True)


def modify_address(c: Ctx) -> Draft:
    p = c.person()
    c.s.history(p, c.cat, 1)
    o = c.s.order(p, "pending", [c.cat.item(c.s.rng, c.s.used)], p.methods["visa"])
    gold = [auth(p, "email")]
    if c.k < 2:
        new = c.s.new_address()
        ask = f"Please ship my order {o.number} to {addr_text(new)} instead."
    else:
        new = c.s.second_address(p)
        ask = f"Please ship order {o.number} to my other address on file, the one in {new['city']}."
        gold.append(C("get_customer_details", customer_id=p.id))
    gold += [
        C("get_order_details", order_number=o.number),
        C("modify_pending_order_address", order_number=o.number, customer_id=p.id, **new),
    ]
    return Draft("modify_address", f"{hello(p, 'email')} {ask} {GO}", gold, True)


def modify_payment(c: Ctx) -> Draft:
    p = c.person()
    gift = c.s.gift_card(p, 480.0)
    o = c.s.order(p, "pending", [c.cat.item(c.s.rng, c.s.used)], (p.methods["visa"], gift)[c.k])
    if c.k == 0:
        target, ask = gift, "pay it with my gift card instead of my Visa"
    else:
        target = c.s.card(p, "mastercard")
        ask = f"charge my Mastercard ending in {c.s.last4(target)} instead of the gift card"
    prompt = f"{hello(p, 'email')} For my pending order {o.number}, please {ask}. {GO}"
    gold = [
        auth(p, "email"),
        C("get_customer_details", customer_id=p.id),
        C("get_order_details", order_number=o.number),
        C("modify_pending_order_payment", order_number=o.number, customer_id=p.id,
          payment_method_id=target),
    ]  # fmt: skip
    return Draft("modify_payment", prompt, gold, True)


def modify_items(c: Ctx) -> Draft:
    by = "zip" if c.k == 2 else "email"
    p = c.person()
    c.s.history(p, c.cat, 1)
    avoid = c.s.used
    swaps = [c.cat.swap(c.s.rng, avoid, ("up", "down", "up", "up")[c.k])]
    if c.k == 3:
        swaps.append(c.cat.swap(c.s.rng, avoid, "down"))
    gift = c.s.gift_card(p, 300.0)
    o = c.s.order(
        p, "pending", [old for old, _ in swaps] + [c.cat.item(c.s.rng, avoid)], p.methods["visa"]
    )
    payer = {0: p.methods["visa"], 1: gift, 2: p.methods["visa"], 3: gift}[c.k]
    pay_text = "my gift card" if payer == gift else "my Visa"
    changes = " and ".join(f"the {old['product']} to {nice(new['options'])}" for old, new in swaps)
    prompt = (
        f"{hello(p, by)} In my pending order, please change {changes}. Settle any price "
        f"difference with {pay_text}. {GO}"
    )
    gold = [auth(p, by)]
    gold.append(
        C("get_customer_details", customer_id=p.id)
        if c.k in (1, 3)
        else C("list_customer_orders", customer_id=p.id, status="pending")
    )
    gold.append(C("get_order_details", order_number=o.number))
    gold += [C("get_product_details", product_id=old["product_id"]) for old, _ in swaps]
    gold.append(
        C(
            "modify_pending_order_items",
            order_number=o.number,
            customer_id=p.id,
            from_skus=[old["sku"] for old, _ in swaps],
            to_skus=[new["sku"] for _, new in swaps],
            payment_method_id=payer,
        )
    )
    if c.k in (1, 3):  # the customer names the order number, the gold needs no order list
        prompt = prompt.replace("my pending order", f"my pending order {o.number}")
    return Draft("modify_items", prompt, gold, True)


def return_items(c: Ctx) -> Draft:
    p = c.person()
    c.s.history(p, c.cat, 1)
    avoid = c.s.used
    items = [c.cat.item(c.s.rng, avoid) for _ in range(3)]
    o = c.s.order(p, "delivered", items, p.methods["visa"], 9)
    back = items[:1] if c.k != 1 else items[:2]
    reason = ("defective", "no_longer_needed", "wrong_item")[c.k]
    why = {
        "defective": "it arrived broken",
        "no_longer_needed": "I don't need them anymore",
        "wrong_item": "it's not the item I ordered",
    }[reason]
    gold = [auth(p, "email")]
    refund_to, where = p.methods["visa"], "my Visa"
    if c.k == 2:
        refund_to, where = c.s.gift_card(p, 10.0), "my gift card"
        gold.append(C("get_customer_details", customer_id=p.id))
    what = " and ".join(the(v) for v in back)
    prompt = (
        f"{hello(p, 'email')} I want to return {what} from my latest delivered order; {why}. "
        f"Refund it to {where}. {GO}"
    )
    gold += [
        C("list_customer_orders", customer_id=p.id),
        C("get_order_details", order_number=o.number),
        C(
            "return_delivered_order_items",
            order_number=o.number,
            customer_id=p.id,
            skus=[v["sku"] for v in back],
            reason=reason,
            refund_method_id=refund_to,
        ),
    ]
    return Draft("return", prompt, gold, True)


def exchange(c: Ctx) -> Draft:
    by = "zip" if c.k == 3 else "email"
    p = c.person()
    c.s.history(p, c.cat, 1)
    avoid = c.s.used
    swaps = [c.cat.swap(c.s.rng, avoid, ("up", "down", "up", "down")[c.k])]
    if c.k == 2:
        swaps.append(c.cat.swap(c.s.rng, avoid, "up"))
    gift = c.s.gift_card(p, 250.0)
    o = c.s.order(
        p,
        "delivered",
        [old for old, _ in swaps] + [c.cat.item(c.s.rng, avoid)],
        p.methods["visa"],
        8,
    )
    payer = gift if c.k == 2 else p.methods["visa"]
    changes = " and ".join(f"the {old['product']} for {nice(new['options'])}" for old, new in swaps)
    prompt = (
        f"{hello(p, by)} From my delivered order I'd like to exchange {changes}. Use "
        f"{'my gift card' if payer == gift else 'my Visa'} for any price difference. {GO}"
    )
    gold = [auth(p, by)]
    gold.append(
        C("get_customer_details", customer_id=p.id)
        if c.k == 2
        else C("list_customer_orders", customer_id=p.id, status="delivered")
    )
    if c.k == 2:
        prompt = prompt.replace("my delivered order", f"my order {o.number}")
    gold.append(C("get_order_details", order_number=o.number))
    gold += [C("get_product_details", product_id=old["product_id"]) for old, _ in swaps]
    gold.append(
        C(
            "exchange_delivered_order_items",
            order_number=o.number,
            customer_id=p.id,
            from_skus=[old["sku"] for old, _ in swaps],
            to_skus=[new["sku"] for _, new in swaps],
            payment_method_id=payer,
        )
    )
    return Draft("exchange", prompt, gold, True)
