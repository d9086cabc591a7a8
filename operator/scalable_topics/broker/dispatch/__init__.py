"""Subscription dispatch: pure decisions about which consumer receives which message, when."""

from .base import (
    Consumer,
    ConsumerBusy,
    ConsumerId,
    ConsumerStats,
    Delivery,
    Dispatcher,
    DispatchError,
    DispatcherStats,
    DispatchMode,
    DuplicateConsumer,
    Message,
    UnknownConsumer,
)
from .exclusive import ExclusiveDispatcher
from .failover import FailoverDispatcher
from .key_shared import KeySharedDispatcher
from .shared import SharedDispatcher
from .unacked import UnackedLimits

__all__ = [
    "Consumer",
    "ConsumerBusy",
    "ConsumerId",
    "ConsumerStats",
    "Delivery",
    "DispatchError",
    "DispatchMode",
    "Dispatcher",
    "DispatcherStats",
    "DuplicateConsumer",
    "ExclusiveDispatcher",
    "FailoverDispatcher",
    "KeySharedDispatcher",
    "Message",
    "SharedDispatcher",
    "UnackedLimits",
    "UnknownConsumer",
]
