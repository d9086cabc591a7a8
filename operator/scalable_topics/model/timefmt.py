"""Timestamps in the RFC 3339 form Kubernetes uses, kept to the microsecond so they round-trip."""

from datetime import UTC, datetime


def format_time(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise ValueError(f"timestamp {moment!r} has no time zone; the model works in UTC")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"timestamp {text!r} has no time zone")
    return moment.astimezone(UTC)
