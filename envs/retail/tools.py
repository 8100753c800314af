"""Every retail tool, in the order the model is offered them (reads first, then writes)."""

from __future__ import annotations

from app.sdk.environment import Tool
from envs.retail.tools_account import update_customer_default_address
from envs.retail.tools_delivered import (
    exchange_delivered_order_items,
    return_delivered_order_items,
)
from envs.retail.tools_pending import (
    cancel_pending_order,
    modify_pending_order_address,
    modify_pending_order_items,
    modify_pending_order_payment,
)
from envs.retail.tools_read import (
    find_customer_by_email,
    find_customer_by_name_zip,
    get_customer_details,
    get_order_details,
    get_product_details,
    list_customer_orders,
    list_products,
)

TOOLS: tuple[Tool, ...] = (
    find_customer_by_email,
    find_customer_by_name_zip,
    get_customer_details,
    list_customer_orders,
    get_order_details,
    list_products,
    get_product_details,
    cancel_pending_order,
    modify_pending_order_items,
    modify_pending_order_address,
    modify_pending_order_payment,
    return_delivered_order_items,
    exchange_delivered_order_items,
    update_customer_default_address,
)
