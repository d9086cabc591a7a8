"""The brokers registered in the store, read from their heartbeat Leases (in the informer's
cache of the system namespace's Leases)."""

from __future__ import annotations

from ..model.placement import (
    BROKER_CAPACITY_ANNOTATION,
    BROKER_LEASE_PREFIX,
    BROKER_MSG_RATE_ANNOTATION,
    BROKER_SEGMENTS_ANNOTATION,
    BROKER_URL_ANNOTATION,
    BrokerInfo,
)
from ..model.timefmt import parse_time
from ..store.informers import Informers


def registered_brokers(informers: Informers) -> list[BrokerInfo]:
    brokers: list[BrokerInfo] = []
    for lease in informers.leases.list():
        metadata = lease.get("metadata", {})
        annotations = metadata.get("annotations") or {}
        url = annotations.get(BROKER_URL_ANNOTATION)
        if not str(metadata.get("name", "")).startswith(BROKER_LEASE_PREFIX) or not url:
            continue
        spec = lease.get("spec") or {}
        renewed = spec.get("renewTime")
        brokers.append(
            BrokerInfo(
                identity=str(spec.get("holderIdentity") or ""),
                url=str(url),
                segments=int(annotations.get(BROKER_SEGMENTS_ANNOTATION, "0")),
                msg_rate_in=float(annotations.get(BROKER_MSG_RATE_ANNOTATION, "0")),
                renewed_at=parse_time(renewed) if renewed else None,
                lease_seconds=int(spec.get("leaseDurationSeconds") or 0),
                capacity=_count(annotations.get(BROKER_CAPACITY_ANNOTATION)),
            )
        )
    return brokers


def _count(value: object) -> int | None:
    return int(value) if isinstance(value, str) and value.isdecimal() else None
