"""The admin clients drop pooled connections before a server with default timeouts closes
them, so a request never goes out on a connection the server is closing."""

from __future__ import annotations

from scalable_topics.broker.config import BrokerConfig
from scalable_topics.http_sessions import IDLE_SECONDS, admin_session


def test_pooled_connections_are_dropped_before_a_broker_closes_them() -> None:
    broker_keepalive = BrokerConfig.model_fields["handshake_timeout"].default
    assert broker_keepalive / 2 > IDLE_SECONDS  # a margin for a slow event loop


async def test_the_admin_session_uses_that_idle_time() -> None:
    async with admin_session() as session:
        connector = session.connector
        assert connector is not None
        assert connector._keepalive_timeout == IDLE_SECONDS  # aiohttp exposes no getter
