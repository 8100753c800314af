"""The airline's numbers in one place: fees, allowances, compensation, the route network.

Tools, the base data, the policy text and the task generator all read these, so a rule is
stated once.
"""

from __future__ import annotations

# Free checked bags per passenger, by the booking member's tier and the reservation's fare class.
FREE_BAGS: dict[str, dict[str, int]] = {
    "regular": {"basic_economy": 0, "economy": 1, "business": 2},
    "silver": {"basic_economy": 1, "economy": 2, "business": 3},
    "gold": {"basic_economy": 2, "economy": 3, "business": 4},
}
BAG_FEE = 50.0  # per checked bag beyond the free allowance
MAX_BAGS_PER_PASSENGER = 5
INSURANCE_PER_PASSENGER = 30.0
MAX_PASSENGERS = 5
FREE_CANCEL_HOURS = 24  # a booking can be cancelled with a full refund this long after booking
# Compensation certificate per passenger, by what happened to a flight of the reservation.
COMPENSATION = {"cancelled": 100.0, "delayed": 50.0}
COMPENSATION_TIERS = ("silver", "gold")
# A complaint about a flight whose scheduled departure has passed is in time for this many hours
# after it (inclusive), gold members longer; at most this many certificates per conversation.
CLAIM_HOURS = {"regular": 48, "silver": 48, "gold": 72}
MAX_CERTIFICATES_PER_CONVERSATION = 3
MIN_CONNECTION_MINUTES = 60
MAX_CONNECTION_MINUTES = 360

# Physical seat map of every aircraft: business rows 1-2 (A C D F), economy rows 10-14 (A-F).
BUSINESS_SEATS = tuple(f"{r}{s}" for r in (1, 2) for s in "ACDF")
ECONOMY_SEATS = tuple(f"{r}{s}" for r in range(10, 15) for s in "ABCDEF")
# Sellable inventory per fare class; basic economy and economy share the economy cabin.
INVENTORY = {"basic_economy": 12, "economy": 18, "business": 8}
CABIN_OF = {"basic_economy": "economy", "economy": "economy", "business": "business"}

AIRPORTS = (
    ("SFO", "San Francisco International", "San Francisco"),
    ("LAX", "Los Angeles International", "Los Angeles"),
    ("SEA", "Seattle-Tacoma International", "Seattle"),
    ("DEN", "Denver International", "Denver"),
    ("ORD", "Chicago O'Hare International", "Chicago"),
    ("JFK", "John F. Kennedy International", "New York"),
    ("BOS", "Boston Logan International", "Boston"),
    ("ATL", "Hartsfield-Jackson Atlanta International", "Atlanta"),
    ("MIA", "Miami International", "Miami"),
    ("DFW", "Dallas/Fort Worth International", "Dallas"),
)
# (flight number, origin, destination, departure "HH:MM" UTC, minutes in the air)
ROUTES = (
    ("SG101", "SFO", "JFK", "08:00", 330), ("SG102", "JFK", "SFO", "09:00", 390),
    ("SG110", "SFO", "DEN", "07:00", 150), ("SG111", "DEN", "SFO", "16:00", 165),
    ("SG120", "DEN", "JFK", "11:30", 225), ("SG121", "JFK", "DEN", "17:00", 255),
    ("SG130", "LAX", "ORD", "08:30", 240), ("SG131", "ORD", "LAX", "14:00", 270),
    ("SG140", "SEA", "BOS", "07:15", 330), ("SG141", "BOS", "SEA", "13:00", 375),
    ("SG150", "ATL", "MIA", "10:00", 110), ("SG151", "MIA", "ATL", "15:00", 115),
    ("SG160", "DFW", "ATL", "06:45", 130), ("SG161", "ATL", "DFW", "18:00", 150),
    ("SG170", "ORD", "BOS", "12:00", 135), ("SG171", "BOS", "ORD", "08:00", 150),
    ("SG180", "LAX", "SEA", "09:00", 165), ("SG181", "SEA", "LAX", "18:30", 160),
)  # fmt: skip
# The flight number flying each route back the other way.
RETURN_OF = {
    a: b
    for i in range(0, len(ROUTES), 2)
    for a, b in ((ROUTES[i][0], ROUTES[i + 1][0]), (ROUTES[i + 1][0], ROUTES[i][0]))
}


def free_bags(tier: str, fare_class: str, passengers: int) -> int:
    return FREE_BAGS[tier][fare_class] * passengers
