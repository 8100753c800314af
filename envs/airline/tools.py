"""Every airline tool, in the order the model is offered them (reads first, then writes)."""

from __future__ import annotations

from app.sdk.environment import Tool
from envs.airline.tools_booking import book_reservation, cancel_reservation
from envs.airline.tools_change import change_cabin, change_flights, update_passengers
from envs.airline.tools_extras import add_baggage, assign_seat, issue_compensation_certificate
from envs.airline.tools_read import (
    find_user_by_email,
    get_flight_status,
    get_reservation_details,
    get_seat_map,
    get_user_details,
    list_airports,
    search_flights,
)

TOOLS: tuple[Tool, ...] = (
    find_user_by_email,
    get_user_details,
    get_reservation_details,
    list_airports,
    search_flights,
    get_flight_status,
    get_seat_map,
    book_reservation,
    cancel_reservation,
    change_flights,
    change_cabin,
    update_passengers,
    add_baggage,
    assign_seat,
    issue_compensation_certificate,
)
