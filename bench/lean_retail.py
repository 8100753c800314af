"""Retail's tools over the lean baseline's dicts (bench/lean_db.py): the 14 tools the retail tasks'
gold solutions call, each reading and writing the rows StateGym's tool does (envs/retail/), with
the main checks (ownership, order status, SKUs, balances) but not every policy check or hint.
"""

from __future__ import annotations

import json
from typing import Any

from bench.lean_db import Db, Row, ToolFailed, cents

TABLES = (
    "customers addresses products variants payment_methods orders order_items payments "
    "returns return_items exchanges audit_log"
).split()
COMPARED = (
    "customers",
    "addresses",
    "payment_methods",
    "variants",
    "orders",
    "order_items",
    "payments",
    "returns",
    "return_items",
    "exchanges",
)
ADDRESS = ("line1", "line2", "city", "state", "zip", "country")


def _customer(db: Db, customer_id: Any) -> Row:
    c = db.get("customers", int(customer_id))
    if c is None:
        raise ToolFailed(f"No customer has id {customer_id}.")
    return c


def _order(db: Db, number: str) -> Row:
    number = "#" + str(number).strip().upper().lstrip("#")
    order = db.first("orders", "order_number", number)
    if order is None:
        raise ToolFailed(f"No order has number {number}.")
    return order


def _owned(db: Db, a: dict[str, Any], status: str) -> Row:
    c = _customer(db, a["customer_id"])
    order = _order(db, a["order_number"])
    if order["customer_id"] != c["id"]:
        raise ToolFailed(f"Order {order['order_number']} does not belong to customer {c['id']}.")
    if order["status"] != status:
        raise ToolFailed(f"Order {order['order_number']} is {order['status']}.")
    return db.mut("orders", order["id"])


def _method(db: Db, customer_id: int, code: str | None) -> Row | None:
    if code is None:
        return None
    m = next(
        (
            m
            for m in db.where("payment_methods", "customer_id", customer_id)
            if m["code"] == code.strip().lower()
        ),
        None,
    )
    if m is None:
        raise ToolFailed(f"Customer {customer_id} has no payment method {code!r}.")
    return db.mut("payment_methods", m["id"])


def _variant(db: Db, sku: str) -> Row:
    v = db.first("variants", "sku", sku.strip().upper())
    if v is None:
        raise ToolFailed(f"No product variant has SKU {sku!r}.")
    return v


def _audit(db: Db, now: str, action: str, entity_id: str, **detail: Any) -> None:
    db.insert(
        "audit_log",
        {
            "ts": now,
            "actor": "agent",
            "action": action,
            "entity": "orders",
            "entity_id": entity_id,
            "detail": json.dumps(detail, sort_keys=True),
        },
    )


def _pay(db: Db, order: Row, method: Row, kind: str, amount: float, now: str) -> None:
    amount = cents(amount)
    if method["balance"] is not None:
        balance = method["balance"] + (amount if kind == "refund" else -amount)
        if balance < -1e-9:
            raise ToolFailed(f"{method['code']} has not enough balance.")
        method["balance"] = cents(balance)
    db.insert(
        "payments",
        {
            "order_id": order["id"],
            "payment_method_id": method["id"],
            "kind": kind,
            "amount": amount,
            "created_at": now,
        },
    )


def _net_paid(db: Db, order_id: int) -> dict[int, float]:
    net: dict[int, float] = {}
    for p in db.where("payments", "order_id", order_id):
        sign = 1 if p["kind"] == "charge" else -1
        net[p["payment_method_id"]] = net.get(p["payment_method_id"], 0.0) + sign * p["amount"]
    return {k: cents(v) for k, v in net.items() if cents(v) > 0}


def _lines(db: Db, order: Row, skus: list[str]) -> list[Row]:
    items = db.where("order_items", "order_id", order["id"])
    out = []
    for sku in skus:
        v = _variant(db, sku)
        line = next((i for i in items if i["variant_id"] == v["id"]), None)
        if line is None or line["status"] != "active":
            raise ToolFailed(f"Order {order['order_number']} has no active item {sku}.")
        out.append(db.mut("order_items", line["id"]))
    return out


def order_view(db: Db, order: Row) -> dict[str, Any]:
    items = []
    for i in sorted(db.where("order_items", "order_id", order["id"]), key=lambda i: i["line_no"]):
        v = db.get("variants", i["variant_id"])
        assert v is not None
        p = db.get("products", v["product_id"])
        assert p is not None
        items.append(
            {
                "sku": v["sku"],
                "product_id": v["product_id"],
                "product_name": p["name"],
                "options": v["options"],
                "quantity": i["quantity"],
                "unit_price": cents(i["unit_price"]),
                "status": i["status"],
            }
        )
    payments = []
    for pay in db.where("payments", "order_id", order["id"]):
        m = db.get("payment_methods", pay["payment_method_id"])
        assert m is not None
        payments.append(
            {"type": pay["kind"], "payment_method_id": m["code"], "amount": cents(pay["amount"])}
        )
    view = {
        "order_number": order["order_number"],
        "customer_id": order["customer_id"],
        "status": order["status"],
        "created_at": order["created_at"],
        "total": cents(order["total"]),
        "shipping_address": {k: order[f"ship_{k}"] for k in ADDRESS},
        "items": items,
        "payments": payments,
    }
    returns = db.where("returns", "order_id", order["id"])
    if returns:
        view["returns"] = [
            {k: r[k] for k in ("code", "status", "reason", "refund_amount")} for r in returns
        ]
    exchanges = db.where("exchanges", "order_id", order["id"])
    if exchanges:
        view["exchanges"] = [
            {k: x[k] for k in ("code", "status", "price_difference")} for x in exchanges
        ]
    return view


# --- read tools ----------------------------------------------------------------------------------
def list_products(db: Db, a: dict[str, Any], now: str) -> Any:
    cat = a.get("category")
    return {
        "products": [
            {"product_id": p["id"], "name": p["name"], "category": p["category"]}
            for p in db.scan("products")
            if cat is None or p["category"] == cat
        ]
    }


def get_product_details(db: Db, a: dict[str, Any], now: str) -> Any:
    p = db.get("products", int(a["product_id"]))
    if p is None:
        raise ToolFailed(f"No product has id {a['product_id']}.")
    variants = db.where("variants", "product_id", p["id"])
    return {
        **{k: p[k] for k in ("name", "category", "description")},
        "product_id": p["id"],
        "variants": [
            {
                "sku": v["sku"],
                "options": v["options"],
                "price": cents(v["price"]),
                "stock": v["stock"],
                "available": bool(v["available"]),
            }
            for v in variants
        ],
    }


def find_customer_by_email(db: Db, a: dict[str, Any], now: str) -> Any:
    c = db.first("customers", "email", str(a["email"]).lower())
    if c is None:
        raise ToolFailed(f"No customer account has the email {a['email']!r}.")
    return {"customer_id": c["id"], "first_name": c["first_name"], "last_name": c["last_name"]}


def find_customer_by_name_zip(db: Db, a: dict[str, Any], now: str) -> Any:
    matches = {}
    for addr in db.where("addresses", "zip", a["zip"]):
        c = db.get("customers", addr["customer_id"])
        if (
            c is not None
            and c["first_name"].lower() == a["first_name"].lower()
            and c["last_name"].lower() == a["last_name"].lower()
        ):
            matches[c["id"]] = {
                "customer_id": c["id"],
                "first_name": c["first_name"],
                "last_name": c["last_name"],
            }
    return {"matches": [matches[k] for k in sorted(matches)]}


def get_customer_details(db: Db, a: dict[str, Any], now: str) -> Any:
    c = _customer(db, a["customer_id"])
    return {
        "customer_id": c["id"],
        **{k: c[k] for k in ("first_name", "last_name", "email", "phone", "membership")},
        "addresses": [
            {"default": bool(x["is_default"]), **{k: x[k] for k in ADDRESS}}
            for x in db.where("addresses", "customer_id", c["id"])
        ],
        "payment_methods": [
            {
                "payment_method_id": m["code"],
                "kind": m["kind"],
                **({"brand": m["brand"], "last4": m["last4"]} if m["kind"] == "card" else {}),
                **({"balance": cents(m["balance"])} if m["balance"] is not None else {}),
            }
            for m in db.where("payment_methods", "customer_id", c["id"])
        ],
    }


def list_customer_orders(db: Db, a: dict[str, Any], now: str) -> Any:
    c = _customer(db, a["customer_id"])
    status = a.get("status")
    return {
        "orders": [
            {
                "order_number": o["order_number"],
                "status": o["status"],
                "created_at": o["created_at"],
                "total": cents(o["total"]),
                "items": len(db.where("order_items", "order_id", o["id"])),
            }
            for o in db.where("orders", "customer_id", c["id"])
            if status is None or o["status"] == status
        ]
    }


def get_order_details(db: Db, a: dict[str, Any], now: str) -> Any:
    return order_view(db, _order(db, a["order_number"]))


# --- write tools ---------------------------------------------------------------------------------
def update_customer_default_address(db: Db, a: dict[str, Any], now: str) -> Any:
    c = _customer(db, a["customer_id"])
    fields = {k: a.get(k) for k in ADDRESS}
    current = next(
        (x for x in db.where("addresses", "customer_id", c["id"]) if x["is_default"]), None
    )
    if current is None:
        db.insert("addresses", {"customer_id": c["id"], "is_default": 1, **fields})
    else:
        db.mut("addresses", current["id"]).update(fields)
    db.insert(
        "audit_log",
        {
            "ts": now,
            "actor": "agent",
            "action": "update_default_address",
            "entity": "customers",
            "entity_id": c["email"],
            "detail": json.dumps({"zip": a.get("zip")}),
        },
    )
    return {"customer_id": c["id"], "default_address": fields}


def cancel_pending_order(db: Db, a: dict[str, Any], now: str) -> Any:
    order = _owned(db, a, "pending")
    for method_id, amount in _net_paid(db, order["id"]).items():
        _pay(db, order, db.mut("payment_methods", method_id), "refund", amount, now)
    for line in db.where("order_items", "order_id", order["id"]):
        if line["status"] == "active":
            db.mut("variants", line["variant_id"])["stock"] += line["quantity"]
            db.mut("order_items", line["id"])["status"] = "cancelled"
    _audit(db, now, "cancel_order", order["order_number"], reason=a["reason"])
    order["status"] = "cancelled"
    return order_view(db, order)


def modify_pending_order_address(db: Db, a: dict[str, Any], now: str) -> Any:
    order = _owned(db, a, "pending")
    _audit(db, now, "modify_address", order["order_number"], zip=a["zip"])
    order.update({f"ship_{k}": a.get(k) or None if k == "line2" else a[k] for k in ADDRESS})
    return order_view(db, order)


def modify_pending_order_payment(db: Db, a: dict[str, Any], now: str) -> Any:
    order = _owned(db, a, "pending")
    paid = _net_paid(db, order["id"])
    if len(paid) != 1:
        raise ToolFailed("Only an order paid by a single method can switch payment method.")
    (old_id, amount), new = (
        next(iter(paid.items())),
        _method(db, order["customer_id"], a["payment_method_id"]),
    )
    assert new is not None
    if new["id"] == old_id:
        raise ToolFailed("Already paid with that method.")
    _audit(db, now, "modify_payment", order["order_number"], payment_method_id=new["code"])
    _pay(db, order, new, "charge", amount, now)
    _pay(db, order, db.mut("payment_methods", old_id), "refund", amount, now)
    return order_view(db, order)


def _swaps(db: Db, order: Row, a: dict[str, Any]) -> list[tuple[Row, Row, Row]]:
    if len(a["from_skus"]) != len(a["to_skus"]):
        raise ToolFailed("from_skus and to_skus must have the same length.")
    out = []
    for line, sku in zip(_lines(db, order, a["from_skus"]), a["to_skus"], strict=True):
        old, new = (
            db.mut("variants", line["variant_id"]),
            db.mut("variants", _variant(db, sku)["id"]),
        )
        if new["product_id"] != old["product_id"] or new["id"] == old["id"]:
            raise ToolFailed(f"{new['sku']} is not another variant of {old['sku']}'s product.")
        if not new["available"] or new["stock"] < line["quantity"]:
            raise ToolFailed(f"{new['sku']} is not available.")
        out.append((line, old, new))
    return out


def _settle(db: Db, order: Row, code: str | None, diff: float, now: str) -> Row | None:
    if cents(diff) == 0:
        return None
    method = _method(db, order["customer_id"], code)
    if method is None:
        raise ToolFailed("A payment_method_id is required to settle the price difference.")
    _pay(db, order, method, "charge" if diff > 0 else "refund", abs(diff), now)
    return method


def modify_pending_order_items(db: Db, a: dict[str, Any], now: str) -> Any:
    order = _owned(db, a, "pending")
    swaps = _swaps(db, order, a)
    diff = cents(
        sum((new["price"] - line["unit_price"]) * line["quantity"] for line, _o, new in swaps)
    )
    method = _settle(db, order, a.get("payment_method_id"), diff, now)
    for line, old, new in swaps:
        old["stock"] += line["quantity"]
        new["stock"] -= line["quantity"]
        line["variant_id"], line["unit_price"] = new["id"], new["price"]
    order["total"] = cents(order["total"] + diff)
    _audit(
        db,
        now,
        "modify_items",
        order["order_number"],
        swaps=[[o["sku"], n["sku"]] for _l, o, n in swaps],
        price_difference=f"{diff:.2f}",
        payment_method_id=method["code"] if method else None,
    )
    return order_view(db, order)


def _close_if_done(db: Db, order: Row) -> None:
    lines = db.where("order_items", "order_id", order["id"])
    if any(line["status"] == "active" for line in lines):
        return
    order["status"] = (
        "returned" if all(line["status"] == "returned" for line in lines) else "exchanged"
    )


def return_delivered_order_items(db: Db, a: dict[str, Any], now: str) -> Any:
    order = _owned(db, a, "delivered")
    lines = _lines(db, order, a["skus"])
    method = _method(db, order["customer_id"], a["refund_method_id"])
    assert method is not None
    amount = cents(sum(line["unit_price"] * line["quantity"] for line in lines))
    number = order["order_number"].lstrip("#")
    code = f"RT-{number}-{len(db.where('returns', 'order_id', order['id'])) + 1}"
    ret = db.insert(
        "returns",
        {
            "code": code,
            "order_id": order["id"],
            "reason": a["reason"],
            "status": "requested",
            "refund_method_id": method["id"],
            "refund_amount": amount,
            "created_at": now,
        },
    )
    for line in lines:
        db.insert(
            "return_items",
            {"return_id": ret["id"], "order_item_id": line["id"], "quantity": line["quantity"]},
        )
        line["status"] = "returned"
    _pay(db, order, method, "refund", amount, now)
    _close_if_done(db, order)
    _audit(
        db,
        now,
        "return_items",
        order["order_number"],
        refund=f"{amount:.2f}",
        refund_method_id=method["code"],
    )
    return {"return_code": code, "refund_amount": amount, "order": order_view(db, order)}


def exchange_delivered_order_items(db: Db, a: dict[str, Any], now: str) -> Any:
    order = _owned(db, a, "delivered")
    swaps = _swaps(db, order, a)
    diff = cents(
        sum((new["price"] - line["unit_price"]) * line["quantity"] for line, _o, new in swaps)
    )
    method = _settle(db, order, a.get("payment_method_id"), diff, now)
    codes = []
    for line, old, new in swaps:
        new["stock"] -= line["quantity"]
        line["status"] = "exchanged"
        code = f"EX-{order['order_number'].lstrip('#')}-{line['line_no']}"
        codes.append(code)
        db.insert(
            "exchanges",
            {
                "code": code,
                "order_id": order["id"],
                "order_item_id": line["id"],
                "from_variant_id": old["id"],
                "to_variant_id": new["id"],
                "quantity": line["quantity"],
                "price_difference": cents((new["price"] - line["unit_price"]) * line["quantity"]),
                "payment_method_id": method["id"] if method else None,
                "status": "requested",
                "created_at": now,
            },
        )
    _close_if_done(db, order)
    _audit(db, now, "exchange_items", order["order_number"], price_difference=f"{diff:.2f}")
    return {"exchange_codes": codes, "price_difference": diff, "order": order_view(db, order)}


TOOLS = {
    f.__name__: f
    for f in (
        list_products,
        get_product_details,
        find_customer_by_email,
        find_customer_by_name_zip,
        get_customer_details,
        list_customer_orders,
        get_order_details,
        update_customer_default_address,
        cancel_pending_order,
        modify_pending_order_address,
        modify_pending_order_payment,
        modify_pending_order_items,
        return_delivered_order_items,
        exchange_delivered_order_items,
    )
}
