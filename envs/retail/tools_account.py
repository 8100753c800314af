"""Write tools on the customer's account itself."""

from __future__ import annotations

from typing import Any

from pydantic import Field
from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.orm import Session

from app.sdk.environment import ToolArgs, ToolContext, tool
from envs.retail.ops import (
    ADDRESSES,
    CUSTOMERS,
    AddressFields,
    audit,
    changed_columns,
    no_such_customer,
)


class CustomerRef(ToolArgs):
    customer_id: int = Field(description="The authenticated customer's id.")


# Bases listed last come first in the schema: the customer, then the address.
class DefaultAddressArgs(AddressFields, CustomerRef):
    pass


ADDRESS_COLUMNS = ("line1", "line2", "city", "state", "zip", "country")

# Core, not ORM: hot write path; see bench/history/suite.md. One row: the customer's email and their
# first default address (by id, like the ORM relationship), or NULLs when they have none.
_CUSTOMER_AND_DEFAULT = (
    select(
        CUSTOMERS.c.email,
        ADDRESSES.c.id.label("address_id"),
        *(ADDRESSES.c[c] for c in ADDRESS_COLUMNS),
    )
    .select_from(CUSTOMERS)
    .outerjoin(ADDRESSES, (ADDRESSES.c.customer_id == CUSTOMERS.c.id) & ADDRESSES.c.is_default)
    .where(CUSTOMERS.c.id == bindparam("customer_id"))
    .order_by(ADDRESSES.c.id)
    .limit(1)
)
_INSERT_ADDRESS = insert(ADDRESSES)
# The SET list follows the parameters given (one cached statement per set of columns).
_UPDATE_ADDRESS = update(ADDRESSES).where(ADDRESSES.c.id == bindparam("address_id_"))


@tool
def update_customer_default_address(
    db: Session, args: DefaultAddressArgs, ctx: ToolContext
) -> dict[str, Any]:
    """Replace the customer's default address in their address book (used for future orders).

    Existing orders keep their shipping address; change a pending order's address with
    modify_pending_order_address.
    """
    # Core, not ORM: hot write path; see bench/history/suite.md.
    row = db.execute(_CUSTOMER_AND_DEFAULT, {"customer_id": args.customer_id}).first()
    if row is None:
        raise no_such_customer(args.customer_id)
    new = {
        "line1": args.line1,
        "line2": args.line2 or None,
        "city": args.city,
        "state": args.state,
        "zip": args.zip,
        "country": args.country,
    }
    if row.address_id is None:
        db.execute(_INSERT_ADDRESS, {"customer_id": args.customer_id, "is_default": True, **new})
    elif values := changed_columns(row, new):
        db.execute(_UPDATE_ADDRESS, {"address_id_": row.address_id, **values})
    audit(db, ctx, "update_default_address", "customers", row.email, zip=args.zip)
    return {"customer_id": args.customer_id, "default_address": new}
