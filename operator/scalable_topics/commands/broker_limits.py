"""The flags of a broker's client limits, shared by ``stctl broker`` and ``stctl standalone``.

Each flag sets the BrokerConfig field of the same name; one left out keeps the field's
default (the help says which), so the defaults live in one place, broker/config.py.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass


@dataclass(frozen=True)
class _Limit:
    field: str
    default: str
    help: str
    minimum: int = 1

    @property
    def flag(self) -> str:
        return "--" + self.field.replace("_", "-")


LIMITS = (
    _Limit(
        "max_connections",
        "10000",
        "WebSockets the broker serves at once (about 19 KiB and a file descriptor each when "
        "idle); past it an upgrade is answered 503 ServiceNotReady with Retry-After, and clients "
        "try another broker or again later",
    ),
    _Limit(
        "max_connections_per_ip",
        "0",
        "the same from one client address; 0: no limit, since clients behind NAT or a proxy "
        "share one address",
        minimum=0,
    ),
    _Limit(
        "max_open_per_connection",
        "10000",
        "producers (waiting ones included), consumers, watches, consumer registrations and "
        "exclusive grants one connection holds open, all together; a request past it is "
        "refused (TooManyOpen) and the rest of the connection carries on",
    ),
    _Limit(
        "max_pending_publishes_per_connection",
        "1000",
        "sends a connection may have read and not answered; at the limit the broker stops "
        "reading the connection until an answer goes out (TCP backpressure, no error)",
    ),
    _Limit(
        "max_pending_requests_per_connection",
        "1000",
        "requests other than sends (acknowledgements, seeks) a connection may "
        "have read and not answered; at the limit the broker stops reading the connection "
        "until one is answered (TCP backpressure, no error)",
    ),
    _Limit(
        "max_pending_publish_bytes_per_connection",
        "67108864, 64 MiB",
        "the same in bytes held: payloads, keys and properties twice (decoded, and in the log "
        "record) and 128 per message",
    ),
    _Limit(
        "max_pending_publishes_per_producer",
        "500",
        "sends one producer may have read and not answered; a send past it is refused "
        "(ServiceNotReady) and the producer closed: it opens again and resends in order",
    ),
    _Limit(
        "max_unacked_messages_per_consumer",
        "50000",
        "messages delivered to a consumer and not acknowledged; at the limit dispatch to it "
        "pauses until acknowledgements bring it to half; 0: no limit",
        minimum=0,
    ),
    _Limit(
        "max_unacked_messages_per_subscription",
        "200000",
        "the same over all the consumers of a subscription on one segment; 0: no limit",
        minimum=0,
    ),
)


def add_limit_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("limits on what clients make the broker hold")
    for limit in LIMITS:
        group.add_argument(
            limit.flag,
            dest=limit.field,
            type=int,
            metavar="N",
            help=f"{limit.help} (default {limit.default})",
        )


def limit_settings(args: argparse.Namespace) -> dict[str, int]:
    """The BrokerConfig fields the flags set (those given on the command line); ValueError
    naming the flag for a value out of range."""
    settings: dict[str, int] = {}
    for limit in LIMITS:
        value = getattr(args, limit.field, None)
        if value is None:
            continue
        if value < limit.minimum:
            raise ValueError(f"{limit.flag} must be at least {limit.minimum}, not {value}")
        settings[limit.field] = value
    return settings


def limit_argv(settings: dict[str, int]) -> list[str]:
    """The flags that give a child broker ``settings``."""
    flags = {limit.field: limit.flag for limit in LIMITS}
    return [part for field, value in settings.items() for part in (flags[field], str(value))]
