"""The retail shop's schema: customers, catalogue, orders and everything support can do to them.

Money is `Numeric(12, 2)` read back as float (tools round to cents before writing). Datetimes are
naive UTC. Every constraint is named so Alembic batch migrations can address it on SQLite.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.sdk.models import DeclarativeBase, Money, make_metadata, one_of

ORDER_STATUSES = (
    "pending",
    "processed",
    "shipped",
    "delivered",
    "cancelled",
    "returned",
    "exchanged",
)
ITEM_STATUSES = ("active", "cancelled", "returned", "exchanged")
PAYMENT_KINDS = ("card", "gift_card", "store_credit")
CANCEL_REASONS = ("no_longer_needed", "ordered_by_mistake")
RETURN_REASONS = ("defective", "wrong_item", "not_as_described", "no_longer_needed")


class Base(DeclarativeBase):
    metadata = make_metadata()


class Customer(Base):
    __tablename__ = "customers"
    __table_args__ = (
        CheckConstraint(one_of("membership", ("regular", "silver", "gold")), name="membership"),
        Index("ix_customers_last_first", "last_name", "first_name"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    email: Mapped[str] = mapped_column(String(120), unique=True, index=True)
    first_name: Mapped[str] = mapped_column(String(60))
    last_name: Mapped[str] = mapped_column(String(60))
    phone: Mapped[str | None] = mapped_column(String(30))
    membership: Mapped[str] = mapped_column(String(10), default="regular")
    created_at: Mapped[datetime] = mapped_column(DateTime)

    addresses: Mapped[list[Address]] = relationship(
        back_populates="customer", order_by="Address.id"
    )
    payment_methods: Mapped[list[PaymentMethod]] = relationship(
        back_populates="customer", order_by="PaymentMethod.id"
    )


class Address(Base):
    __tablename__ = "addresses"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    customer_id: Mapped[int] = mapped_column(ForeignKey("customers.id"), index=True)
    line1: Mapped[str] = mapped_column(String(120))
    line2: Mapped[str | None] = mapped_column(String(120))
    city: Mapped[str] = mapped_column(String(60))
    state: Mapped[str] = mapped_column(String(30))
    # Indexed: name + zip is the second way to authenticate a customer.
    zip: Mapped[str] = mapped_column(String(10), index=True)
    country: Mapped[str] = mapped_column(String(40), default="USA")
    is_default: Mapped[bool] = mapped_column(Boolean, default=False)

    customer: Mapped[Customer] = relationship(back_populates="addresses")


class Product(Base):
    __tablename__ = "products"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(80), unique=True)
    # URL slug (migration 2 of the retail branch added it, backfilled from the name).
    slug: Mapped[str] = mapped_column(String(100), unique=True)
    category: Mapped[str] = mapped_column(String(40), index=True)
    description: Mapped[str] = mapped_column(Text)

    variants: Mapped[list[Variant]] = relationship(back_populates="product", order_by="Variant.id")


class Variant(Base):
    __tablename__ = "variants"
    __table_args__ = (
        CheckConstraint("price >= 0", name="price_nonnegative"),
        CheckConstraint("stock >= 0", name="stock_nonnegative"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    product_id: Mapped[int] = mapped_column(ForeignKey("products.id"), index=True)
    sku: Mapped[str] = mapped_column(String(40), unique=True, index=True)
    # Short "key=value;key=value" text, e.g. "color=blue;size=M".
    options: Mapped[str] = mapped_column(String(120))
    price: Mapped[float] = mapped_column(Money)
    stock: Mapped[int] = mapped_column(Integer)
    # False for discontinued variants: they can no longer be ordered or exchanged to.
    available: Mapped[bool] = mapped_column(Boolean, default=True)

    product: Mapped[Product] = relationship(back_populates="variants")


class PaymentMethod(Base):
    __tablename__ = "payment_methods"
    __table_args__ = (
        CheckConstraint(one_of("kind", PAYMENT_KINDS), name="kind"),
        CheckConstraint("balance IS NULL OR balance >= 0", name="balance_nonnegative"),
        # Cards carry brand/last4 and no balance; gift cards and store credit carry a balance.
        CheckConstraint(
            "(kind = 'card' AND balance IS NULL AND last4 IS NOT NULL)"
            " OR (kind != 'card' AND balance IS NOT NULL)",
            name="kind_fields",
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # The id the customer and the agent use, e.g. "gift_card_1234567".
    code: Mapped[str] = mapped_column(String(40), unique=True, index=True)
    customer_id: Mapped[int] = mapped_column(ForeignKey("customers.id"), index=True)
    kind: Mapped[str] = mapped_column(String(20))
    brand: Mapped[str | None] = mapped_column(String(20))
    last4: Mapped[str | None] = mapped_column(String(4))
    balance: Mapped[float | None] = mapped_column(Money)

    customer: Mapped[Customer] = relationship(back_populates="payment_methods")


class Order(Base):
    __tablename__ = "orders"
    __table_args__ = (
        CheckConstraint(one_of("status", ORDER_STATUSES), name="status"),
        CheckConstraint("total >= 0", name="total_nonnegative"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    order_number: Mapped[str] = mapped_column(String(20), unique=True, index=True)
    customer_id: Mapped[int] = mapped_column(ForeignKey("customers.id"), index=True)
    status: Mapped[str] = mapped_column(String(12), index=True)
    # The shipping address is copied, so editing the address book never rewrites history.
    ship_line1: Mapped[str] = mapped_column(String(120))
    ship_line2: Mapped[str | None] = mapped_column(String(120))
    ship_city: Mapped[str] = mapped_column(String(60))
    ship_state: Mapped[str] = mapped_column(String(30))
    ship_zip: Mapped[str] = mapped_column(String(10))
    ship_country: Mapped[str] = mapped_column(String(40))
    total: Mapped[float] = mapped_column(Money)
    created_at: Mapped[datetime] = mapped_column(DateTime)

    customer: Mapped[Customer] = relationship()
    items: Mapped[list[OrderItem]] = relationship(
        back_populates="order", order_by="OrderItem.line_no"
    )
    payments: Mapped[list[Payment]] = relationship(order_by="Payment.id")
    returns: Mapped[list[Return]] = relationship(order_by="Return.id")
    exchanges: Mapped[list[Exchange]] = relationship(order_by="Exchange.id")


class OrderItem(Base):
    __tablename__ = "order_items"
    __table_args__ = (
        CheckConstraint(one_of("status", ITEM_STATUSES), name="status"),
        CheckConstraint("quantity > 0", name="quantity_positive"),
        UniqueConstraint("order_id", "line_no", name="order_line"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    order_id: Mapped[int] = mapped_column(ForeignKey("orders.id"), index=True)
    line_no: Mapped[int] = mapped_column(Integer)
    variant_id: Mapped[int] = mapped_column(ForeignKey("variants.id"), index=True)
    quantity: Mapped[int] = mapped_column(Integer)
    unit_price: Mapped[float] = mapped_column(Money)
    status: Mapped[str] = mapped_column(String(12), default="active")

    order: Mapped[Order] = relationship(back_populates="items")
    variant: Mapped[Variant] = relationship()


class Payment(Base):
    """One money movement: a charge to, or a refund back to, a payment method."""

    __tablename__ = "payments"
    __table_args__ = (
        CheckConstraint(one_of("kind", ("charge", "refund")), name="kind"),
        CheckConstraint("amount > 0", name="amount_positive"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    order_id: Mapped[int] = mapped_column(ForeignKey("orders.id"), index=True)
    payment_method_id: Mapped[int] = mapped_column(ForeignKey("payment_methods.id"), index=True)
    kind: Mapped[str] = mapped_column(String(8))
    amount: Mapped[float] = mapped_column(Money)
    created_at: Mapped[datetime] = mapped_column(DateTime)

    payment_method: Mapped[PaymentMethod] = relationship()


class Return(Base):
    __tablename__ = "returns"
    __table_args__ = (
        CheckConstraint(one_of("reason", RETURN_REASONS), name="reason"),
        CheckConstraint(one_of("status", ("requested", "received", "refunded")), name="status"),
        CheckConstraint("refund_amount >= 0", name="refund_nonnegative"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # Deterministic "RT-<order number>-<n>", so replaying the same calls yields the same code.
    code: Mapped[str] = mapped_column(String(30), unique=True, index=True)
    order_id: Mapped[int] = mapped_column(ForeignKey("orders.id"), index=True)
    reason: Mapped[str] = mapped_column(String(20))
    status: Mapped[str] = mapped_column(String(10), default="requested")
    refund_method_id: Mapped[int] = mapped_column(ForeignKey("payment_methods.id"))
    refund_amount: Mapped[float] = mapped_column(Money)
    created_at: Mapped[datetime] = mapped_column(DateTime)

    items: Mapped[list[ReturnItem]] = relationship(order_by="ReturnItem.id")


class ReturnItem(Base):
    __tablename__ = "return_items"
    __table_args__ = (CheckConstraint("quantity > 0", name="quantity_positive"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    return_id: Mapped[int] = mapped_column(ForeignKey("returns.id"), index=True)
    order_item_id: Mapped[int] = mapped_column(ForeignKey("order_items.id"), index=True)
    quantity: Mapped[int] = mapped_column(Integer)

    order_item: Mapped[OrderItem] = relationship()


class Exchange(Base):
    """One exchanged order line: the old variant comes back, the new one ships."""

    __tablename__ = "exchanges"
    __table_args__ = (
        CheckConstraint("quantity > 0", name="quantity_positive"),
        CheckConstraint(one_of("status", ("requested", "shipped", "completed")), name="status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # Deterministic "EX-<order number>-<line no>": a line is exchanged at most once.
    code: Mapped[str] = mapped_column(String(30), unique=True, index=True)
    order_id: Mapped[int] = mapped_column(ForeignKey("orders.id"), index=True)
    order_item_id: Mapped[int] = mapped_column(ForeignKey("order_items.id"))
    from_variant_id: Mapped[int] = mapped_column(ForeignKey("variants.id"))
    to_variant_id: Mapped[int] = mapped_column(ForeignKey("variants.id"))
    quantity: Mapped[int] = mapped_column(Integer)
    # Positive: the customer paid more; negative: the customer was refunded.
    price_difference: Mapped[float] = mapped_column(Money)
    payment_method_id: Mapped[int | None] = mapped_column(ForeignKey("payment_methods.id"))
    status: Mapped[str] = mapped_column(String(10), default="requested")
    created_at: Mapped[datetime] = mapped_column(DateTime)

    order_item: Mapped[OrderItem] = relationship()
    from_variant: Mapped[Variant] = relationship(foreign_keys=[from_variant_id])
    to_variant: Mapped[Variant] = relationship(foreign_keys=[to_variant_id])


class AuditLog(Base):
    """Every successful write, with the frozen session clock; entity_id is a natural key."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    ts: Mapped[datetime] = mapped_column(DateTime)
    actor: Mapped[str] = mapped_column(String(20))
    action: Mapped[str] = mapped_column(String(40))
    entity: Mapped[str] = mapped_column(String(30))
    entity_id: Mapped[str] = mapped_column(String(40), index=True)
    # Canonical JSON (sorted keys) of what changed; never free text typed by the agent.
    detail: Mapped[str] = mapped_column(Text)
