"""Lookup and refusal stories: the gold holds only reads and the state must not change; it ends
with the answer (submit_answer) or the decline with the rule's code (decline_request)."""

from __future__ import annotations

from envs.retail.taskgen.kit import (
    GO,
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
    category = ("kitchen", "outdoor")[c.k]
    names = c.cat.categories[category]
    prompt = (
        f"Hello! I'm thinking about shopping with you. Which products do you sell in your "
        f"{category} category? Just the product names, please."
    )
    gold = [C("list_products", category=category)]
    return Draft("lookup", prompt, gold, False, answer=("name", names))


def lookup_price(c: Ctx) -> Draft:
    v = next(x for x in c.cat.variants[c.k * 97 + 11 :] if x["available"] and x["stock"] > 0)
    prompt = (
        f"Quick question: how much does the {v['product']} cost in {nice(v['options'])}? "
        "I don't have an account yet."
    )
    gold = [
        C("list_products", category=v["category"]),
        C("get_product_details", product_id=v["product_id"]),
    ]
    return Draft("lookup", prompt, gold, False, answer=("amount", money(v["price"])))


def lookup_gift_balance(c: Ctx) -> Draft:
    by = ("email", "zip")[c.k]
    p = c.person()
    balance = (87.45, 132.6)[c.k]
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


# ---- refusals: gold holds only the reads, then declines with the rule's code ------------------


def refuse_unauthenticated(c: Ctx) -> Draft:
    p = c.person()
    o = c.s.order(p, "pending", [c.cat.item(c.s.rng, c.s.used)], next(iter(p.methods.values())))
    wrong_zip = "30301" if not p.zip.startswith("303") else "60601"
    prompt = (
        f"Hi, this is {p.name}, zip code {wrong_zip}. I don't remember which email I used and "
        f"won't look it up. Please cancel my order {o.number}, I ordered it by mistake. {GO}"
    )
    gold = [C("find_customer_by_name_zip", first_name=p.first, last_name=p.last, zip=wrong_zip)]
    return Draft("refuse_unauthenticated", prompt, gold, False, decline="not_authenticated")


def refuse_status(c: Ctx) -> Draft:
    """Ask for something the order's status does not allow."""
    kind = ("cancel_delivered", "address_shipped", "return_pending", "cancel_processed")[c.k]
    p = c.person()
    c.s.history(p, c.cat, 1)
    status = {
        "cancel_delivered": "delivered",
        "address_shipped": "shipped",
        "return_pending": "pending",
        "cancel_processed": "processed",
    }[kind]
    o = c.s.order(p, status, [c.cat.item(c.s.rng, c.s.used)], next(iter(p.methods.values())), 3)
    v = o.lines[0][0]
    new = c.s.new_address()
    ask = {
        "cancel_delivered": f"Please cancel my order {o.number}; I don't want {the(v)} anymore.",
        "address_shipped": f"Please send my order {o.number} to {addr_text(new)} instead.",
        "return_pending": f"I want to return {the(v)} from my most recent order, it's no longer "
        "needed. Refund it to my card.",
        "cancel_processed": f"Cancel order {o.number} please, I ordered it by mistake.",
    }[kind]
    gold = [auth(p, "email")]
    if kind == "return_pending":
        gold.append(C("list_customer_orders", customer_id=p.id))
    gold.append(C("get_order_details", order_number=o.number))
    code = "order_not_delivered" if kind == "return_pending" else "order_not_pending"
    return Draft(f"refuse_{kind}", f"{hello(p, 'email')} {ask} {GO}", gold, False, decline=code)


def refuse_other_customer(c: Ctx) -> Draft:
    p, q = c.person(), c.person()
    o = c.s.order(q, "pending", [c.cat.item(c.s.rng, c.s.used)], next(iter(q.methods.values())))
    prompt = (
        f"{hello(p, 'email')} My roommate {q.first} asked me to cancel their order {o.number}; "
        f"they no longer need it. {GO}"
    )
    gold = [auth(p, "email"), C("get_order_details", order_number=o.number)]
    return Draft("refuse_other_customer", prompt, gold, False, decline="other_customer")


def refuse_out_of_stock(c: Ctx) -> Draft:
    p = c.person()
    old, new = c.cat.swap(c.s.rng, c.s.used)
    c.s.set_stock(new, 0)
    o = c.s.order(p, "delivered", [old], next(iter(p.methods.values())), 15)
    prompt = (
        f"{hello(p, 'email')} I'd like to exchange the {old['product']} from order {o.number} "
        f"for the {nice(new['options'])} version. Only that exact one, nothing else. {GO}"
    )
    gold = [
        auth(p, "email"),
        C("get_order_details", order_number=o.number),
        C("get_product_details", product_id=new["product_id"]),
    ]
    return Draft("refuse_out_of_stock", prompt, gold, False, decline="out_of_stock")


def refuse_gift_balance(c: Ctx) -> Draft:
    p = c.person()
    old, new = c.cat.swap(c.s.rng, c.s.used, "up")
    balance = round(max(0.5, new["price"] - old["price"] - 2.5), 2)
    gift = c.s.gift_card(p, balance)
    o = c.s.order(p, "pending", [old], p.methods["visa"])
    prompt = (
        f"{hello(p, 'email')} In my pending order {o.number}, change the {old['product']} to "
        f"{nice(new['options'])}. Pay any difference with my gift card only, never my Visa. {GO}"
    )
    gold = [
        auth(p, "email"),
        C("get_customer_details", customer_id=p.id),
        C("get_order_details", order_number=o.number),
        C("get_product_details", product_id=new["product_id"]),
    ]
    assert gift
    return Draft("refuse_gift_card_balance", prompt, gold, False, decline="insufficient_balance")
