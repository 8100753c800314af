"""SQL functions overridden on a connection that runs agent SQL: the frozen clock, a bounded printf.

`date`, `time`, `datetime`, `julianday`, `unixepoch`, `strftime` (and `timediff`) and the
CURRENT_DATE / CURRENT_TIME / CURRENT_TIMESTAMP keywords read 'now' as the session's clock (UTC:
'localtime' and 'utc' are no-ops); any other argument gets SQLite's own answer, from the
built-in on a private in-memory connection. `printf` / `format` add up every width and precision
a format asks for and refuse the call past `max_chars` before SQLite formats anything (its
`%.*c` loop runs inside one VM step, where no progress handler fires). The overrides stay on the
connection (Python 3.11's sqlite3 cannot remove a function) and only ever answer what the
built-ins answer, with the session's clock (docs/durability.md).
"""

from __future__ import annotations

import math
import re
import sqlite3
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

_CLOCK_FUNCTIONS = ("date", "time", "datetime", "julianday", "unixepoch", "strftime")
_TWO_TIMES = ("timediff",) if sqlite3.sqlite_version_info >= (3, 43) else ()
_NO_OPS = {"localtime", "utc"}
_local = threading.local()


def _builtins(length_limit: int) -> sqlite3.Connection:
    """This thread's connection with SQLite's own functions (nothing overridden)."""
    conn: sqlite3.Connection | None = getattr(_local, "conn", None)
    if conn is None:
        conn = sqlite3.connect(":memory:", check_same_thread=False)
        _local.conn = conn
    # The calling connection's limits held for the arguments; they hold for the results too.
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, length_limit)
    return conn


def _builtin(name: str, args: tuple[Any, ...], length_limit: int = 1_000_000) -> Any:
    marks = ", ".join("?" * len(args))
    return _builtins(length_limit).execute(f"SELECT {name}({marks})", args).fetchone()[0]


def _is(value: Any, words: set[str]) -> bool:
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return isinstance(value, str) and value.lower() in words


def clock_texts(now: datetime) -> dict[str, str]:
    """'now' and the CURRENT_* keywords' values for a session clock (naive = UTC)."""
    if now.tzinfo is not None:
        now = now.astimezone(UTC).replace(tzinfo=None)
    return {
        "now": now.strftime("%Y-%m-%d %H:%M:%S.") + f"{now.microsecond // 1000:03d}",
        "current_timestamp": now.strftime("%Y-%m-%d %H:%M:%S"),
        "current_date": now.strftime("%Y-%m-%d"),
        "current_time": now.strftime("%H:%M:%S"),
    }


def install_frozen_clock(conn: sqlite3.Connection, now: datetime) -> None:
    """Make every clock function of `conn` read `now` instead of the machine's clock."""
    texts = clock_texts(now)

    def at(value: Any) -> Any:
        return texts["now"] if _is(value, {"now"}) else value

    def modifiers(values: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(v for v in values if not _is(v, _NO_OPS))

    def time_first(name: str) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            if name == "strftime":
                fmt, rest = (args[0], args[1:]) if args else (None, ())
                value, mods = (rest[0], rest[1:]) if rest else ("now", ())
                return _builtin(name, (fmt, at(value), *modifiers(mods)))
            value, mods = (args[0], args[1:]) if args else ("now", ())
            return _builtin(name, (at(value), *modifiers(mods)))

        return call

    for name in _CLOCK_FUNCTIONS:
        conn.create_function(name, -1, time_first(name), deterministic=True)
    for name in _TWO_TIMES:
        conn.create_function(
            name, 2, lambda a, b, n=name: _builtin(n, (at(a), at(b))), deterministic=True
        )
    for keyword in ("current_timestamp", "current_date", "current_time"):
        conn.create_function(keyword, 0, lambda k=keyword: texts[k], deterministic=True)


# --- printf ------------------------------------------------------------------------------------
# A conversion: '%', then SQLite's flag / width / precision / length characters, then the type.
_SPEC = re.compile(r"%([-+ #!0,l.*0-9]*)(.?)", re.DOTALL)
_NUMBER = re.compile(r"\*|\d+")


def _int_arg(args: tuple[Any, ...], index: int, cap: int) -> int:
    """What SQLite's printf reads for a '*' (sqlite3_value_int64 of the argument)."""
    value = args[index] if index < len(args) else None
    if value is None:
        return 0
    if isinstance(value, float):
        return abs(int(value)) if math.isfinite(value) else cap + 1
    if isinstance(value, int):
        return abs(value)
    # Text or a blob: its numeric prefix, as SQLite reads it (REAL: no integer overflow).
    real = _builtins(cap).execute("SELECT CAST(? AS REAL)", (value,)).fetchone()[0]
    return abs(int(real)) if math.isfinite(real) else cap + 1


def printf_cost(fmt: Any, args: tuple[Any, ...], cap: int) -> int:
    """An upper bound of the characters SQLite's printf pads or repeats for this call."""
    if isinstance(fmt, bytes):
        fmt = fmt.decode("utf-8", "replace")
    if not isinstance(fmt, str):
        return 0
    total, used = 0, 0
    for spec in _SPEC.finditer(fmt):
        flags, kind = spec.group(1), spec.group(2)
        for part in _NUMBER.findall(flags):
            if part == "*":
                total += _int_arg(args, used, cap)
                used += 1
            else:  # a 40-digit width is as bad as any over the cap (and int() would balk)
                total += int(part) if len(part) <= 10 else cap + 1
        if kind not in ("", "%", "n"):
            used += 1
        if total > cap:
            break
    return total


class Budget(Protocol):
    """What the bounded functions report to: the running call's deadline and refusals. Out of
    a call (`active` false: verify, the framework's own queries) they refuse nothing."""

    active: bool

    def expired(self) -> bool:
        """True (and recorded) once the call's time is up."""

    def refuse(self, why: str) -> None:
        """Record why the statement is refused (a too_large answer)."""

    def fail(self, why: str) -> None:
        """Record an error SQLite's own function gave (an sql_error answer)."""


# Built-ins whose cost grows with the product of their first two arguments' lengths (a 64 KiB
# haystack and a 32 KiB needle: 40 ms for instr, seconds for trim), and the arities to cover.
_QUADRATIC = {"instr": (2,), "replace": (3,), "trim": (2,), "ltrim": (2,), "rtrim": (2,),
              "like": (2, 3), "glob": (2,)}  # fmt: skip


def _length(value: Any) -> int:
    return len(value) if isinstance(value, str | bytes) else len(str(value))


def install_bounded_functions(
    conn: sqlite3.Connection, budget: Budget, *, max_chars: int, max_work: int, max_pattern: int
) -> None:
    """printf / format refuse when their widths and precisions add up to more than
    `max_chars`; instr, replace, trim, LIKE and GLOB when the product of their arguments'
    lengths passes `max_work`, LIKE / GLOB too when the pattern is longer than `max_pattern`.
    Each call first checks the budget's deadline: a statement of many such calls stops at its
    limit, not after all of them."""

    # A refusal stops the statement with sqlite3_interrupt, not an exception: SQLite reports
    # a callback's exception through sys.unraisablehook when tracebacks are on (Datasette turns
    # them on process-wide), and its message would be lost anyway.
    def stop() -> None:
        conn.interrupt()

    def bounded_printf(*args: Any) -> Any:
        if budget.expired():
            return stop()
        if not args or not budget.active:
            return _builtin("printf", args)
        if printf_cost(args[0], args[1:], max_chars) > max_chars:
            budget.refuse(
                f"printf/format widths and precisions add up to more than {max_chars:,} characters"
            )
            return stop()
        return limited("printf", args)

    def limited(name: str, args: tuple[Any, ...]) -> Any:
        try:
            return _builtin(name, args, max_chars)
        except sqlite3.DataError:  # "string or blob too big"
            budget.refuse(f"{name}() would return a value over {max_chars:,} bytes")
        except sqlite3.Error as exc:  # what the built-in itself refuses (a bad ESCAPE, ...)
            budget.fail(f"{name}(): {exc}")
        return stop()

    def quadratic(name: str) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            if budget.expired():
                return stop()
            if not budget.active:
                return _builtin(name, args)
            if None not in args[:2]:
                first, second = _length(args[0]), _length(args[1])
                if name in ("like", "glob") and first > max_pattern:
                    budget.refuse(f"LIKE / GLOB patterns are limited to {max_pattern} characters")
                    return stop()
                if first * second > max_work:
                    budget.refuse(
                        f"{name}() on arguments this long ({first:,} x {second:,} characters) "
                        f"takes too long; the limit is {max_work:,} for the product of the two "
                        "lengths"
                    )
                    return stop()
            return limited(name, args)

        return call

    for name in ("printf", "format"):
        conn.create_function(name, -1, bounded_printf, deterministic=True)
    for name, arities in _QUADRATIC.items():
        for arity in arities:
            conn.create_function(name, arity, quadratic(name), deterministic=True)
