"""Persistent state behind the store port: Kubernetes-shaped objects, watches and leases."""

from .budget import (
    UNLIMITED,
    BudgetedStore,
    BudgetedWatch,
    BudgetSettings,
    Priority,
    RequestBudget,
    TokenBucket,
)
from .embedded import EmbeddedStore
from .embedded_watch import EmbeddedWatch
from .errors import (
    AlreadyExists,
    Conflict,
    Expired,
    Invalid,
    NotFound,
    StoreClosed,
    StoreError,
    UnknownKind,
)
from .kinds import DEFAULT_KINDS, KindInfo
from .leases import LeaseLock, LeaseRecord
from .patch import merge_patch
from .port import EventType, Object, ObjectList, Store, Watch, WatchEvent
from .selectors import LabelSelector, parse_selector
from .url import DEFAULT_BUDGETS, default_budget, open_store

__all__ = [
    "DEFAULT_BUDGETS",
    "DEFAULT_KINDS",
    "UNLIMITED",
    "AlreadyExists",
    "BudgetSettings",
    "BudgetedStore",
    "BudgetedWatch",
    "Conflict",
    "EmbeddedStore",
    "EmbeddedWatch",
    "EventType",
    "Expired",
    "Invalid",
    "KindInfo",
    "LabelSelector",
    "LeaseLock",
    "LeaseRecord",
    "NotFound",
    "Object",
    "ObjectList",
    "Priority",
    "RequestBudget",
    "Store",
    "StoreClosed",
    "StoreError",
    "TokenBucket",
    "UnknownKind",
    "Watch",
    "WatchEvent",
    "default_budget",
    "merge_patch",
    "open_store",
    "parse_selector",
]
