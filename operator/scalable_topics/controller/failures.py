"""Why a pass over a topic failed, and whether trying again can help.

*Permanent* failures (an invalid spec, a status that breaks the layout's invariants) are
shown to the user (condition Ready=False with the reason and message, phase Failed, one
Warning Event) and not retried until the spec changes (a new ``metadata.generation``).
*Temporary* ones (a conflicting writer, the store or a broker unreachable, no live broker yet,
a split that must wait) are retried with exponential backoff and jitter, and counted.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import aiohttp
from pydantic import ValidationError

from ..admin.broker_admin import BrokerAdminError, BrokerUnreachable
from ..model.errors import CorruptLayout, InvalidSegmentCount
from ..model.placement import NoLiveBroker
from ..store import Conflict, StoreError


class InvalidSpec(ValueError):
    """A topic's spec asks for something impossible (found while acting on it)."""


@dataclass(frozen=True, slots=True)
class Failure:
    permanent: bool
    reason: str  # CamelCase, as Kubernetes condition reasons are
    message: str


def classify(error: Exception) -> Failure:
    if isinstance(error, ValidationError):
        return Failure(True, "InvalidSpec", _describe_validation(error))
    if isinstance(error, InvalidSpec | InvalidSegmentCount):
        return Failure(True, "InvalidSpec", str(error))
    if isinstance(error, CorruptLayout):
        return Failure(True, "CorruptStatus", f"the layout in status is corrupt: {error}")
    if isinstance(error, Conflict):
        return Failure(False, "Conflict", str(error))
    if isinstance(error, NoLiveBroker):
        return Failure(False, "NoLiveBroker", str(error))
    if isinstance(error, BrokerUnreachable | aiohttp.ClientError):
        return Failure(False, "BrokerUnreachable", str(error))
    if isinstance(error, BrokerAdminError):
        return Failure(False, "BrokerRefused", str(error))
    if isinstance(error, StoreError):
        return Failure(False, "StoreUnavailable", str(error))
    if isinstance(error, TimeoutError | asyncio.TimeoutError):
        return Failure(False, "Timeout", str(error) or "an operation timed out")
    return Failure(False, "InternalError", f"{type(error).__name__}: {error}")


def _describe_validation(error: ValidationError) -> str:
    """One line per bad field, named by its path (``spec.autoScale.maxSegments: ...``)."""
    lines = []
    for problem in error.errors():
        path = ".".join(str(part) for part in problem.get("loc", ()))
        lines.append(f"{path}: {problem.get('msg', 'invalid')}" if path else problem["msg"])
    return "; ".join(lines)
