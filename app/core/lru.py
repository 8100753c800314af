"""A tiny least-recently-used map with an eviction callback (no locks: callers hold their own).

Bounded by a count (`capacity`) and, optionally, by bytes (`max_bytes`, each entry weighed once by
`size_of` when put): a cache of snapshot images or whole-database dumps is sized by what it
holds, so a working set of many tasks evicts instead of growing the process by count x size.
The most recently put entry always stays, even when it alone is over `max_bytes`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LRU(Generic[K, V]):
    def __init__(
        self,
        capacity: int,
        on_evict: Callable[[K, V], None] | None = None,
        *,
        max_bytes: int | None = None,
        size_of: Callable[[V], int] | None = None,
    ):
        self.capacity = capacity
        self.max_bytes = max_bytes  # None: bounded by count only
        self._items: OrderedDict[K, V] = OrderedDict()
        self._sizes: dict[K, int] = {}
        self._size_of = size_of
        self._on_evict = on_evict
        self.bytes = 0  # the sum of the entries' sizes (0 without `size_of`)

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        if key in self._items:
            self.bytes -= self._sizes.pop(key, 0)
        self._items[key] = value
        self._items.move_to_end(key)
        if self._size_of is not None:
            size = self._size_of(value)
            self._sizes[key] = size
            self.bytes += size
        self.shrink()

    def shrink(self) -> None:
        """Evict least recently used entries until both bounds hold (the newest always stays)."""
        while self._items and (
            len(self._items) > self.capacity
            or (self.max_bytes is not None and self.bytes > self.max_bytes and len(self) > 1)
        ):
            old_key, old_value = self._items.popitem(last=False)
            self.bytes -= self._sizes.pop(old_key, 0)
            if self._on_evict:
                self._on_evict(old_key, old_value)

    def pop(self, key: K) -> V | None:
        self.bytes -= self._sizes.pop(key, 0)
        return self._items.pop(key, None)

    def keys(self) -> list[K]:
        """Least recently used first."""
        return list(self._items.keys())

    def values(self) -> list[V]:
        return list(self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items
