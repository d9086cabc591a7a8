"""The real API server as the kubectl tests serve it: a recording middleware around its
application, a clock that dates the objects the store creates, and the canned objects."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

from scalable_topics.kubeapi.running import RunningKubeApi
from scalable_topics.kubeapi.server import Handler
from scalable_topics.model.timefmt import format_time
from scalable_topics.store import Store

# -- recording what kubectl asks -----------------------------------------------------------------


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    accept: str
    content_type: str
    status: int = 0


@dataclass
class Recorder:
    """An aiohttp middleware, outermost around the server's own, that records every request
    and its final status. With ``aggregated_discovery`` off, ``/api`` and ``/apis`` are asked
    for ``application/json`` only: the server then answers as one without aggregated discovery
    does, with the legacy documents."""

    requests: list[Recorded] = field(default_factory=list)
    aggregated_discovery: bool = True

    def find(self, path: str) -> list[Recorded]:
        return [r for r in self.requests if r.path == path]

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        record = Recorded(
            request.method,
            request.path,
            dict(request.query),
            request.headers.get("Accept", ""),
            request.content_type,
        )
        self.requests.append(record)
        if not self.aggregated_discovery and request.path in ("/api", "/apis"):
            headers = CIMultiDict(request.headers)
            headers["Accept"] = "application/json"
            request = request.clone(headers=headers)
        response = await handler(request)
        record.status = response.status
        return response


# -- the server ----------------------------------------------------------------------------------


class ShiftedClock:
    """The machine's clock set ``behind`` by as much as told: the store stamps creationTimestamp
    with it, so that an object can be made as old as a test wants."""

    def __init__(self, behind: timedelta = timedelta(0)) -> None:
        self.behind = behind

    def now(self) -> datetime:
        return datetime.now(UTC) - self.behind

    def monotonic(self) -> float:
        return time.monotonic()


@dataclass
class KubeApi:
    """The server as started, what it was asked, and the kubeconfig it wrote."""

    running: RunningKubeApi
    recorder: Recorder
    kubeconfig: Path

    @property
    def store(self) -> Store:
        return self.running.store


# -- the canned objects --------------------------------------------------------------------------


def _seconds(moment: datetime) -> str:
    """A metav1.Time: RFC 3339 to the second."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


async def _create(
    store: Store,
    clock: ShiftedClock,
    age: timedelta,
    obj: dict[str, Any],
    status: dict[str, Any] | None = None,
) -> None:
    """Create ``obj`` ``age`` old; then write ``status`` as a controller does, through status."""
    clock.behind = age
    created = await store.create(obj)
    if status is not None:
        await store.replace_status({**created, "status": status})


async def store_canned_objects(store: Store, clock: ShiftedClock) -> None:
    """Two topics in default (one with a status, one without), a segment, a lease and an
    event; the server made the namespaces default and kube-system."""
    now = datetime.now(UTC)
    await _create(
        store,
        clock,
        timedelta(hours=3),
        {
            "apiVersion": "scalabletopics.dev/v1alpha1",
            "kind": "ScalableTopic",
            "metadata": {"name": "payments", "namespace": "default"},
            "spec": {"initialSegments": 1},
        },
    )
    await _create(
        store,
        clock,
        timedelta(minutes=7),
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "topic-orders", "namespace": "default"},
            "spec": {
                "holderIdentity": "controller-0",
                "leaseDurationSeconds": 15,
                "renewTime": format_time(now - timedelta(seconds=2)),
            },
        },
    )
    await _create(
        store,
        clock,
        timedelta(minutes=5, seconds=3),
        {
            "apiVersion": "scalabletopics.dev/v1alpha1",
            "kind": "ScalableTopic",
            "metadata": {"name": "orders", "namespace": "default"},
            "spec": {"initialSegments": 2},
        },
        status={
            "activeSegments": 3,
            "epoch": 2,
            "controller": {"identity": "controller-0"},
            "phase": "Ready",
        },
    )
    await _create(
        store,
        clock,
        timedelta(minutes=5),
        {
            "apiVersion": "scalabletopics.dev/v1alpha1",
            "kind": "Segment",
            "metadata": {"name": "orders-0", "namespace": "default"},
            "spec": {"topic": "orders", "segmentId": 0, "hashRange": {"start": 0, "end": 32767}},
        },
        status={"range": "0000-7fff", "state": "Active", "broker": "broker-1"},
    )
    await _create(
        store,
        clock,
        timedelta(minutes=2),
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "orders.17a2", "namespace": "default"},
            "involvedObject": {
                "apiVersion": "scalabletopics.dev/v1alpha1",
                "kind": "ScalableTopic",
                "name": "orders",
                "namespace": "default",
            },
            "reason": "Split",
            "message": "segment 0 split into 1 and 2",
            "source": {"component": "scalable-topics-controller"},
            "firstTimestamp": _seconds(now - timedelta(minutes=2)),
            "lastTimestamp": _seconds(now - timedelta(seconds=40)),
            "count": 3,
            "type": "Normal",
            "eventTime": None,
            "reportingComponent": "",
            "reportingInstance": "",
        },
    )
