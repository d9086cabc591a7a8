"""Which part of the stored object an updated value replaces, as apiserver's CorrelatedObject
finds it: object fields and map entries by name, ``x-kubernetes-list-type: map`` items by their
keys; nothing else correlates. Ratcheting and transition rules (``oldSelf``) build on this."""

from __future__ import annotations

from collections.abc import Sequence

from scalable_topics.kubeapi import structural as st
from scalable_topics.kubeapi.structural import Schema


class MapList:
    """The items of an old ``x-kubernetes-list-type: map`` list, found by their keys (the first
    item with a key wins, items without all keys are never found)."""

    def __init__(self, schema: Schema, old_items: Sequence[object]) -> None:
        self._keys = list(st.list_map_keys(schema))
        self._by_key: dict[object, dict[str, object]] = {}
        enabled = st.declared_type(schema) == "array" and st.list_type(schema) == "map"
        for item in old_items if enabled and self._keys else ():
            if isinstance(item, dict):
                found = self.key_of(item)
                if found is not None:
                    self._by_key.setdefault(found, item)

    def key_of(self, item: dict[str, object]) -> object | None:
        parts: list[object] = []
        for name in self._keys:
            if name not in item:
                return None
            part = st.scalar_key(item[name])
            if part is None or part[0] == "null":
                return None
            parts.append(part)
        return tuple(parts)

    def get(self, item: object) -> dict[str, object] | None:
        if not isinstance(item, dict) or not self._by_key:
            return None
        found = self.key_of(item)
        return None if found is None else self._by_key.get(found)


class Correlated:
    """A new value, the old value it replaces, and its schema; ``key``/``index`` walk down."""

    __slots__ = ("_children", "_equal", "_map_list", "new", "old", "schema")

    def __init__(self, new: object, old: object, schema: Schema | None) -> None:
        self.new = new
        self.old = old
        self.schema = schema
        self._equal: bool | None = None
        self._map_list: MapList | None = None
        self._children: dict[object, Correlated | None] = {}

    def key(self, name: str) -> Correlated | None:
        """The field ``name`` of an object (or entry of a map), when old and new both have it."""
        if self.schema is None:
            return None
        cache_key = ("key", name)
        if cache_key in self._children:
            return self._children[cache_key]
        found: Correlated | None = None
        if (
            isinstance(self.old, dict)
            and isinstance(self.new, dict)
            and name in self.old
            and name in self.new
        ):
            sub = st.field_schema(self.schema, name)
            if sub is not None:
                found = Correlated(self.new[name], self.old[name], sub)
        self._children[cache_key] = found
        return found

    def index(self, position: int) -> Correlated | None:
        """Item ``position`` of a new list, when it is a list-type map item found in the old."""
        if self.schema is None:
            return None
        cache_key = ("index", position)
        if cache_key in self._children:
            return self._children[cache_key]
        found: Correlated | None = None
        if (
            isinstance(self.new, list)
            and position < len(self.new)
            and isinstance(self.old, list)
            and st.list_type(self.schema) == "map"
        ):
            if self._map_list is None:
                self._map_list = MapList(self.schema, self.old)
            old_item = self._map_list.get(self.new[position])
            sub = st.items(self.schema)
            if old_item is not None and sub is not None:
                found = Correlated(self.new[position], old_item, sub)
        self._children[cache_key] = found
        return found

    def unchanged(self) -> bool:
        """CorrelatedObject.CachedDeepEqual: the update left this value as it was."""
        if self._equal is None:
            self._equal = self._compare()
        return self._equal

    def _compare(self) -> bool:
        new, old = self.new, self.old
        if new is None or old is None:
            return new is None and old is None
        if isinstance(new, list) != isinstance(old, list):
            return False
        if isinstance(new, dict) != isinstance(old, dict):
            return False
        if isinstance(new, list):
            assert isinstance(old, list)
            if len(new) != len(old):
                return False
            for position in range(len(new)):
                sub = self.index(position)
                if sub is None:
                    return self._map_list is None and st.deep_equal(old, new)
                if not sub.unchanged():
                    return False
            return True
        if isinstance(new, dict):
            assert isinstance(old, dict)
            if len(new) != len(old):
                return False
            for name in new:
                sub = self.key(name)
                if sub is None or not sub.unchanged():
                    return False
            return True
        return st.deep_equal(old, new)
