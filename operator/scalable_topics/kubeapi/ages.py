"""Ages as ``kubectl get`` shows them (``5m12s``, ``3h``, ``12d``), worked out by the API server
when it builds a Table: k8s.io/apimachinery's HumanDuration over the time since a timestamp."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from . import gotime

UNKNOWN = "<unknown>"
INVALID = "<invalid>"


def human_duration(seconds: float) -> str:
    """About two significant figures: ``45s``, ``2m5s``, ``17m``, ``5h3m``, ``30h``, ``3d4h``,
    ``200d``, ``2y45d``, ``9y``."""
    whole = int(seconds)
    if whole < -1:
        return INVALID
    if whole < 0:
        return "0s"
    if whole < 60 * 2:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def parse_timestamp(value: Any) -> datetime | None:
    """An RFC 3339 timestamp (any fractional precision), or None when it is not one."""
    if not isinstance(value, str) or gotime.time_error(value) is not None:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def age(value: Any, now: datetime) -> str:
    """The age of an object-meta or MicroTime timestamp as the API server's printers show it:
    ``<unknown>`` when unset."""
    if not value:
        return UNKNOWN
    moment = parse_timestamp(value)
    if moment is None:
        return UNKNOWN
    return human_duration((now - moment).total_seconds())


def date_cell(value: Any, now: datetime) -> str | None:
    """A ``type: date`` printer-column cell (a CRD's column): the age of an RFC 3339 string,
    ``<invalid>`` for another string, ``<unknown>`` for an empty one, None for a non-string."""
    if not isinstance(value, str):
        return None
    if value in ("", "null"):
        return UNKNOWN
    moment = parse_timestamp(value)
    if moment is None:
        return INVALID
    return human_duration((now - moment).total_seconds())


def now() -> datetime:
    return datetime.now(UTC)
