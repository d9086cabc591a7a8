"""What the leader must do to make every segment carry exactly the declared subscriptions.

Pure: it compares ``spec.subscriptions`` with the record the controller keeps in
``status.subscriptions`` (an entry's ``state`` is set only for declared subscriptions, so ones
that consumers created on their own are never touched). The record is the intent: an entry
is marked Creating or Deleting before any broker is asked, so a leader that dies half way
through is replaced by one that reads the same plan and finishes it.

* A declared name without a Ready entry is created on every segment.
* An entry marked Creating or Ready whose name left the spec, or one already Deleting, is
  deleted from every segment; its entry (with the consumer registrations in it) goes last.
* A name removed and declared again before its deletion finished is deleted first and then
  created afresh, so no segment keeps the old cursor.

While a split or merge is in flight its children are created with the subscription list it
read when it started, so the outcome stays Creating (or Deleting) until no operation is
pending: the pass after the operation covers the children too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..model.resources import SubscriptionSpec, SubscriptionState, SubscriptionStatus


@dataclass(frozen=True, slots=True)
class SubscriptionPlan:
    create: tuple[str, ...] = ()
    delete: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.create and not self.delete


def plan_subscriptions(
    declared: Sequence[SubscriptionSpec], recorded: Sequence[SubscriptionStatus]
) -> SubscriptionPlan:
    wanted = {spec.name for spec in declared}
    entries = {entry.name: entry for entry in recorded}
    delete = sorted(
        name
        for name, entry in entries.items()
        if entry.state is SubscriptionState.DELETING
        or (entry.state is not None and name not in wanted)
    )
    create = sorted(
        name
        for name in wanted
        if name not in entries or entries[name].state is not SubscriptionState.READY
    )
    return SubscriptionPlan(tuple(create), tuple(delete))


def record_intent(
    declared: Sequence[SubscriptionSpec],
    recorded: Sequence[SubscriptionStatus],
    plan: SubscriptionPlan,
) -> list[SubscriptionStatus]:
    """``status.subscriptions`` saying what is about to happen; declared types kept current."""
    types = {spec.name: spec.type for spec in declared}
    result: list[SubscriptionStatus] = []
    for entry in recorded:
        if entry.name in plan.delete:
            result.append(entry.model_copy(update={"state": SubscriptionState.DELETING}))
        elif entry.name in plan.create:
            result.append(
                entry.model_copy(
                    update={"state": SubscriptionState.CREATING, "type": types[entry.name]}
                )
            )
        elif entry.name in types and entry.type is not types[entry.name]:
            result.append(entry.model_copy(update={"type": types[entry.name]}))
        else:
            result.append(entry)
    result.extend(_new_entries(declared, recorded, SubscriptionState.CREATING))
    return result


def record_outcome(
    declared: Sequence[SubscriptionSpec],
    recorded: Sequence[SubscriptionStatus],
    plan: SubscriptionPlan,
    final: bool,
) -> list[SubscriptionStatus]:
    """``status.subscriptions`` once every segment did the plan. ``final`` is False while a
    split or merge is pending: its children may still come with the old list, so nothing is
    concluded yet."""
    types = {spec.name: spec.type for spec in declared}
    done = SubscriptionState.READY if final else SubscriptionState.CREATING
    result: list[SubscriptionStatus] = []
    for entry in recorded:
        if entry.name in plan.delete and entry.name in types:
            # Deleted and declared again: a fresh subscription, without the old registrations.
            result.append(SubscriptionStatus(name=entry.name, type=types[entry.name], state=done))
        elif entry.name in plan.delete:
            if not final:
                result.append(entry)
        elif entry.name in plan.create:
            result.append(entry.model_copy(update={"state": done, "type": types[entry.name]}))
        else:
            result.append(entry)
    result.extend(_new_entries(declared, recorded, done))
    return result


def _new_entries(
    declared: Sequence[SubscriptionSpec],
    recorded: Sequence[SubscriptionStatus],
    state: SubscriptionState,
) -> list[SubscriptionStatus]:
    present = {entry.name for entry in recorded}
    entries: list[SubscriptionStatus] = []
    for spec in declared:
        if spec.name not in present:
            present.add(spec.name)
            entries.append(SubscriptionStatus(name=spec.name, type=spec.type, state=state))
    return entries
