"""A tiny least-recently-used map with an eviction callback (no locks: used from one event loop)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LRU(Generic[K, V]):
    def __init__(self, capacity: int, on_evict: Callable[[K, V], None] | None = None):
        self.capacity = capacity
        self._items: OrderedDict[K, V] = OrderedDict()
        self._on_evict = on_evict

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.capacity:
            old_key, old_value = self._items.popitem(last=False)
            if self._on_evict:
                self._on_evict(old_key, old_value)

    def pop(self, key: K) -> V | None:
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
