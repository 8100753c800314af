"""Conversational stories: the customer is on the line (`Draft.user`) and the gold talks to them.

- `talk_cancel`: facts revealed over turns; the request names no order and no reason, the
  customer tells them when asked (an item of the order, or its number).
- `talk_return`: confirm-or-correct; the item to return is in two delivered orders, the customer
  says which one when asked, and a proposal naming the other is corrected.
- `talk_switch`: change of mind; on the first right proposal the customer wants something else
  (cancel their other order, or pay with another card), and only that is done.
Twins as in writes.py: where the data forbids what the customer wants, the gold declines with
the rule's code; the user then wants no change (nothing to confirm, `FORBIDDEN_DONE`).
"""

from __future__ import annotations

from typing import Any

from app.sdk.taskgen import UserChange, UserFact, UserScript
from envs.retail.taskgen.kit import NOT_PENDING, C, Ctx, Draft, Person, hello, money, the
from envs.retail.taskgen.writes import refused

# What a customer whose change the data forbids says to anything but a question: the change
# they asked for, if it can be done (their script has no change to confirm).
FORBIDDEN_DONE = "Yes, please, if it is possible: that is all I need."
WHY = {
    "ordered_by_mistake": "I ordered it by mistake.",
    "no_longer_needed": "I don't need it anymore.",
}
ORDER_ASKED = ["which order", "order number", "order id", "what order", "which one"]


def say(text: str) -> dict[str, Any]:
    return C("message_user", text=text)


def script(
    goal: str,
    unclear: str,
    changes: list[UserChange],
    facts: list[UserFact] | None = None,
) -> UserScript:
    """The customer's script: with no change (a forbidden twin) every other message gets
    `FORBIDDEN_DONE`."""
    extra = {} if changes else {"done": FORBIDDEN_DONE}
    return UserScript(goal=goal, facts=facts or [], changes=changes, unclear=unclear, **extra)


def _cancel_change(
    number: str, right: str, wrong: list[str], mind: str | None = None, correction: str = ""
) -> UserChange:
    return UserChange(
        tools=["cancel_pending_order"],
        identifiers=[number],
        wrong=wrong,
        yes="Yes, please cancel it.",
        correction=correction or f"No, not that one. I mean {right}.",
        change_of_mind=mind,
    )


def talk_cancel(c: Ctx) -> Draft:
    """k=0 the customer knows an item of the order, k=1 its number. Forbidden twins: the order
    was processed or shipped already, or (k=1) the number is another customer's order."""
    by_number = c.k == 1
    ok = c.allowed()
    rule = "" if ok else c.s.rng.choice(("order_not_pending", "other_customer")[: 1 + c.k])
    p = c.person()
    c.s.history(p, c.cat, 1)
    q = c.owner(p, rule)
    avoid = c.s.used
    item = c.cat.item(c.s.rng, avoid)
    status = c.s.rng.choice(NOT_PENDING[:2]) if rule == "order_not_pending" else "pending"
    o = c.s.order(q, status, [item], q.methods["visa"], c.s.rng.choice((1, 2, 4)))
    # The look-alike: another pending order of theirs, of another product.
    other = c.s.order(p, "pending", [c.cat.item(c.s.rng, avoid)], p.methods["visa"], 3)
    reason = c.s.rng.choice(tuple(WHY))
    prompt = f"{hello(p, 'email')} Please cancel one of my orders."
    which = f"order {o.number}" if by_number else f"the order with {the(item)} in it"
    order_fact = UserFact(
        key="order_number" if by_number else "order_item",
        value=o.number if by_number else the(item),
        asked_by=[*ORDER_ASKED, "which item", "what item"],
        reply=f"It's order {o.number}." if by_number else f"It's the one with {the(item)} in it.",
    )
    reason_fact = UserFact(
        key="reason",
        value=reason,
        asked_by=["reason", "why"],
        reply=WHY[reason],
    )
    ask = (
        "I can help with that. Which order would you like to cancel (its order number, or an "
        "item in it), and what is the reason for cancelling?"
    )
    gold = [auth_email(p), say(ask)]
    if not by_number:
        gold += [
            C("list_customer_orders", customer_id=p.id),
            C("get_order_details", order_number=other.number),
        ]
    gold.append(C("get_order_details", order_number=o.number))
    write = C("cancel_pending_order", order_number=o.number, customer_id=p.id, reason=reason)
    goal = f"Cancel {which} ({o.number}); reason: {reason}."
    unclear = "I'd like to cancel one of my orders, please."
    if not ok:
        user = script(goal, unclear, [], [order_fact, reason_fact])
        draft = refused("talk_cancel", prompt, gold, write, rule)
        why_not = "is no longer pending" if rule == "order_not_pending" else "is not yours"
        sorry = f"I'm sorry, order {o.number} cannot be cancelled: it {why_not}."
        return _with(draft, user, sorry)
    propose = (
        f"Thank you. Order {o.number} ({the(item)}, {money(o.total)}) is pending. I will cancel "
        f"order {o.number} with the reason '{reason}'; its payment goes back to the card it "
        "came from. Shall I proceed?"
    )
    change = _cancel_change(o.number, which, [other.number])
    user = script(goal, unclear, [change], [order_fact, reason_fact])
    return Draft("talk_cancel", prompt, [*gold, say(propose), write], True, user=user)


def talk_return(c: Ctx) -> Draft:
    """Two delivered orders hold the item; the customer tells which (by what came with it);
    the refund goes to the card that paid (k=0) or their gift card (k=1). Forbidden twins:
    that item was returned already, or that order is not delivered yet."""
    ok = c.allowed()
    rule = "" if ok else c.s.rng.choice(("already_returned", "order_not_delivered"))
    p = c.person()
    c.s.history(p, c.cat, 1)
    avoid = c.s.used
    v = c.cat.item(c.s.rng, avoid)
    with_right, with_wrong = c.cat.item(c.s.rng, avoid), c.cat.item(c.s.rng, avoid)
    days = [6.0, 30.0]
    c.s.rng.shuffle(days)
    late = rule == "order_not_delivered"
    status = c.s.rng.choice(("processed", "shipped")) if late else "delivered"
    visa = p.methods["visa"]
    right = c.s.order(p, status, [v, with_right], visa, days[0])
    wrong = c.s.order(p, "delivered", [v, with_wrong], visa, days[1])
    if rule == "already_returned":
        c.s.mark_returned(right, 0)
    reason, why = c.s.rng.choice(
        (
            ("defective", "it arrived damaged"),
            ("not_as_described", "it is not what the website described"),
        )
    )
    if c.k == 1:
        refund_to = c.s.gift_card(p, round(c.s.rng.uniform(0, 40), 2))
        where, to_text = "my gift card", f"your gift card {refund_to}"
    else:
        refund_to, where = visa, "the card I paid with"
        to_text = f"your Visa ending in {c.s.last4(visa)}"
    prompt = (
        f"{hello(p, 'email')} I want to return {the(v)} I bought; {why}. Please refund it to "
        f"{where}."
    )
    newest_first = sorted((right, wrong), key=lambda o: days[0] if o is right else days[1])
    first, second = (o.number for o in newest_first)
    gold = [
        auth_email(p),
        C("list_customer_orders", customer_id=p.id),
        C("get_order_details", order_number=wrong.number),
        C("get_order_details", order_number=right.number),
        say(
            f"I see {the(v)} in two of your orders, {first} and {second}. Which of these "
            "orders is the one you are returning it from?"
        ),
    ]
    fact = UserFact(
        key="order",
        value=right.number,
        asked_by=[*ORDER_ASKED, "which of", "which purchase"],
        reply=f"It's the one I bought together with {the(with_right)}.",
    )
    write = C(
        "return_delivered_order_items",
        order_number=right.number,
        customer_id=p.id,
        skus=[v["sku"]],
        reason=reason,
        refund_method_id=refund_to,
    )
    goal = (
        f"Return {the(v)} from order {right.number} (the one with {the(with_right)}), reason "
        f"{reason}, refunded to {where}."
    )
    unclear = f"I want to return {the(v)}, refunded to {where}."
    if not ok:
        draft = refused("talk_return", prompt, gold, write, rule)
        user = script(goal, unclear, [], [fact])
        sorry = f"I'm sorry, {the(v)} of order {right.number} cannot be returned."
        return _with(draft, user, sorry)
    change = UserChange(
        tools=["return_delivered_order_items"],
        identifiers=[right.number],
        wrong=[wrong.number],
        yes="Yes, that's the one. Please go ahead.",
        correction=f"No, not that order: the one where I also bought {the(with_right)}.",
    )
    propose = (
        f"Thank you. I will return {the(v)} (SKU {v['sku']}) from order {right.number} with the "
        f"reason '{reason}' and refund {money(v['price'])} to {to_text}. Shall I proceed?"
    )
    user = script(goal, unclear, [change], [fact])
    return Draft("talk_return", prompt, [*gold, say(propose), write], True, user=user)


def talk_switch(c: Ctx) -> Draft:
    """k=0: cancel order A, then (change of mind) keep A and cancel the other pending order B;
    k=1: pay order A with the gift card, then (change of mind) with the Mastercard. Forbidden
    twins: order A is no longer pending, or is another customer's (k=0), or was paid with two
    methods (k=1)."""
    if c.k == 1:
        return _switch_payment(c)
    ok = c.allowed()
    rule = "" if ok else c.s.rng.choice(("order_not_pending", "other_customer"))
    p = c.person()
    c.s.history(p, c.cat, 1)
    avoid = c.s.used
    q = c.owner(p, rule)
    status = c.s.rng.choice(NOT_PENDING[:2]) if rule == "order_not_pending" else "pending"
    a = c.s.order(q, status, [c.cat.item(c.s.rng, avoid)], q.methods["visa"], 2)
    b_item = c.cat.item(c.s.rng, avoid)
    b = c.s.order(p, "pending", [b_item], p.methods["visa"], c.s.rng.choice((1, 4)))
    reason = c.s.rng.choice(tuple(WHY))
    prompt = f"{hello(p, 'email')} Please cancel my order {a.number}. {WHY[reason]}"
    gold = [auth_email(p), C("get_order_details", order_number=a.number)]
    write_a = C("cancel_pending_order", order_number=a.number, customer_id=p.id, reason=reason)
    goal = (
        f"At first cancel order {a.number}; on being asked to confirm, keep it and cancel the "
        f"other pending order {b.number} (with {the(b_item)}) instead; reason: {reason}."
    )
    unclear = f"I'd like to cancel my order {a.number}."
    if not ok:
        draft = refused("talk_switch", prompt, gold, write_a, rule)
        why_not = f"it is {status}" if rule == "order_not_pending" else "it is not yours"
        sorry = f"I'm sorry, order {a.number} cannot be cancelled: {why_not}."
        return _with(draft, script(goal, unclear, []), sorry)
    mind = (
        f"Hmm, wait. Actually, keep order {a.number}: I'd rather cancel my other order, the one "
        f"with {the(b_item)} in it. Same reason."
    )
    first = _cancel_change(a.number, f"order {a.number}", [], mind)
    keep = f"No, please leave order {a.number} alone; cancel the one with {the(b_item)}."
    second = _cancel_change(b.number, "", [a.number], correction=keep)
    gold += [
        say(
            f"Order {a.number} is pending. I will cancel order {a.number} with the reason "
            f"'{reason}'. Shall I proceed?"
        ),
        C("list_customer_orders", customer_id=p.id),
        C("get_order_details", order_number=b.number),
        say(
            f"Understood. Order {b.number} ({the(b_item)}) is pending too. I will cancel order "
            f"{b.number} with the reason '{reason}' and leave the other order as it is. Is that "
            "correct?"
        ),
        C("cancel_pending_order", order_number=b.number, customer_id=p.id, reason=reason),
    ]
    user = script(goal, unclear, [first, second])
    return Draft("talk_switch", prompt, gold, True, user=user)


def _switch_payment(c: Ctx) -> Draft:
    ok = c.allowed()
    rule = "" if ok else c.s.rng.choice(("order_not_pending", "split_payment"))
    p = c.person()
    c.s.history(p, c.cat, 1)
    item = c.cat.item(c.s.rng, c.s.used)
    gift = c.s.gift_card(p, round(item["price"] + c.s.rng.uniform(5, 300), 2))
    card = c.s.card(p, "mastercard")
    status = c.s.rng.choice(NOT_PENDING[:2]) if rule == "order_not_pending" else "pending"
    visa = p.methods["visa"]
    pay: Any = visa
    if rule == "split_payment":
        pay = [(gift, round(item["price"] * 0.5, 2)), (visa, 0.0)]
    o = c.s.order(p, status, [item], pay, 1)
    last4 = c.s.last4(card)
    prompt = f"{hello(p, 'email')} Please pay my order {o.number} with my gift card instead."
    gold = [
        auth_email(p),
        C("get_customer_details", customer_id=p.id),
        C("get_order_details", order_number=o.number),
    ]

    def switch(to: str) -> dict[str, Any]:
        return C(
            "modify_pending_order_payment",
            order_number=o.number,
            customer_id=p.id,
            payment_method_id=to,
        )

    goal = (
        f"At first pay order {o.number} with the gift card; on being asked to confirm, pay it "
        f"with the Mastercard ending in {last4} instead."
    )
    unclear = f"I'd like to change how my order {o.number} is paid."
    if not ok:
        draft = refused("talk_switch", prompt, gold, switch(gift), rule)
        sorry = f"I'm sorry, the payment of order {o.number} cannot be changed."
        return _with(draft, script(goal, unclear, []), sorry)
    mind = (
        f"Actually, on second thought, keep the gift card for later: please charge my "
        f"Mastercard ending in {last4} instead."
    )
    first = UserChange(
        tools=["modify_pending_order_payment"],
        identifiers=[o.number, gift],
        yes="Yes.",
        correction="No, I asked for my gift card.",
        change_of_mind=mind,
    )
    second = UserChange(
        tools=["modify_pending_order_payment"],
        identifiers=[o.number, card],
        wrong=[gift],
        yes="Yes, the Mastercard. Go ahead.",
        correction=f"No, not the gift card: my Mastercard ending in {last4}.",
    )
    gold += [
        say(
            f"Order {o.number} ({money(o.total)}) is pending and paid with your Visa. I will "
            f"switch its payment to your gift card {gift} (balance enough for the total). "
            "Shall I proceed?"
        ),
        say(
            f"Of course. I will switch the payment of order {o.number} to your Mastercard "
            f"ending in {last4} ({card}) instead. Shall I proceed?"
        ),
        switch(card),
    ]
    user = script(goal, unclear, [first, second])
    return Draft("talk_switch", prompt, gold, True, user=user)


def auth_email(p: Person) -> dict[str, Any]:
    return C("find_customer_by_email", email=p.email)


def _with(draft: Draft, user: UserScript, message: str) -> Draft:
    """A forbidden twin with its customer on the line and the gold's words declining."""
    draft.user, draft.decline_message = user, message
    return draft
