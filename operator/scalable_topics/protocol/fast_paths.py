"""Inline checks for the values that come by the hundred in one frame: messages and ids.

An acceptor returns the decoded value when its wire form is valid and None otherwise; the
generic decoder of ``schema.py`` then runs to name the problem. The wire array already holds
the fields in order, so a valid one is rewrapped as its NamedTuple without copying fields.
Tests check that acceptor and generic decoder agree on every input.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .values import BatchMessage, DeliveredMessage, MessageId

Acceptor = Callable[[Any], Any]

_wrap = tuple.__new__


def accept_message_id(value: Any) -> MessageId | None:
    if type(value) is tuple and len(value) == 3:
        segment_id, entry_id, batch_index = value
        if (
            type(segment_id) is int
            and type(entry_id) is int
            and type(batch_index) is int
            and segment_id >= 0
            and entry_id >= 0
            and batch_index >= 0
        ):
            return _wrap(MessageId, value)
    return None


def accept_batch_message(value: Any) -> BatchMessage | None:
    if type(value) is tuple and len(value) == 4:
        payload, key, properties, event_time_ms = value
        if (
            type(payload) is bytes
            and (key is None or type(key) is str)
            and type(properties) is dict
            and (not properties or _all_strings(properties))
            and (event_time_ms is None or (type(event_time_ms) is int and event_time_ms >= 0))
        ):
            return _wrap(BatchMessage, value)
    return None


def accept_delivered_message(value: Any) -> DeliveredMessage | None:
    if type(value) is tuple and len(value) == 7:
        raw_id, payload, key, properties, event_time_ms, publish_time_ms, redeliveries = value
        message_id = accept_message_id(raw_id)
        if (
            message_id is not None
            and type(payload) is bytes
            and (key is None or type(key) is str)
            and type(properties) is dict
            and (not properties or _all_strings(properties))
            and (event_time_ms is None or (type(event_time_ms) is int and event_time_ms >= 0))
            and type(publish_time_ms) is int
            and publish_time_ms >= 0
            and type(redeliveries) is int
            and redeliveries >= 0
        ):
            return _wrap(DeliveredMessage, (message_id, *value[1:]))
    return None


def _all_strings(value: dict[Any, Any]) -> bool:
    # A plain loop: all() over a generator costs a third of a message's decoding time.
    for key, item in value.items():  # noqa: SIM110
        if type(key) is not str or type(item) is not str:
            return False
    return True


ACCEPTORS: dict[type, Acceptor] = {
    MessageId: accept_message_id,
    BatchMessage: accept_batch_message,
    DeliveredMessage: accept_delivered_message,
}
