"""What a namespace watch follows, pure (no I/O): which topics match its filters, the set of
them, what one watch's client holds that differs from it, and the updates that tell it.

- ``member_uid``: whether a ScalableTopic belongs to a watch's set (its ``spec.properties`` hold
  every filter pair, and it is not being deleted), and the uid that identifies it then, so that
  a topic deleted and created again under the same name is a different member.
- ``MemberSet``: the set, name -> uid. It is registered before it reads the cache: the changes
  that arrive before ``load`` are kept (the last per name) and replayed onto what was read, so
  none is lost whenever the read happened in between.
- ``Lag``: for one watch, the names changed since its client was last told, each with the uid
  the client holds (None: not in its set). A slow client costs this map, at most one entry
  per name, never a queue of updates; a change undone before it is told costs nothing.
- ``snapshot_parts``/``diff_parts``: updates cut to fit a frame.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..protocol import TopicsDiff, TopicsSnapshot, topic_set_hash

# (key, value) pairs in key order: one spelling of a filter set, whatever order it came in.
Filters = tuple[tuple[str, str], ...]

# What a NamespaceUpdate holds besides its names, with room to spare: the command's array
# header and tag, a watch id of up to 9 bytes, two nils, and a snapshot's or a diff's array
# headers (measured at most 24 bytes).
UPDATE_ENVELOPE_BYTES = 64


def normalized(filters: Mapping[str, str]) -> Filters:
    return tuple(sorted(filters.items()))


def matches(properties: Mapping[str, Any], filters: Filters) -> bool:
    """Whether ``properties`` hold every pair of ``filters`` (no filters: always)."""
    return all(properties.get(key) == value for key, value in filters)


def member_uid(topic: Mapping[str, Any] | None, filters: Filters) -> str | None:
    """The uid of ``topic`` if it belongs to the set of ``filters``, else None: a topic being
    deleted (``deletionTimestamp`` set) has left it already."""
    if topic is None:
        return None
    metadata = topic.get("metadata") or {}
    if metadata.get("deletionTimestamp"):
        return None
    spec = topic.get("spec") or {}
    properties = spec.get("properties") or {}
    if not isinstance(properties, Mapping) or not matches(properties, filters):
        return None
    return str(metadata.get("uid") or "")


class MemberSet:
    """The topics of one namespace that match one filter set: name -> uid."""

    def __init__(self) -> None:
        self._members: dict[str, str] | None = None
        self._early: dict[str, str | None] = {}  # changes seen before the load
        self._names: tuple[str, ...] | None = None  # sorted, until the next change
        self._hash: int | None = None
        self._parts: tuple[int, list[TopicsSnapshot]] | None = None  # by frame budget

    @property
    def loaded(self) -> bool:
        return self._members is not None

    def load(self, read: Mapping[str, str]) -> None:
        """Start from ``read`` (the members in the cache, read after the set was registered),
        then replay the changes seen since the registration, in order: whatever they saw
        before the read is in it already, and replaying it changes nothing."""
        if self._members is not None:
            raise RuntimeError("the member set is loaded already")
        self._members = dict(read)
        early, self._early = self._early, {}
        for name, uid in early.items():
            self.observe(name, uid)

    def observe(self, name: str, uid: str | None) -> tuple[bool, str | None]:
        """Topic ``name`` is now the member ``uid`` (None: not a member). Whether that changed
        the set, and the uid it had before. Before the load the change is only kept."""
        members = self._members
        if members is None:
            self._early.pop(name, None)  # re-inserted last: replayed in the order last seen
            self._early[name] = uid
            return False, None
        previous = members.get(name)
        if previous == uid:
            return False, previous
        if uid is None:
            del members[name]
        else:
            members[name] = uid
        self._names = self._hash = self._parts = None
        return True, previous

    def get(self, name: str) -> str | None:
        return None if self._members is None else self._members.get(name)

    def __len__(self) -> int:
        return 0 if self._members is None else len(self._members)

    def names(self) -> tuple[str, ...]:
        """The members' names, sorted by code point (as snapshots carry them)."""
        if self._names is None:
            self._names = tuple(sorted(self._members or ()))
        return self._names

    def hash(self) -> int:
        """topic_set_hash of the names."""
        if self._hash is None:
            self._hash = topic_set_hash(self.names())
        return self._hash

    def snapshot(self, budget: int) -> list[TopicsSnapshot]:
        """The set as snapshot parts of at most ``budget`` bytes of names each; kept until the
        set changes, so many watches opening on one set share the parts."""
        if self._parts is None or self._parts[0] != budget:
            self._parts = (budget, snapshot_parts(self.names(), budget))
        return self._parts[1]


def opening(members: MemberSet, current_hash: int | None, budget: int) -> list[TopicsSnapshot]:
    """What a watch opening on ``members`` is sent: nothing when the client's hash is the
    set's (it holds the set already), else the snapshot, in parts of ``budget`` bytes."""
    if current_hash is not None and current_hash == members.hash():
        return []
    return members.snapshot(budget)


class Lag:
    """What one watch's client holds that may differ from the member set: for each name
    changed since it was last told, the uid it holds (None: not in its set)."""

    def __init__(self) -> None:
        self._held: dict[str, str | None] = {}

    def note(self, name: str, previous: str | None) -> None:
        """``name`` changed in the set; ``previous`` is what it was, which the client holds
        unless the name changed already since it was last told."""
        self._held.setdefault(name, previous)

    def __bool__(self) -> bool:
        return bool(self._held)

    def __len__(self) -> int:
        return len(self._held)

    def clear(self) -> None:
        self._held.clear()

    def take(self, members: MemberSet) -> TopicsDiff | None:
        """The diff that brings the client to ``members`` (None when nothing differs: a change
        undone, a topic created and deleted, costs nothing); the client is then taken to
        hold it. A name whose uid changed is in both lists: deleted, then created again."""
        added: list[str] = []
        removed: list[str] = []
        for name, held in self._held.items():
            now = members.get(name)
            if held == now:
                continue
            if held is not None:
                removed.append(name)
            if now is not None:
                added.append(name)
        self._held.clear()
        if not added and not removed:
            return None
        return TopicsDiff(tuple(sorted(added)), tuple(sorted(removed)))


# -- cutting updates to the frame size --------------------------------------------------------


def name_bytes(name: str) -> int:
    """The msgpack size of ``name`` as a str."""
    size = len(name.encode())
    if size < 32:
        return size + 1
    if size < 1 << 8:
        return size + 2
    if size < 1 << 16:
        return size + 3
    return size + 5


def frame_budget(max_frame_bytes: int) -> int:
    """The bytes of names one NamespaceUpdate may carry within ``max_frame_bytes``."""
    budget = max_frame_bytes - UPDATE_ENVELOPE_BYTES
    if budget <= 0:
        raise ValueError(f"a frame of {max_frame_bytes} bytes has no room for topic names")
    return budget


def _cut(names: tuple[str, ...], budget: int, used: int = 0) -> list[tuple[str, ...]]:
    """``names`` in runs of at most ``budget`` bytes each, the first already holding
    ``used``. Each array header is counted as its largest (5 bytes)."""
    runs: list[tuple[str, ...]] = []
    start = 0
    used += 5
    for index, name in enumerate(names):
        size = name_bytes(name)
        if size + 5 > budget:
            raise ValueError(
                f"topic name {name[:64]!r}... ({size} bytes) does not fit in a frame's "
                f"{budget} bytes of names"
            )
        if used + size > budget:
            runs.append(names[start:index])
            start, used = index, 5
        used += size
    runs.append(names[start:])  # the whole tuple itself when it fits at once
    return runs


def snapshot_parts(names: tuple[str, ...], budget: int) -> list[TopicsSnapshot]:
    """A snapshot of sorted ``names`` as parts of at most ``budget`` bytes of names; all but
    the last ``complete=False``. An empty set is one complete, empty part."""
    runs = _cut(names, budget)
    last = len(runs) - 1
    return [TopicsSnapshot(run, index == last) for index, run in enumerate(runs)]


def diff_parts(diff: TopicsDiff, budget: int) -> list[TopicsDiff]:
    """``diff`` as parts of at most ``budget`` bytes of names, the removals first: a part
    carries removals until they are all out, then (in the same part if room is left)
    additions. Applying the parts in order, each removals first, gives what the whole does."""
    removed_runs = _cut(diff.removed, budget) if diff.removed else []
    parts = [TopicsDiff((), run) for run in removed_runs]
    if not diff.added:
        return parts
    used = 0
    if parts:
        used = sum(name_bytes(name) for name in parts[-1].removed) + 5
    added_runs = _cut(diff.added, budget, used)
    if parts and added_runs[0]:
        parts[-1] = TopicsDiff(added_runs[0], parts[-1].removed)
    elif added_runs[0]:
        parts.append(TopicsDiff(added_runs[0], ()))
    parts.extend(TopicsDiff(run, ()) for run in added_runs[1:])
    return parts
