"""Connecting gives up after the connect timeout, or at once when refused, with one message
naming the URL and the reason, instead of retrying until an operation's time is up."""

from __future__ import annotations

import socket

import pytest

from scalable_topics.client import Client
from scalable_topics.client.admin import Admin
from scalable_topics.client.errors import ConnectionFailed, ConnectTimeout
from support.blackholes import silent_server, unaccepted_port


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_a_refused_connection_fails_the_open_at_once_naming_the_url() -> None:
    """The operation timeout is far away: the old client retried the watch until it ran
    out, then said only that no broker answered."""
    url = f"ws://127.0.0.1:{closed_port()}"
    async with Client(url, operation_timeout=600) as client:
        with pytest.raises(ConnectionFailed) as refused:
            await client.create_producer("orders")
    assert not isinstance(refused.value, ConnectTimeout)
    assert (
        refused.value.message
        == f"cannot connect to {url}: connection refused (nothing listens there)"
    )


async def test_every_url_is_named_with_its_reason() -> None:
    first, second = f"ws://127.0.0.1:{closed_port()}", f"ws://127.0.0.1:{closed_port()}"
    async with Client(f"{first},{second}", operation_timeout=600) as client:
        with pytest.raises(ConnectionFailed) as refused:
            await client.subscribe_queue("orders", "billing")
    assert refused.value.message == (
        f"cannot connect to any broker: {first}: connection refused (nothing listens there); "
        f"{second}: connection refused (nothing listens there)"
    )


async def test_a_host_that_never_accepts_times_out_after_the_connect_timeout() -> None:
    with unaccepted_port() as port:
        url = f"ws://127.0.0.1:{port}"
        async with Client(url, connect_timeout=0.5, operation_timeout=600) as client:
            with pytest.raises(ConnectTimeout) as silent:
                await client.watch("orders")
    assert silent.value.message == f"cannot connect to {url}: no answer within 0.5 s"


async def test_a_server_that_never_answers_the_upgrade_times_out_too() -> None:
    async with silent_server() as port:
        url = f"ws://127.0.0.1:{port}"
        async with Client(url, connect_timeout=0.5, operation_timeout=600) as client:
            with pytest.raises(ConnectTimeout, match=r"no answer within 0\.5 s"):
                await client.create_producer("orders")


async def test_the_admin_names_the_url_and_the_reason() -> None:
    refused = f"ws://127.0.0.1:{closed_port()}"
    with unaccepted_port() as port:
        silent = f"ws://127.0.0.1:{port}"
        async with Admin(f"{refused},{silent}", connect_timeout=0.5) as admin:
            with pytest.raises(ConnectionFailed) as failed:
                await admin.list_topics()
    assert failed.value.message == (
        f"cannot connect to any broker: {refused}: connection refused (nothing listens "
        f"there); {silent}: no answer within 0.5 s; is `stctl standalone` (or a broker) "
        "running there?"
    )


def test_timeouts_must_be_positive() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        Client("ws://127.0.0.1:6650", connect_timeout=0)
    with pytest.raises(ValueError, match="must be positive"):
        Admin("ws://127.0.0.1:6650", connect_timeout=-1)
