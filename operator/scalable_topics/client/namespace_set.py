"""What a namespace watch knows of its set of topics, and the change each update makes. Pure:
no I/O.

The broker sends unqualified names; the application sees qualified ones (``namespace/name``).
The set is known from the first complete snapshot on. A snapshot too large for one frame comes
in parts, gathered until the complete one; a complete snapshot replaces the set, a diff
changes it (removals first). The hash sent when watching again is the one of a set built only
from a complete snapshot and the diffs that followed it (protocol/topic_set_hash.py says why).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..protocol import TopicsDiff, TopicsSnapshot, topic_set_hash


@dataclass(frozen=True, slots=True)
class TopicSetChange:
    """A change of a namespace watch's set, in qualified names (namespace/name)."""

    added: frozenset[str]
    removed: frozenset[str]  # apply removed first; a name in both was deleted and re-created
    topics: frozenset[str]  # the whole set after the change


class OutOfOrderUpdate(Exception):
    """An update no set can take where it came: a diff before the set is known, or between
    the parts of a snapshot. The watch is then opened again, which resynchronises it."""


class NamespaceSet:
    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self._names: frozenset[str] | None = None  # unqualified; None until a complete snapshot
        self._topics: frozenset[str] = frozenset()  # the same, qualified
        self._parts: list[str] | None = None  # a snapshot's parts received so far

    @property
    def known(self) -> bool:
        """Whether a complete snapshot arrived (on this watch or an earlier one)."""
        return self._names is not None

    @property
    def topics(self) -> frozenset[str]:
        """The set in qualified names; empty until known."""
        return self._topics

    def rewatch_hash(self) -> int | None:
        """What to send as ``current_hash`` when opening a watch: the hash of the known set,
        or None (send me a snapshot) while it is not known."""
        return None if self._names is None else topic_set_hash(self._names)

    def begin_watch(self) -> None:
        """A new watch opens: what an earlier one sent of a snapshot is void."""
        self._parts = None

    def snapshot(self, part: TopicsSnapshot) -> TopicSetChange | None:
        """Take a snapshot (or a part of one). A complete one replaces the set: returns how the
        set changed, None when it did not or the snapshot is not complete yet."""
        gathered = (self._parts or []) + list(part.topics)
        if not part.complete:
            self._parts = gathered
            return None
        self._parts = None
        old = self._names or frozenset()
        new = frozenset(gathered)
        self._replace(new)
        return self._change(new - old, old - new)

    def diff(self, diff: TopicsDiff) -> TopicSetChange | None:
        """Apply a diff, removals first: returns how the set changed (a name that was not there
        is not removed, one already there is not added, unless removed by the same diff), None
        when it did not. OutOfOrderUpdate when no set can take it here."""
        if self._names is None:
            raise OutOfOrderUpdate("a diff came before the first complete snapshot")
        if self._parts is not None:
            raise OutOfOrderUpdate("a diff came between the parts of a snapshot")
        removed = self._names.intersection(diff.removed)
        remaining = self._names - removed
        added = frozenset(diff.added) - remaining
        self._replace(remaining | added)
        return self._change(added, removed)

    def _replace(self, names: frozenset[str]) -> None:
        self._names = names
        self._topics = frozenset(self._qualified(names))

    def _change(self, added: frozenset[str], removed: frozenset[str]) -> TopicSetChange | None:
        if not added and not removed:
            return None
        return TopicSetChange(
            frozenset(self._qualified(added)), frozenset(self._qualified(removed)), self._topics
        )

    def _qualified(self, names: Iterable[str]) -> Iterable[str]:
        return (f"{self.namespace}/{name}" for name in names)
