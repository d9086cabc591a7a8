"""The runtime subscription plan (pure): what to create and delete, and the status record."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given
from hypothesis import strategies as st

from scalable_topics.controller.subscription_plan import (
    SubscriptionPlan,
    plan_subscriptions,
    record_intent,
    record_outcome,
)
from scalable_topics.model.resources import (
    ConsumerRegistration,
    SubscriptionSpec,
    SubscriptionState,
    SubscriptionStatus,
    SubscriptionType,
)

READY, CREATING, DELETING = (
    SubscriptionState.READY,
    SubscriptionState.CREATING,
    SubscriptionState.DELETING,
)


def spec(*names: str, kind: SubscriptionType = SubscriptionType.QUEUE) -> list[SubscriptionSpec]:
    return [SubscriptionSpec(name=n, type=kind) for n in names]


def entry(name: str, state: SubscriptionState | None, consumers: int = 0) -> SubscriptionStatus:
    return SubscriptionStatus(
        name=name,
        state=state,
        consumers=[ConsumerRegistration(name=f"c{i}") for i in range(consumers)],
    )


def test_new_names_are_created_and_left_ones_deleted() -> None:
    recorded = [entry("kept", READY), entry("gone", READY), entry("adhoc", None)]
    plan = plan_subscriptions(spec("kept", "new"), recorded)
    assert plan == SubscriptionPlan(create=("new",), delete=("gone",))


def test_ready_and_unmanaged_entries_need_nothing() -> None:
    assert plan_subscriptions(spec("a"), [entry("a", READY), entry("x", None)]).empty


def test_an_unfinished_creation_or_deletion_is_planned_again() -> None:
    recorded = [entry("a", CREATING), entry("b", DELETING)]
    assert plan_subscriptions(spec("a"), recorded) == SubscriptionPlan(("a",), ("b",))


def test_a_name_declared_again_while_deleting_is_deleted_then_created_afresh() -> None:
    recorded = [entry("a", DELETING, consumers=2)]
    declared = spec("a", kind=SubscriptionType.STREAM)
    plan = plan_subscriptions(declared, recorded)
    assert plan == SubscriptionPlan(("a",), ("a",))
    assert record_intent(declared, recorded, plan)[0].state is DELETING
    [fresh] = record_outcome(declared, recorded, plan, final=True)
    assert (fresh.state, fresh.type, fresh.consumers) == (READY, SubscriptionType.STREAM, [])


def test_a_consumer_made_entry_becomes_managed_when_declared() -> None:
    recorded = [entry("a", None, consumers=1)]
    plan = plan_subscriptions(spec("a"), recorded)
    assert plan.create == ("a",)
    [intent] = record_intent(spec("a"), recorded, plan)
    assert (intent.state, len(intent.consumers)) == (CREATING, 1)
    [outcome] = record_outcome(spec("a"), [intent], plan, final=True)
    assert (outcome.state, len(outcome.consumers)) == (READY, 1)


def test_the_intent_is_recorded_before_any_broker_is_asked() -> None:
    recorded = [entry("gone", READY, consumers=1), entry("a", READY)]
    declared = spec("a", "new", kind=SubscriptionType.STREAM)
    plan = plan_subscriptions(declared, recorded)
    intent = record_intent(declared, recorded, plan)
    assert [(e.name, e.state, e.type) for e in intent] == [
        ("gone", DELETING, SubscriptionType.QUEUE),
        ("a", READY, SubscriptionType.STREAM),  # a type change needs no broker
        ("new", CREATING, SubscriptionType.STREAM),
    ]
    assert len(intent[0].consumers) == 1  # registrations go only when the deletion is done


def test_nothing_is_concluded_while_an_operation_is_pending() -> None:
    recorded = [entry("gone", DELETING, consumers=1), entry("new", CREATING)]
    plan = plan_subscriptions(spec("new"), recorded)
    pending = record_outcome(spec("new"), recorded, plan, final=False)
    assert [(e.name, e.state) for e in pending] == [("gone", DELETING), ("new", CREATING)]
    done = record_outcome(spec("new"), recorded, plan, final=True)
    assert [(e.name, e.state) for e in done] == [("new", READY)]


def test_duplicate_declarations_make_one_entry() -> None:
    declared = spec("a", "a")
    plan = plan_subscriptions(declared, [])
    assert [e.name for e in record_intent(declared, [], plan)] == ["a"]
    assert [e.name for e in record_outcome(declared, [], plan, final=True)] == ["a"]


# -- a model of the brokers: any sequence of spec changes and crashes converges ---------------------

NAMES = ["a", "b", "c", "d"]


@dataclass
class World:
    segments: list[set[str]]
    recorded: list[SubscriptionStatus] = field(default_factory=list)

    def run_pass(self, declared: list[SubscriptionSpec], crash_after: int | None) -> None:
        """One controller pass that dies after ``crash_after`` segments (None: it completes)."""
        plan = plan_subscriptions(declared, self.recorded)
        if plan.empty:
            return
        self.recorded = record_intent(declared, self.recorded, plan)
        for index, names in enumerate(self.segments):
            if crash_after is not None and index == crash_after:
                return
            names.difference_update(plan.delete)
            names.update(plan.create)
        self.recorded = record_outcome(declared, self.recorded, plan, final=True)


@given(
    adhoc=st.sets(st.sampled_from(["x", "y"])),
    segment_count=st.integers(1, 5),
    changes=st.lists(
        st.tuples(st.sets(st.sampled_from(NAMES)), st.none() | st.integers(0, 4)),
        min_size=1,
        max_size=6,
    ),
)
def test_passes_converge_on_the_declared_set_whatever_crashed(
    adhoc: set[str], segment_count: int, changes: list[tuple[set[str], int | None]]
) -> None:
    world = World([set(adhoc) for _ in range(segment_count)])
    for names, crash_after in changes:
        world.run_pass(spec(*sorted(names)), crash_after)
    final = spec(*sorted(changes[-1][0]))
    world.run_pass(final, None)

    wanted = {s.name for s in final}
    for names in world.segments:
        assert names == wanted | adhoc
    assert sorted(e.name for e in world.recorded) == sorted(wanted)
    assert all(e.state is READY for e in world.recorded)
    assert plan_subscriptions(final, world.recorded).empty
