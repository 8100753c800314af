"""Lookup and refusal stories: the gold holds only reads and the state must not change; it ends
with the answer (submit_answer) or the decline with the rule's code (decline_request)."""

from __future__ import annotations

from typing import Any

from envs.retail.taskgen.kit import (
    GO,
    NOT_DELIVERED,
    NOT_PENDING,
    C,
    Ctx,
    Draft,
    addr_text,
    auth,
    hello,
    money,
    nice,
    the,
)

# ---- lookups: the state must not change; the answer is checked --------------------------------


def lookup_catalog(c: Ctx) -> Draft:
    """k=0: the products of a category, new arrivals included (the story adds one or two);
    k=1: which variants of a product can be ordered now (the story sets every stock)."""
    if c.k == 0:
        category = c.s.rng.choice(sorted(c.cat.categories))
        names = list(c.cat.categories[category])
        taken = set(names)
        names += [c.s.new_product(category, taken) for _ in range(c.s.rng.randint(1, 2))]
        prompt = (
            f"I'm thinking about shopping with you. Which products do you sell in your "
            f"{category} category? Just the product names, please."
        )
        gold = [C("list_products", category=category)]
        return Draft("lookup", prompt, gold, False, answer=("name", names))
    pids = sorted(c.cat.by_product)
    if c.cat.prefer_fresh:
        pids = [pid for pid in pids if pid not in c.cat.stale] or pids
    variants = c.cat.product(c.s.rng.choice(pids))
    while True:
        stocks = [c.s.rng.choice((0, 0, c.s.rng.randint(1, 40))) for _ in variants]
        wanted = [v["sku"] for v, n in zip(variants, stocks, strict=True) if n and v["available"]]
        if wanted and len(wanted) < len(variants):
            break
    for v, n in zip(variants, stocks, strict=True):
        c.s.set_stock(v, n)
    v = variants[0]
    prompt = (
        f"I'm thinking about buying the {v['product']}. Which of its variants can I order right "
        "now (available and in stock)? Just their SKUs, please."
    )
    gold = [
        C("list_products", category=v["category"]),
        C("get_product_details", product_id=v["product_id"]),
    ]
    return Draft("lookup", prompt, gold, False, answer=("id", wanted))


def lookup_price(c: Ctx) -> Draft:
    """A variant's price today: the story sets it, so no two tasks share the answer."""
    choices = [x for x in c.cat.variants if x["available"]]
    if c.cat.prefer_fresh:
        choices = [x for x in choices if x["product_id"] not in c.cat.stale] or choices
    v = c.cat.own(c.s.rng.choice(choices))
    price = round(v["price"] * c.s.rng.uniform(0.6, 1.4), 2)
    c.s.set_variant(v, price=price, stock=c.s.rng.randint(1, 30))
    prompt = (
        f"How much does the {v['product']} cost in {nice(v['options'])} today? "
        "I don't have an account yet."
    )
    gold = [
        C("list_products", category=v["category"]),
        C("get_product_details", product_id=v["product_id"]),
    ]
    return Draft("lookup", prompt, gold, False, answer=("amount", money(price)))


def lookup_gift_balance(c: Ctx) -> Draft:
    """The gift card's balance, beside a store credit (a look-alike balance) half the time."""
    by = ("email", "zip")[c.k]
    p = c.person()
    c.maybe_namesake(p, by)
    balance = round(c.s.rng.uniform(3, 400), 2)
    if c.s.rng.random() < 0.5:
        c.s.store_credit(p, round(c.s.rng.uniform(3, 400), 2))
    c.s.gift_card(p, balance)
    c.s.history(p, c.cat)
    prompt = f"{hello(p, by)} How much is left on my gift card?"
    gold = [auth(p, by), C("get_customer_details", customer_id=p.id)]
    return Draft("lookup", prompt, gold, False, answer=("amount", money(balance)))


def lookup_order_total(c: Ctx) -> Draft:
    p = c.person(card="mastercard")
    avoid = c.s.used
    c.s.history(p, c.cat)
    orders = [
        c.s.order(
            p,
            "delivered",
            [c.cat.item(c.s.rng, avoid), c.cat.item(c.s.rng, avoid)],
            p.methods["mastercard"],
            days_ago=12 + 5 * n,
        )
        for n in range(2)
    ]
    target = orders[c.k]
    item = target.lines[1][0]
    prompt = (
        f"{hello(p, 'email')} I'm doing my budget. What was the total I paid for the order that "
        f"had {the(item)} in it?"
    )
    gold = [
        auth(p, "email"),
        C("list_customer_orders", customer_id=p.id),
        C("get_order_details", order_number=target.number),
    ]
    return Draft("lookup", prompt, gold, False, answer=("amount", money(target.total)))


def lookup_spend(c: Ctx) -> Draft:
    p = c.person(card="amex")
    avoid = c.s.used
    a = c.s.order(
        p,
        "delivered",
        [c.cat.item(c.s.rng, avoid), c.cat.item(c.s.rng, avoid)],
        p.methods["amex"],
        days_ago=30,
    )
    b = c.s.order(p, "shipped", [c.cat.item(c.s.rng, avoid)], p.methods["amex"], days_ago=4)
    va, vb = a.lines[0][0], b.lines[0][0]
    prompt = (
        f"{hello(p, 'email')} For an expense report: what did I pay for {the(va)} and for "
        f"{the(vb)}, added together? They were in two different orders."
    )
    gold = [
        auth(p, "email"),
        C("list_customer_orders", customer_id=p.id),
        C("get_order_details", order_number=a.number),
        C("get_order_details", order_number=b.number),
    ]
    total = money(va["price"] + vb["price"])
    return Draft("lookup", prompt, gold, False, answer=("amount", total))


# ---- refusals and their allowed twins ---------------------------------------------------------
# Each family's request is worded one way; the story's data decides (`Ctx.allowed`): allowed, the
# gold does what was asked; forbidden, it reads what shows the rule broken and declines with the
# rule's code (the write is checked to be refused with that code).


def _twin(
    family: str, prompt: str, gold: list[dict[str, Any]], write: dict[str, Any], ok: bool, code: str
) -> Draft:
    if ok:
        return Draft(family, prompt, [*gold, write], True)
    return Draft(family, prompt, gold, False, decline=code, forbidden=(write, code))


def refuse_unauthenticated(c: Ctx) -> Draft:
    """Forbidden: the name and zip match no account; or the order is someone else's, or no
    longer pending."""
    rule = c.rule("not_authenticated", "other_customer", "order_not_pending")
    p = c.person()
    c.maybe_namesake(p, "zip")
    q = c.owner(p, rule)
    status = c.s.rng.choice(NOT_PENDING) if rule == "order_not_pending" else "pending"
    o = c.s.order(q, status, [c.cat.item(c.s.rng, c.s.used)], q.methods["visa"])
    zip_code = c.wrong_zip(p) if rule == "not_authenticated" else p.zip
    prompt = (
        f"{hello(p, 'zip', zip_code)} I don't remember which email I used and won't look it "
        f"up. Please cancel my order {o.number}, I ordered it by mistake. {GO}"
    )
    gold = [C("find_customer_by_name_zip", first_name=p.first, last_name=p.last, zip=zip_code)]
    if rule == "not_authenticated":  # no account found: nothing else may be looked at
        return Draft("refuse_unauthenticated", prompt, gold, False, decline=rule)
    gold.append(C("get_order_details", order_number=o.number))
    write = C(
        "cancel_pending_order", order_number=o.number, customer_id=p.id, reason="ordered_by_mistake"
    )
    return _twin("refuse_unauthenticated", prompt, gold, write, not rule, rule)


def refuse_status(c: Ctx) -> Draft:
    """Ask for something only some statuses allow; the order's status decides."""
    kind = ("cancel_delivered", "address_shipped", "return_pending", "cancel_processed")[c.k]
    ok = c.allowed()
    p = c.person()
    c.s.history(p, c.cat, 1)
    allowed = "delivered" if kind == "return_pending" else "pending"
    forbidden = NOT_DELIVERED if kind == "return_pending" else NOT_PENDING
    code = "order_not_delivered" if kind == "return_pending" else "order_not_pending"
    # Half the forbidden twins break another rule: an order named by its number may be another
    # customer's; the Visa named for a refund may not have paid the order.
    if not ok and c.s.rng.random() < 1 / 2:
        code = "refund_method" if kind == "return_pending" else "other_customer"
    q = c.owner(p, code)
    status = (
        allowed
        if ok or code not in ("order_not_pending", "order_not_delivered")
        else c.s.rng.choice(forbidden)
    )
    pay = q.methods["visa"] if code != "refund_method" else c.s.card(q, "mastercard")
    o = c.s.order(q, status, [c.cat.item(c.s.rng, c.s.used)], pay, 3)
    v = o.lines[0][0]
    new = c.s.new_address()
    ask = {
        "cancel_delivered": f"Please cancel my order {o.number}; I don't want {the(v)} anymore.",
        "address_shipped": f"Please send my order {o.number} to {addr_text(new)} instead.",
        "return_pending": f"I want to return {the(v)} from my most recent order, it's no longer "
        "needed. Refund it to my Visa.",
        "cancel_processed": f"Cancel order {o.number} please, I ordered it by mistake.",
    }[kind]
    gold = [auth(p, "email")]
    if kind == "return_pending":  # which order, and which method is the Visa
        gold.append(C("get_customer_details", customer_id=p.id))
        gold.append(C("list_customer_orders", customer_id=p.id))
    gold.append(C("get_order_details", order_number=o.number))
    write = {
        "cancel_delivered": C(
            "cancel_pending_order",
            order_number=o.number,
            customer_id=p.id,
            reason="no_longer_needed",
        ),
        "address_shipped": C(
            "modify_pending_order_address", order_number=o.number, customer_id=p.id, **new
        ),
        "return_pending": C(
            "return_delivered_order_items",
            order_number=o.number,
            customer_id=p.id,
            skus=[v["sku"]],
            reason="no_longer_needed",
            refund_method_id=p.methods["visa"],
        ),
        "cancel_processed": C(
            "cancel_pending_order",
            order_number=o.number,
            customer_id=p.id,
            reason="ordered_by_mistake",
        ),
    }[kind]
    prompt = f"{hello(p, 'email')} {ask} {GO}"
    return _twin(f"refuse_{kind}", prompt, gold, write, ok, code)


def refuse_other_customer(c: Ctx) -> Draft:
    """Forbidden: the order the customer names is their roommate's account's, not theirs; or
    it is theirs but no longer pending."""
    rule = c.rule("other_customer", "order_not_pending")
    p, q = c.person(), c.person()
    owner = q if rule == "other_customer" else p
    status = c.s.rng.choice(NOT_PENDING) if rule == "order_not_pending" else "pending"
    o = c.s.order(owner, status, [c.cat.item(c.s.rng, c.s.used)], owner.methods["visa"])
    prompt = (
        f"{hello(p, 'email')} Please cancel order {o.number}; it's the one for my roommate "
        f"{q.first}, who no longer needs it. {GO}"
    )
    gold = [auth(p, "email"), C("get_order_details", order_number=o.number)]
    write = C(
        "cancel_pending_order", order_number=o.number, customer_id=p.id, reason="no_longer_needed"
    )
    return _twin("refuse_other_customer", prompt, gold, write, not rule, rule)


def refuse_out_of_stock(c: Ctx) -> Draft:
    """Forbidden: the variant asked for is out of stock (the story sets its stock); or the
    order is not delivered yet, or is someone else's."""
    rule = c.rule("out_of_stock", "order_not_delivered", "other_customer")
    p = c.person()
    q = c.owner(p, rule)
    old, new = c.cat.swap(c.s.rng, c.s.used)
    c.s.set_stock(new, 0 if rule == "out_of_stock" else c.s.rng.randint(1, 20))
    status = c.s.rng.choice(NOT_DELIVERED) if rule == "order_not_delivered" else "delivered"
    o = c.s.order(q, status, [old], q.methods["visa"], 15)
    prompt = (
        f"{hello(p, 'email')} I'd like to exchange the {old['product']} from order {o.number} "
        f"for the {nice(new['options'])} version, settling any difference with my Visa. Only "
        f"that exact one, nothing else. {GO}"
    )
    gold = [
        auth(p, "email"),
        C("get_customer_details", customer_id=p.id),
        C("get_order_details", order_number=o.number),
        C("get_product_details", product_id=new["product_id"]),
    ]
    write = C(
        "exchange_delivered_order_items",
        order_number=o.number,
        customer_id=p.id,
        from_skus=[old["sku"]],
        to_skus=[new["sku"]],
        payment_method_id=p.methods["visa"],
    )
    return _twin("refuse_out_of_stock", prompt, gold, write, not rule, rule)


def refuse_gift_balance(c: Ctx) -> Draft:
    """Forbidden: the gift card holds less than the price difference; or the variant is out of
    stock, the order no longer pending, or someone else's."""
    rule = c.rule(
        "insufficient_balance",
        "out_of_stock",
        "order_not_pending",
        "other_customer",
    )
    p = c.person()
    q = c.owner(p, rule)
    old, new = c.cat.swap(c.s.rng, c.s.used, "up")
    diff = new["price"] - old["price"]
    short = diff - c.s.rng.uniform(0.01, diff * 0.9)
    enough = diff + c.s.rng.uniform(0, 80)
    gift = c.s.gift_card(p, round(short if rule == "insufficient_balance" else enough, 2))
    if rule == "out_of_stock":
        c.s.set_stock(new, 0)
    status = c.s.rng.choice(NOT_PENDING[:2]) if rule == "order_not_pending" else "pending"
    o = c.s.order(q, status, [old], q.methods["visa"])
    prompt = (
        f"{hello(p, 'email')} In my order {o.number}, change the {old['product']} to "
        f"{nice(new['options'])}. Pay any difference with my gift card only, never my Visa. {GO}"
    )
    gold = [
        auth(p, "email"),
        C("get_customer_details", customer_id=p.id),
        C("get_order_details", order_number=o.number),
        C("get_product_details", product_id=new["product_id"]),
    ]
    write = C(
        "modify_pending_order_items",
        order_number=o.number,
        customer_id=p.id,
        from_skus=[old["sku"]],
        to_skus=[new["sku"]],
        payment_method_id=gift,
    )
    return _twin("refuse_gift_card_balance", prompt, gold, write, not rule, rule)
