"""One pass of a topic's controller: a split or merge that must wait holds up only itself."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from scalable_topics.admin.broker_admin import BrokerUnreachable
from scalable_topics.controller.failures import InvalidSpec
from scalable_topics.controller.metrics import ControllerMetrics
from scalable_topics.controller.topic_controller import ControllerContext, TopicController
from scalable_topics.model.clock import ManualClock
from scalable_topics.store import Conflict
from scalable_topics.store.informers import Informers
from support.memory_store import MemoryStore


class Scaler:
    def __init__(self, error: Exception | None) -> None:
        self.error = error

    async def advance(self, namespace: str, name: str) -> None:
        if self.error is not None:
            raise self.error


class Lifecycle:
    def __init__(self, error: Exception | None = None) -> None:
        self.passes = 0
        self.error = error

    async def reconcile(self, namespace: str, name: str) -> bool:
        self.passes += 1
        if self.error is not None:
            raise self.error
        return True


def controller(scaler: Scaler, lifecycle: Lifecycle) -> tuple[TopicController, ControllerMetrics]:
    store = MemoryStore()
    metrics = ControllerMetrics()
    context = ControllerContext(
        store=store,
        informers=Informers(store, "scalable-topics"),
        admin=cast(Any, None),  # the fakes ask no broker
        clock=ManualClock(),
        identity="controller-0",
        endpoint=None,
        system_namespace="scalable-topics",
        coordinators=cast(Any, None),
        grants=cast(Any, None),
        passes=asyncio.Semaphore(1),
        metrics=metrics,
    )
    made = TopicController(context, "default", "orders", 1)
    made._scaler = cast(Any, scaler)
    made._lifecycle = cast(Any, lifecycle)
    return made, metrics


async def test_the_lifecycle_runs_while_a_split_waits_and_the_pass_fails_with_the_split() -> None:
    waiting = BrokerUnreachable("ws://10.0.0.7:6650 is gone")
    lifecycle = Lifecycle()
    made, _ = controller(Scaler(waiting), lifecycle)
    with pytest.raises(BrokerUnreachable) as raised:
        await made._pass()
    assert raised.value is waiting  # retried with the split's backoff
    assert lifecycle.passes == 1


async def test_when_the_lifecycle_fails_too_its_failure_ends_the_pass_and_both_count() -> None:
    lifecycle = Lifecycle(TimeoutError("the store did not answer"))
    made, metrics = controller(Scaler(BrokerUnreachable("gone")), lifecycle)
    with pytest.raises(TimeoutError):
        await made._pass()
    assert lifecycle.passes == 1
    assert metrics.count(permanent=False) == 1  # the split's; the loop counts the other


@pytest.mark.parametrize(
    "error", [Conflict("ScalableTopic", "default", "orders", "1", "2"), InvalidSpec("bad")]
)
async def test_a_conflict_or_a_permanent_failure_of_the_split_ends_the_pass_at_once(
    error: Exception,
) -> None:
    lifecycle = Lifecycle()
    made, _ = controller(Scaler(error), lifecycle)
    with pytest.raises(type(error)):
        await made._pass()
    assert lifecycle.passes == 0
