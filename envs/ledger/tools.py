"""Every ledger tool, in the order the model is offered them (reads first, then writes)."""

from __future__ import annotations

from app.sdk.environment import Tool
from envs.ledger.tools_account import (
    add_beneficiary,
    close_account,
    freeze_account,
    release_hold,
    unfreeze_account,
)
from envs.ledger.tools_money import (
    charge_fee,
    deposit,
    reverse_transaction,
    transfer,
    withdraw,
)
from envs.ledger.tools_read import find_customer, get_account, get_transaction, list_transactions

TOOLS: tuple[Tool, ...] = (
    find_customer,
    get_account,
    list_transactions,
    get_transaction,
    transfer,
    deposit,
    withdraw,
    charge_fee,
    reverse_transaction,
    freeze_account,
    unfreeze_account,
    close_account,
    release_hold,
    add_beneficiary,
)
