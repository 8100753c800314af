"""Read-only tools: authenticate a customer, look at accounts, orders and the catalogue.

The tools agents call most read with Core column selects built once at import (a few joins
each), not ORM entities and their lazy loads: see bench/history/suite.md. Lists keep the order of
the ORM relationships they replace.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field
from sqlalchemy import Integer, bindparam, func, select
from sqlalchemy.orm import Session

from app.sdk.environment import ToolArgs, ToolContext, ToolError, tool
from envs.retail.models import ORDER_STATUSES, Product
from envs.retail.ops import (
    ADDRESSES,
    CUSTOMERS,
    ORDER_ITEMS,
    ORDERS,
    PAYMENT_METHODS,
    PRODUCTS,
    VARIANTS,
    cents,
    no_such_customer,
    no_such_product,
    order_view_by_number,
)

OrderStatus = Literal[
    "pending", "processed", "shipped", "delivered", "cancelled", "returned", "exchanged"
]
assert set(OrderStatus.__args__) == set(ORDER_STATUSES)  # type: ignore[attr-defined]


class FindByEmailArgs(ToolArgs):
    email: str = Field(description="The email address the customer gives, e.g. 'jane@example.com'.")


# Core, not ORM: the authentication every rollout starts with; see bench/history/suite.md.
_CUSTOMER_BY_EMAIL = select(CUSTOMERS.c.id, CUSTOMERS.c.first_name, CUSTOMERS.c.last_name).where(
    func.lower(CUSTOMERS.c.email) == bindparam("email")
)


@tool(read_only=True)
def find_customer_by_email(db: Session, args: FindByEmailArgs, ctx: ToolContext) -> dict[str, Any]:
    """Authenticate a customer by email address; returns their customer_id and name.

    The email must match an account exactly (case-insensitive). Use the returned customer_id for
    every other tool. If no account matches, ask for the customer's name and zip code instead.
    """
    customer = db.execute(_CUSTOMER_BY_EMAIL, {"email": args.email.lower()}).first()
    if customer is None:
        raise ToolError(
            f"No customer account has the email {args.email!r}.",
            hint="Check the spelling, or authenticate with find_customer_by_name_zip.",
            code="not_found",
        )
    return {
        "customer_id": customer.id,
        "first_name": customer.first_name,
        "last_name": customer.last_name,
    }


class FindByNameZipArgs(ToolArgs):
    first_name: str = Field(description="The customer's first name.")
    last_name: str = Field(description="The customer's last name.")
    zip: str = Field(description="The zip code of one of the customer's addresses.")


_CUSTOMERS_BY_NAME_ZIP = (
    select(CUSTOMERS.c.id, CUSTOMERS.c.first_name, CUSTOMERS.c.last_name)
    .join(ADDRESSES, ADDRESSES.c.customer_id == CUSTOMERS.c.id)
    .where(
        func.lower(CUSTOMERS.c.first_name) == bindparam("first_name"),
        func.lower(CUSTOMERS.c.last_name) == bindparam("last_name"),
        ADDRESSES.c.zip == bindparam("zip"),
    )
    .distinct()
    .order_by(CUSTOMERS.c.id)
)


@tool(read_only=True)
def find_customer_by_name_zip(
    db: Session, args: FindByNameZipArgs, ctx: ToolContext
) -> dict[str, Any]:
    """Authenticate a customer by first name, last name and the zip code of one of their addresses.

    Returns every matching account (usually one). Zero matches: the customer is not authenticated;
    ask for their email instead. Several matches: ask for their email to tell them apart.
    """
    params = {
        "first_name": args.first_name.lower(),
        "last_name": args.last_name.lower(),
        "zip": args.zip,
    }
    matches = [
        {"customer_id": c.id, "first_name": c.first_name, "last_name": c.last_name}
        for c in db.execute(_CUSTOMERS_BY_NAME_ZIP, params)
    ]
    return {"matches": matches}


class CustomerIdArgs(ToolArgs):
    customer_id: int = Field(description="The customer's id, as returned by find_customer_*.")


_CUSTOMER_ID = bindparam("customer_id", type_=Integer)
_CUSTOMER_EXISTS = select(CUSTOMERS.c.id).where(CUSTOMERS.c.id == _CUSTOMER_ID)


def require_customer(db: Session, customer_id: int) -> None:
    """not_found unless the customer exists (an indexed Core lookup, no ORM entity)."""
    if db.execute(_CUSTOMER_EXISTS, {"customer_id": customer_id}).first() is None:
        raise no_such_customer(customer_id)


_CUSTOMER = select(
    CUSTOMERS.c.id,
    CUSTOMERS.c.first_name,
    CUSTOMERS.c.last_name,
    CUSTOMERS.c.email,
    CUSTOMERS.c.phone,
    CUSTOMERS.c.membership,
).where(CUSTOMERS.c.id == _CUSTOMER_ID)

# By id: the order of Customer.addresses and Customer.payment_methods.
_ADDRESSES = (
    select(
        ADDRESSES.c.is_default,
        ADDRESSES.c.line1,
        ADDRESSES.c.line2,
        ADDRESSES.c.city,
        ADDRESSES.c.state,
        ADDRESSES.c.zip,
        ADDRESSES.c.country,
    )
    .where(ADDRESSES.c.customer_id == _CUSTOMER_ID)
    .order_by(ADDRESSES.c.id)
)
_PAYMENT_METHODS = (
    select(
        PAYMENT_METHODS.c.code,
        PAYMENT_METHODS.c.kind,
        PAYMENT_METHODS.c.brand,
        PAYMENT_METHODS.c.last4,
        PAYMENT_METHODS.c.balance,
    )
    .where(PAYMENT_METHODS.c.customer_id == _CUSTOMER_ID)
    .order_by(PAYMENT_METHODS.c.id)
)


@tool(read_only=True)
def get_customer_details(db: Session, args: CustomerIdArgs, ctx: ToolContext) -> dict[str, Any]:
    """Show a customer's profile, address book and payment methods (with gift card balances)."""
    key = {"customer_id": args.customer_id}
    c = db.execute(_CUSTOMER, key).first()
    if c is None:
        raise no_such_customer(args.customer_id)
    return {
        "customer_id": c.id,
        "first_name": c.first_name,
        "last_name": c.last_name,
        "email": c.email,
        "phone": c.phone,
        "membership": c.membership,
        "addresses": [
            {
                "default": a.is_default,
                "line1": a.line1,
                "line2": a.line2,
                "city": a.city,
                "state": a.state,
                "zip": a.zip,
                "country": a.country,
            }
            for a in db.execute(_ADDRESSES, key)
        ],
        "payment_methods": [
            {
                "payment_method_id": m.code,
                "kind": m.kind,
                **({"brand": m.brand, "last4": m.last4} if m.kind == "card" else {}),
                **({"balance": cents(m.balance)} if m.balance is not None else {}),
            }
            for m in db.execute(_PAYMENT_METHODS, key)
        ],
    }


class ListOrdersArgs(ToolArgs):
    customer_id: int = Field(description="The customer's id, as returned by find_customer_*.")
    status: OrderStatus | None = Field(
        None, description="Only orders with this status; null for all orders."
    )


# Newest first; "items" counts every line whatever its status (it was len(order.items)).
_CUSTOMER_ORDERS = (
    select(
        ORDERS.c.order_number,
        ORDERS.c.status,
        ORDERS.c.created_at,
        ORDERS.c.total,
        select(func.count())
        .where(ORDER_ITEMS.c.order_id == ORDERS.c.id)
        .scalar_subquery()
        .label("item_count"),
    )
    .where(ORDERS.c.customer_id == _CUSTOMER_ID)
    .order_by(ORDERS.c.created_at.desc(), ORDERS.c.id.desc())
)
_CUSTOMER_ORDERS_WITH_STATUS = _CUSTOMER_ORDERS.where(ORDERS.c.status == bindparam("status"))


@tool(read_only=True)
def list_customer_orders(db: Session, args: ListOrdersArgs, ctx: ToolContext) -> dict[str, Any]:
    """List a customer's orders, newest first: number, status, date, total and item count."""
    require_customer(db, args.customer_id)
    if args.status:
        query, params = _CUSTOMER_ORDERS_WITH_STATUS, {"status": args.status}
    else:
        query, params = _CUSTOMER_ORDERS, {}
    orders = db.execute(query, {"customer_id": args.customer_id, **params}).all()
    return {
        "orders": [
            {
                "order_number": o.order_number,
                "status": o.status,
                "created_at": o.created_at.isoformat(),
                "total": cents(o.total),
                "items": o.item_count,
            }
            for o in orders
        ]
    }


class OrderNumberArgs(ToolArgs):
    order_number: str = Field(description="The order number, e.g. '#W1234567'.")


@tool(read_only=True)
def get_order_details(db: Session, args: OrderNumberArgs, ctx: ToolContext) -> dict[str, Any]:
    """Show one order: owner, status, shipping address, items (SKU, options, price, status),
    payments and refunds, returns and exchanges.

    Check that customer_id is the authenticated customer's before discussing or changing it.
    """
    return order_view_by_number(db, args.order_number)


class ListProductsArgs(ToolArgs):
    category: str | None = Field(
        None, description="Only this category (e.g. 'audio', 'kitchen'); null for all products."
    )


@tool(read_only=True)
def list_products(db: Session, args: ListProductsArgs, ctx: ToolContext) -> dict[str, Any]:
    """List the shop's products (id, name, category), optionally within one category."""
    query = select(Product).order_by(Product.id)
    if args.category:
        query = query.where(func.lower(Product.category) == args.category.lower())
    products = db.scalars(query).all()
    if not products:
        categories = db.scalars(select(Product.category).distinct().order_by(Product.category))
        raise ToolError(
            f"No products in category {args.category!r}.",
            hint=f"Categories are: {', '.join(categories)}.",
            code="not_found",
        )
    return {
        "products": [{"product_id": p.id, "name": p.name, "category": p.category} for p in products]
    }


class ProductIdArgs(ToolArgs):
    product_id: int = Field(description="The product's id (from list_products or an order item).")


# One query: the product outer-joined with its variants by id (the order of Product.variants);
# a product without variants gives one row whose variant columns are NULL.
_PRODUCT_WITH_VARIANTS = (
    select(
        PRODUCTS.c.id,
        PRODUCTS.c.name,
        PRODUCTS.c.category,
        PRODUCTS.c.description,
        VARIANTS.c.sku,
        VARIANTS.c.options,
        VARIANTS.c.price,
        VARIANTS.c.stock,
        VARIANTS.c.available,
    )
    .select_from(PRODUCTS)
    .outerjoin(VARIANTS, VARIANTS.c.product_id == PRODUCTS.c.id)
    .where(PRODUCTS.c.id == bindparam("product_id", type_=Integer))
    .order_by(VARIANTS.c.id)
)


@tool(read_only=True)
def get_product_details(db: Session, args: ProductIdArgs, ctx: ToolContext) -> dict[str, Any]:
    """Show a product and all its variants: SKU, options, price, units in stock, availability.

    A variant can be ordered or exchanged to only if it is available and has enough stock.
    """
    rows = db.execute(_PRODUCT_WITH_VARIANTS, {"product_id": args.product_id}).all()
    if not rows:
        raise no_such_product(args.product_id)
    p = rows[0]
    return {
        "product_id": p.id,
        "name": p.name,
        "category": p.category,
        "description": p.description,
        "variants": [
            {
                "sku": v.sku,
                "options": v.options,
                "price": cents(v.price),
                "stock": v.stock,
                "available": v.available,
            }
            for v in rows
            if v.sku is not None
        ],
    }
