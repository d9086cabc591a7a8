from datetime import UTC, datetime, timedelta

import pytest

from scalable_topics.model.placement import (
    BrokerInfo,
    NoBrokerCapacity,
    NoLiveBroker,
    broker_lease_name,
    choose_broker,
    live_urls,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def broker(
    name: str,
    segments: int,
    rate: float = 0.0,
    age: float = 1.0,
    holder: bool = True,
    capacity: int | None = None,
) -> BrokerInfo:
    return BrokerInfo(
        name if holder else "",
        f"ws://{name}",
        segments,
        rate,
        NOW - timedelta(seconds=age),
        15,
        capacity,
    )


def test_least_loaded_live_broker_wins() -> None:
    brokers = [
        broker("b1", 5),
        broker("b2", 2, rate=900),
        broker("b3", 2, rate=10),
        broker("b4", 0, age=20),
    ]
    assert choose_broker(brokers, NOW).identity == "b3"  # b4's lease expired; b3 beats b2 on rate


def test_planned_placements_count_before_they_are_reported() -> None:
    brokers = [broker("b1", 1), broker("b2", 2)]
    assert choose_broker(brokers, NOW, planned={"b1": 2}).identity == "b2"


def test_released_or_expired_brokers_are_not_live() -> None:
    with pytest.raises(NoLiveBroker, match="2 registered"):
        choose_broker([broker("b1", 0, holder=False), broker("b2", 0, age=15)], NOW)


def test_a_full_broker_gets_nothing_more_and_all_full_says_so() -> None:
    brokers = [broker("b1", 3, capacity=3), broker("b2", 9, capacity=10)]
    assert choose_broker(brokers, NOW).identity == "b2"  # b1 has fewer, but no room
    with pytest.raises(NoBrokerCapacity, match="every live broker"):
        choose_broker(brokers, NOW, planned={"b2": 1})
    unknown = [broker("b1", 3, capacity=3), broker("b3", 50)]  # b3 announces no capacity
    assert choose_broker(unknown, NOW).identity == "b3"


def test_a_broker_is_live_by_url_while_one_live_lease_carries_it() -> None:
    restarted = BrokerInfo("b1-new", "ws://b1", 0, 0.0, NOW, 15)
    brokers = [broker("b1", 0, age=20), restarted, broker("b2", 0, holder=False), broker("b3", 0)]
    assert live_urls(brokers, NOW) == {"ws://b1", "ws://b3"}
    assert live_urls(brokers, NOW + timedelta(seconds=15)) == frozenset()


def test_lease_names_are_dns_subdomains() -> None:
    assert broker_lease_name("10.0.0.7:6650") == "broker-10-0-0-7-6650"
    assert broker_lease_name("Broker_0.Brokers") == "broker-broker-0-brokers"
