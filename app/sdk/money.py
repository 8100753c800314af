"""Money helpers for environments: amounts are floats kept to the cent, shown with two decimals.

One implementation for every environment, so states and outputs round alike.
"""

from __future__ import annotations


def cents(value: float) -> float:
    """Money is kept to the cent; floats drift, so every computed amount goes through here.

    Adding 0.0 turns a rounded -0.0 into 0.0, so states never differ by the sign of zero.
    """
    return round(value, 2) + 0.0


def money(value: float) -> str:
    """An amount as shown to the agent: `1234.50`."""
    return f"{value:.2f}"


def grouped_money(value: float) -> str:
    """An amount with thousands separators: `1,234.50`."""
    return f"{value:,.2f}"


def optional_money(value: float | None) -> str | None:
    """`money`, or None for no amount."""
    return None if value is None else money(value)
