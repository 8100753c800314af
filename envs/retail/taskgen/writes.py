"""Single-request write stories: one change the customer asks for, after the reads it needs.

Each family has twins (`Ctx.allowed`): the same request, worded from the same pool, whose data
permits the change (the gold makes it) or forbids it (the gold reads what shows the rule broken
and declines with the rule's code; the write itself is checked to be refused with that code).
"""

from __future__ import annotations

from typing import Any

from envs.retail.taskgen.kit import (
    GO,
    NOT_DELIVERED,
    NOT_PENDING,
    C,
    Ctx,
    Draft,
    Person,
    addr_text,
    auth,
    hello,
    nice,
    the,
)


def refused(
    family: str, prompt: str, gold: list[dict[str, Any]], write: dict[str, Any], code: str
) -> Draft:
    """The forbidden twin: the reads, then the decline; `write` must be refused with `code`."""
    return Draft(family, prompt, gold, False, decline=code, forbidden=(write, code))


def unknown(family: str, p: Person, zip_code: str, prompt: str) -> Draft:
    """The `not_authenticated` twin: the name and the zip the customer gives match no account,
    so nothing else may be looked at."""
    find = C("find_customer_by_name_zip", first_name=p.first, last_name=p.last, zip=zip_code)
    return Draft(family, prompt, [find], False, decline="not_authenticated")


def update_default_address(c: Ctx) -> Draft:
    """Forbidden twin (zip variant): the zip the customer gives matches no account."""
    by = ("email", "zip")[c.k]
    p = c.person()
    c.maybe_namesake(p, by)
    c.s.history(p, c.cat, 1)
    new = c.s.new_address()
    ok = by == "email" or c.allowed()
    zip_code = p.zip if ok else c.wrong_zip(p)
    prompt = (
        f"{hello(p, by, zip_code)} I just moved. Please make {addr_text(new)} my default "
        f"address. {GO}"
    )
    write = C("update_customer_default_address", customer_id=p.id, **new)
    if not ok:
        return unknown("update_default_address", p, zip_code, prompt)
    gold = [auth(p, by)]
    if by == "zip":
        gold.append(C("get_customer_details", customer_id=p.id))
    gold.append(write)
    return Draft("update_default_address", prompt, gold, True)


def cancel(c: Ctx) -> Draft:
    """Forbidden twins: the order was processed, shipped or delivered already, is someone
    else's, or the zip matches no account."""
    by = ("email", "email", "zip", "email")[c.k]
    reason = ("ordered_by_mistake", "no_longer_needed")[c.k % 2]
    why = {
        "ordered_by_mistake": "I ordered it by mistake",
        "no_longer_needed": "I no longer need it",
    }
    ok = c.allowed()
    rules = {0: ("other_customer",), 1: ("other_customer",), 2: ("not_authenticated",)}
    rule = "" if ok else c.s.rng.choice(("order_not_pending", *rules.get(c.k, ())))
    status = c.s.rng.choice(NOT_PENDING) if rule == "order_not_pending" else "pending"
    p = c.person()
    c.maybe_namesake(p, by)
    c.s.history(p, c.cat)
    q = c.owner(p, rule)
    avoid = c.s.used
    items = [c.cat.item(c.s.rng, avoid) for _ in range(1 + c.k % 2)]
    if c.k == 1:  # split payment: part gift card, part card
        part = round(min(25.0, sum(v["price"] for v in items) * 0.4), 2)
        pay: Any = [
            (c.s.gift_card(q, round(c.s.rng.uniform(5, 60), 2)), part),
            (q.methods["visa"], 0.0),
        ]
    else:
        pay = c.s.gift_card(q, round(c.s.rng.uniform(20, 90), 2)) if c.k == 0 else q.methods["visa"]
    o = c.s.order(q, status, items, pay, c.s.rng.choice((1, 3, 5)))
    gold = [auth(p, by)]
    if c.k < 2:
        ask = f"Please cancel order {o.number}, {why[reason]}."
    else:  # another pending order, of another product: the item names the order
        c.s.order(p, "pending", [c.cat.item(c.s.rng, avoid)], p.methods["visa"], 0.5)
        ask = f"Please cancel my order with {the(items[0])} in it; {why[reason]}."
        gold.append(C("list_customer_orders", customer_id=p.id))
    gold.append(C("get_order_details", order_number=o.number))
    write = C("cancel_pending_order", order_number=o.number, customer_id=p.id, reason=reason)
    if rule == "not_authenticated":
        zip_code = c.wrong_zip(p)
        return unknown("cancel", p, zip_code, f"{hello(p, by, zip_code)} {ask} {GO}")
    prompt = f"{hello(p, by)} {ask} {GO}"
    if not ok:
        return refused("cancel", prompt, gold, write, rule)
    return Draft("cancel", prompt, [*gold, write], True)


def modify_address(c: Ctx) -> Draft:
    """Forbidden twins: the order is no longer pending, or is someone else's."""
    ok = c.allowed()
    rule = "" if ok else c.s.rng.choice(("order_not_pending", "other_customer"))
    p = c.person()
    c.s.history(p, c.cat, 1)
    q = c.owner(p, rule)
    status = c.s.rng.choice(NOT_PENDING[:2]) if rule == "order_not_pending" else "pending"
    o = c.s.order(q, status, [c.cat.item(c.s.rng, c.s.used)], q.methods["visa"], 2)
    gold = [auth(p, "email")]
    if c.k < 2:
        new = c.s.new_address()
        ask = f"Please ship my order {o.number} to {addr_text(new)} instead."
    else:
        new = c.s.second_address(p)
        ask = f"Please ship order {o.number} to my other address on file, the one in {new['city']}."
        gold.append(C("get_customer_details", customer_id=p.id))
    gold.append(C("get_order_details", order_number=o.number))
    write = C("modify_pending_order_address", order_number=o.number, customer_id=p.id, **new)
    prompt = f"{hello(p, 'email')} {ask} {GO}"
    if not ok:
        return refused("modify_address", prompt, gold, write, rule)
    return Draft("modify_address", prompt, [*gold, write], True)


def modify_payment(c: Ctx) -> Draft:
    """Forbidden twins: the gift card is short of the total (k=0), the order is paid with two
    methods (k=1), or the order is no longer pending."""
    ok = c.allowed()
    own_rule = ("insufficient_balance", "split_payment")[c.k]
    rule = "" if ok else c.s.rng.choice(("order_not_pending", "other_customer", own_rule))
    p = c.person()
    c.s.history(p, c.cat, 1)
    q = c.owner(p, rule)
    item = c.cat.item(c.s.rng, c.s.used)
    total = item["price"]
    short = rule == "insufficient_balance"
    balance = total - c.s.rng.uniform(1, total * 0.6) if short else total + c.s.rng.uniform(5, 400)
    gift = c.s.gift_card(p, round(balance, 2))
    status = c.s.rng.choice(NOT_PENDING[:2]) if rule == "order_not_pending" else "pending"
    pay: Any = (p.methods["visa"], gift)[c.k]
    if c.k == 1 and rule == "split_payment":
        pay = [(gift, round(total * 0.5, 2)), (p.methods["visa"], 0.0)]
    if q is not p:  # the stranger's order, paid their way
        pay = q.methods["visa"]
    o = c.s.order(q, status, [item], pay, 1)
    if c.k == 0:
        target, ask = gift, "pay it with my gift card instead of my Visa"
    else:
        target = c.s.card(p, "mastercard")
        ask = f"charge my Mastercard ending in {c.s.last4(target)} instead of the gift card"
    prompt = f"{hello(p, 'email')} For my order {o.number}, please {ask}. {GO}"
    gold = [
        auth(p, "email"),
        C("get_customer_details", customer_id=p.id),
        C("get_order_details", order_number=o.number),
    ]
    write = C(
        "modify_pending_order_payment",
        order_number=o.number,
        customer_id=p.id,
        payment_method_id=target,
    )
    if not ok:
        return refused("modify_payment", prompt, gold, write, rule)
    return Draft("modify_payment", prompt, [*gold, write], True)


def modify_items(c: Ctx) -> Draft:
    """Forbidden twins: the new variant is out of stock, the gift card cannot pay the
    difference, or the order is no longer pending."""
    ok = c.allowed()
    by = "zip" if c.k == 2 else "email"
    p = c.person()
    c.maybe_namesake(p, by)
    c.s.history(p, c.cat, 1)
    avoid = c.s.used
    swaps = [c.cat.swap(c.s.rng, avoid, ("up", "down", "up", "up")[c.k])]
    if c.k == 3:
        swaps.append(c.cat.swap(c.s.rng, avoid, "down"))
    diff = round(sum(new["price"] - old["price"] for old, new in swaps), 2)
    gift_pays = c.k in (1, 3)
    rules = ["order_not_pending", "out_of_stock"]
    if gift_pays and diff > 1:
        rules.append("insufficient_balance")
    if gift_pays:  # the order is named by its number: it may be someone else's
        rules.append("other_customer")
    if by == "zip":
        rules.append("not_authenticated")
    rule = "" if ok else c.s.rng.choice(rules)
    q = c.owner(p, rule)
    if rule == "insufficient_balance":
        balance = round(diff - c.s.rng.uniform(0.5, diff * 0.8), 2)
    else:
        balance = round(max(diff, 0) + c.s.rng.uniform(5, 300), 2)
    gift = c.s.gift_card(p, balance)
    if rule == "out_of_stock":
        c.s.set_stock(swaps[0][1], 0)
    status = c.s.rng.choice(NOT_PENDING[:2]) if rule == "order_not_pending" else "pending"
    o = c.s.order(
        q, status, [old for old, _ in swaps] + [c.cat.item(c.s.rng, avoid)], q.methods["visa"]
    )
    if not gift_pays and c.s.rng.random() < 0.5:  # "my latest order": an older one has it too
        c.s.lookalike(p, swaps[0][0], 45)
    payer = gift if gift_pays else p.methods["visa"]
    pay_text = "my gift card" if payer == gift else "my Visa"
    changes = " and ".join(f"the {old['product']} to {nice(new['options'])}" for old, new in swaps)
    prompt = (
        f"{hello(p, by)} In my latest order, please change {changes}. Settle any price "
        f"difference with {pay_text}. {GO}"
    )
    gold = [auth(p, by)]
    gold.append(
        C("get_customer_details", customer_id=p.id)
        if gift_pays
        else C("list_customer_orders", customer_id=p.id)
    )
    gold.append(C("get_order_details", order_number=o.number))
    gold += [C("get_product_details", product_id=old["product_id"]) for old, _ in swaps]
    write = C(
        "modify_pending_order_items",
        order_number=o.number,
        customer_id=p.id,
        from_skus=[old["sku"] for old, _ in swaps],
        to_skus=[new["sku"] for _, new in swaps],
        payment_method_id=payer,
    )
    if gift_pays:  # the customer names the order number, the gold needs no order list
        prompt = prompt.replace("my latest order", f"my order {o.number}")
    if rule == "not_authenticated":
        zip_code = c.wrong_zip(p)
        prompt = prompt.replace(hello(p, by), hello(p, by, zip_code))
        return unknown("modify_items", p, zip_code, prompt)
    if not ok:
        return refused("modify_items", prompt, gold, write, rule)
    return Draft("modify_items", prompt, [*gold, write], True)


def return_items(c: Ctx) -> Draft:
    """Forbidden twins: the order is not delivered yet, the item was returned already, or the
    card named for the refund never paid for it (a refund goes to an original method or a gift
    card)."""
    ok = c.allowed()
    rules = ("order_not_delivered", "already_returned") + (("refund_method",) if c.k < 2 else ())
    rule = "" if ok else c.s.rng.choice(rules)
    p = c.person()
    c.s.card(p, "mastercard")
    c.s.history(p, c.cat, 1)
    avoid = c.s.used
    items = [c.cat.item(c.s.rng, avoid) for _ in range(3)]
    payer = c.s.rng.choice(("visa", "mastercard"))
    status = c.s.rng.choice(NOT_DELIVERED) if rule == "order_not_delivered" else "delivered"
    o = c.s.order(p, status, items, p.methods[payer], 9)
    back = items[:1] if c.k != 1 else items[:2]
    if c.s.rng.random() < 0.5:  # "my latest order": an older order holds the item too
        c.s.lookalike(p, back[0], 40)
    if rule == "already_returned":
        c.s.mark_returned(o, len(back) - 1)
    reason = ("defective", "no_longer_needed", "wrong_item")[c.k]
    why = {
        "defective": "it arrived broken",
        "no_longer_needed": "I don't need them anymore",
        "wrong_item": "it's not the item I ordered",
    }[reason]
    gold = [auth(p, "email")]
    if c.k == 2:
        refund_to, where = c.s.gift_card(p, round(c.s.rng.uniform(0, 50), 2)), "my gift card"
        gold.append(C("get_customer_details", customer_id=p.id))
    else:  # the card named pays the refund only if it paid the order
        brand = payer if rule != "refund_method" else {"visa": "mastercard"}.get(payer, "visa")
        refund_to, where = p.methods[brand], f"my {brand.capitalize()}"
        gold.append(C("get_customer_details", customer_id=p.id))
    what = " and ".join(the(v) for v in back)
    prompt = (
        f"{hello(p, 'email')} I want to return {what} from my latest order; {why}. "
        f"Refund it to {where}. {GO}"
    )
    gold += [
        C("list_customer_orders", customer_id=p.id),
        C("get_order_details", order_number=o.number),
    ]
    write = C(
        "return_delivered_order_items",
        order_number=o.number,
        customer_id=p.id,
        skus=[v["sku"] for v in back],
        reason=reason,
        refund_method_id=refund_to,
    )
    if not ok:
        return refused("return", prompt, gold, write, rule)
    return Draft("return", prompt, [*gold, write], True)


def exchange(c: Ctx) -> Draft:
    """Forbidden twins: the new variant is out of stock, the item was returned already, the
    order is not delivered yet (or someone else's), or the zip matches no account."""
    ok = c.allowed()
    extra = {2: ("other_customer",), 3: ("not_authenticated",)}.get(c.k, ())
    rules = ("order_not_delivered", "out_of_stock", "already_returned", *extra)
    rule = "" if ok else c.s.rng.choice(rules)
    by = "zip" if c.k == 3 else "email"
    p = c.person()
    c.maybe_namesake(p, by)
    c.s.history(p, c.cat, 1)
    q = c.owner(p, rule)
    avoid = c.s.used
    swaps = [c.cat.swap(c.s.rng, avoid, ("up", "down", "up", "down")[c.k])]
    if c.k == 2:
        swaps.append(c.cat.swap(c.s.rng, avoid, "up"))
    gift = c.s.gift_card(p, round(c.s.rng.uniform(250, 600), 2))
    if rule == "out_of_stock":
        c.s.set_stock(swaps[-1][1], 0)
    status = c.s.rng.choice(NOT_DELIVERED) if rule == "order_not_delivered" else "delivered"
    o = c.s.order(
        q,
        status,
        [old for old, _ in swaps] + [c.cat.item(c.s.rng, avoid)],
        q.methods["visa"],
        8,
    )
    if rule == "already_returned":
        c.s.mark_returned(o, 0)
    if c.k != 2 and c.s.rng.random() < 0.5:  # "my latest order": an older one has it too
        c.s.lookalike(p, swaps[0][0], 40)
    payer = gift if c.k == 2 else p.methods["visa"]
    changes = " and ".join(f"the {old['product']} for {nice(new['options'])}" for old, new in swaps)
    prompt = (
        f"{hello(p, by)} From my latest order I'd like to exchange {changes}. Use "
        f"{'my gift card' if payer == gift else 'my Visa'} for any price difference. {GO}"
    )
    gold = [auth(p, by)]
    gold.append(
        C("get_customer_details", customer_id=p.id)
        if c.k == 2
        else C("list_customer_orders", customer_id=p.id)
    )
    if c.k == 2:
        prompt = prompt.replace("my latest order", f"my order {o.number}")
    gold.append(C("get_order_details", order_number=o.number))
    gold += [C("get_product_details", product_id=old["product_id"]) for old, _ in swaps]
    write = C(
        "exchange_delivered_order_items",
        order_number=o.number,
        customer_id=p.id,
        from_skus=[old["sku"] for old, _ in swaps],
        to_skus=[new["sku"] for _, new in swaps],
        payment_method_id=payer,
    )
    if rule == "not_authenticated":
        zip_code = c.wrong_zip(p)
        prompt = prompt.replace(hello(p, by), hello(p, by, zip_code))
        return unknown("exchange", p, zip_code, prompt)
    if not ok:
        return refused("exchange", prompt, gold, write, rule)
    return Draft("exchange", prompt, [*gold, write], True)
