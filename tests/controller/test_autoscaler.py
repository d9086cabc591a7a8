"""The controller's autoscaler on fake loop time: its triggers, its one-operation-at-a-time
chain, its recommendations, Events and metrics, and the reviewer's findings 1, 6, 7 and 8."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from itertools import pairwise

import pytest
from autoscale_fixtures import autoscaled_topic, counter

from scalable_topics.controller import autoscaler as autoscaler_module
from scalable_topics.model.autoscale_policy import AutoScaleInputs
from scalable_topics.model.resources import ScalableTopic
from support.eventually import eventually

pytestmark = pytest.mark.looptime

# A tick far longer than any test: whatever happens sooner was triggered by an event.
QUIET = {"loadReportIntervalSeconds": 100_000}


async def test_a_burst_of_consumers_converges_in_one_chain_of_splits_one_per_cooldown() -> None:
    # Finding 8: 4 consumers on one segment reach 4 segments, each split following the end of
    # the previous one's cooldown rather than a periodic tick.
    async with autoscaled_topic(auto_scale={"splitCooldownSeconds": 60}, cluster=QUIET) as world:
        start = asyncio.get_running_loop().time()
        await world.set_consumers("billing", 4)

        async def four() -> bool:
            return len(await world.active()) == 4

        await eventually(four, "4 active segments", timeout=600)
        times = [when - start for when, _ in world.commits]
        assert len(times) == 3
        assert times[0] < 1  # the registration itself triggered the first split
        assert [round(b - a) for a, b in pairwise(times)] == [60, 60]
        topic = await world.topic()
        assert topic.status.auto_scale is not None
        action = topic.status.auto_scale.last_action
        assert action is not None and (action.rule, action.source) == ("consumers", "controller")
        assert counter(world.metrics, "st_controller_autoscale_decisions", rule="consumers") == 3


async def test_a_trigger_during_an_evaluation_runs_another_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Finding 8: consumers registering while an evaluation is in flight are not dropped.
    async with autoscaled_topic(cluster=QUIET) as world:
        await eventually(
            lambda: counter(world.metrics, "st_controller_autoscale_evaluations") >= 1,
            "the first evaluation",
        )
        entered, release = asyncio.Event(), asyncio.Event()
        real = autoscaler_module.autoscale_inputs

        def held(*args: object) -> AutoScaleInputs:
            inputs = real(*args)  # type: ignore[arg-type]
            entered.set()
            return inputs

        monkeypatch.setattr(autoscaler_module, "autoscale_inputs", held)
        real_policy = world.autoscaler._policy

        async def slow_policy(topic: ScalableTopic) -> object:
            got = await real_policy(topic)
            if not release.is_set():
                entered.set()
                await release.wait()
            return got

        monkeypatch.setattr(world.autoscaler, "_policy", slow_policy)
        await world.set_spec({"splitCooldownSeconds": 1})  # a trigger: evaluation starts
        await entered.wait()
        await world.set_consumers("billing", 2)  # arrives while it runs
        release.set()

        async def split() -> bool:
            return len(await world.active()) == 2

        await eventually(split, "the split the consumers asked for")


async def test_an_evaluation_that_fails_is_logged_and_the_loop_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Finding 1: nothing stays set after a failed evaluation; the next trigger acts.
    async with autoscaled_topic(cluster=QUIET) as world:
        real = autoscaler_module.autoscale_inputs
        failures = []

        def broken(*args: object) -> AutoScaleInputs:
            if not failures:
                failures.append(1)
                raise RuntimeError("a bad record")
            return real(*args)  # type: ignore[arg-type]

        monkeypatch.setattr(autoscaler_module, "autoscale_inputs", broken)
        await world.set_consumers("billing", 1)  # one segment is enough: no split
        await eventually(
            lambda: (
                counter(world.metrics, "st_controller_autoscale_evaluations", outcome="failed") == 1
            ),
            "the failed evaluation",
        )
        assert "an autoscale evaluation failed" in caplog.text
        await world.set_consumers("billing", 2)

        async def split() -> bool:
            return len(await world.active()) == 2

        await eventually(split, "a split after the failure")


async def test_a_hot_segment_splits_with_an_event_naming_rule_window_and_figures() -> None:
    async with autoscaled_topic(cluster=QUIET) as world:
        await world.set_load(0, 15_000)

        async def split() -> bool:
            return len(await world.active()) == 2

        await eventually(split, "the hot segment split")
        [message] = await world.events("AutoSplit")
        assert "split of segment 0" in message
        assert "rule msgRateIn, window latest report" in message
        assert "msgRateIn 15000/s, 1.50x the split threshold 10000/s" in message


async def test_a_cold_pair_merges_once_cold_for_the_window_by_the_periodic_tick() -> None:
    # Finding 4 too: halfway, a new owner rewrites both records (a later sampledAt, the same
    # coldSince); the window still runs from coldSince.
    settings = {"loadReportIntervalSeconds": 10, "mergeWindowSeconds": 120}
    async with autoscaled_topic(segments=2, cluster=settings) as world:
        start = asyncio.get_running_loop().time()
        cold_since = world.clock.now()
        await world.set_load(0, 0, cold_since)
        await world.set_load(1, 0, cold_since)
        await asyncio.sleep(60)  # fake time
        assert world.commits == []
        await world.set_load(0, 0, cold_since)
        await world.set_load(1, 0, cold_since)

        async def merged() -> bool:
            return len(await world.active()) == 1

        await eventually(merged, "the pair merged", timeout=600)
        [(when, _)] = world.commits
        assert 120 <= when - start <= 130  # the window, plus at most one tick
        [message] = await world.events("AutoMerge")
        assert "merge of segments 0 and 1" in message and "coldPair" in message


async def test_disabled_does_nothing_and_turning_it_on_acts_at_once() -> None:
    # Finding 7: the enable flag is read at every evaluation, and its change is a trigger.
    async with autoscaled_topic(cluster={**QUIET, "enabled": False}) as world:
        await world.set_consumers("billing", 2)
        await eventually(
            lambda: (
                counter(world.metrics, "st_controller_autoscale_evaluations", outcome="disabled")
                >= 2
            ),
            "evaluations while disabled",
        )
        assert await world.active() == [0]
        await world.set_cluster({**QUIET, "enabled": True})

        async def split() -> bool:
            return len(await world.active()) == 2

        await eventually(split, "the split once enabled", timeout=5)


async def test_a_fresh_recommendation_is_acted_on_and_recorded_as_the_last_action() -> None:
    async with autoscaled_topic(segments=2, cluster=QUIET) as world:
        now = world.clock.now()
        await world.store.patch_status(
            ScalableTopic.KIND,
            "default",
            "orders",
            {
                "status": {
                    "autoScale": {
                        "recommendation": {
                            "decision": "Merge",
                            "segmentIds": [0, 1],
                            "rule": "coldPair",
                            "window": "20m",
                            "reason": "cold in every window",
                            "layoutEpoch": 0,
                            "computedAt": now.isoformat(),
                            "expiresAt": (now + timedelta(minutes=3)).isoformat(),
                        }
                    }
                }
            },
        )

        async def merged() -> bool:
            return len(await world.active()) == 1

        await eventually(merged, "the recommended merge")
        topic = await world.topic()
        assert topic.status.auto_scale is not None
        action = topic.status.auto_scale.last_action
        assert action is not None
        assert (action.decision, action.segment_ids, action.source, action.window) == (
            "Merge",
            [0, 1],
            "recommendation",
            "20m",
        )
        [message] = await world.events("AutoMerge")
        assert "the load job's recommendation; rule coldPair, window 20m" in message
        assert counter(world.metrics, "st_controller_autoscale_recommendations", use="used") == 1
        last = topic.status.last_operation
        assert last is not None and (last.requested_by or "").startswith("autoscaler@")


async def test_an_invalid_policy_does_nothing_with_one_warning_per_distinct_problem() -> None:
    async with autoscaled_topic(cluster=QUIET) as world:
        await world.set_spec({"mergeThresholds": {"msgRateIn": 50_000}})
        await world.set_consumers("billing", 2)
        await eventually(
            lambda: (
                counter(world.metrics, "st_controller_autoscale_evaluations", outcome="invalid")
                >= 2
            ),
            "evaluations of the invalid policy",
        )
        [warning] = await world.events("AutoScaleInvalid")
        assert "mergeThresholds.msgRateIn" in warning
        assert await world.active() == [0]
