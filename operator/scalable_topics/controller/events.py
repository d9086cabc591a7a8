"""Kubernetes Events about a topic, so ``kubectl describe st <name>`` tells its story.

Events are best effort, as in Kubernetes itself: failing to record one never fails the work it
describes.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping
from typing import Any, Literal

from ..model.clock import Clock
from ..model.resources import ScalableTopic
from ..model.timefmt import format_time
from ..store import Store, StoreError
from ..store.kinds import EVENT

log = logging.getLogger(__name__)

COMPONENT = "scalable-topics-controller"
EventKind = Literal["Normal", "Warning"]


class EventRecorder:
    def __init__(self, store: Store, clock: Clock, instance: str) -> None:
        self._store = store
        self._clock = clock
        self._instance = instance

    async def record(
        self, topic: ScalableTopic, kind: EventKind, reason: str, message: str
    ) -> None:
        await self.record_on(topic.to_wire(), kind, reason, message)

    async def record_on(
        self, involved: Mapping[str, Any], kind: EventKind, reason: str, message: str
    ) -> None:
        """An Event about any object, given as stored (a topic whose spec cannot even be
        parsed still gets its Event)."""
        metadata = involved["metadata"]
        namespace = metadata.get("namespace") or "default"
        now = format_time(self._clock.now())
        event: dict[str, Any] = {
            "apiVersion": EVENT.api_version,
            "kind": EVENT.kind,
            "metadata": {
                # Kubernetes names events <object>.<unique suffix>.
                "name": f"{metadata['name']}.{secrets.token_hex(8)}",
                "namespace": namespace,
            },
            "involvedObject": {
                "apiVersion": involved.get("apiVersion"),
                "kind": involved.get("kind"),
                "name": metadata["name"],
                "namespace": namespace,
                "uid": metadata.get("uid"),
                "resourceVersion": metadata.get("resourceVersion"),
            },
            "type": kind,
            "reason": reason,
            "message": message,
            "count": 1,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self._instance,
        }
        try:
            await self._store.create(event)
        except StoreError as error:
            log.warning("could not record event %s on %s: %s", reason, metadata["name"], error)
