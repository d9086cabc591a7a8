"""How objects, lists and watch events are rendered for what the client accepts: plain JSON,
or a meta.k8s.io Table built from the resource's printer columns (what ``kubectl get`` asks)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from . import tables
from .http import JSON, json_response
from .operations import WatchItem
from .pagination import Page
from .resources import ResourceType

Object = dict[str, Any]


@dataclass(frozen=True, slots=True)
class WatchRenderer:
    content_type: str
    render: Callable[[WatchItem], Object]

    def __call__(self, item: WatchItem) -> Object:
        return self.render(item)


class Presentation:
    def one(self, request: web.Request, resource: ResourceType, obj: Object) -> web.Response:
        wanted = tables.negotiate(request.headers.get("Accept"))
        if wanted.table:
            table = tables.object_table(resource, obj, include_object=wanted.include_object)
            return json_response(table)
        return json_response(obj)

    def many(self, request: web.Request, resource: ResourceType, page: Page) -> web.Response:
        wanted = tables.negotiate(request.headers.get("Accept"))
        metadata: Object = {"resourceVersion": page.resource_version}
        if page.continue_token:
            metadata["continue"] = page.continue_token
        if page.remaining is not None:
            metadata["remainingItemCount"] = page.remaining
        if wanted.table:
            return json_response(
                tables.list_table(
                    resource, page.items, metadata, include_object=wanted.include_object
                )
            )
        return json_response(
            {
                "apiVersion": resource.api_version,
                "kind": resource.list_kind,
                "metadata": metadata,
                "items": page.items,
            }
        )

    def watch_event(self, request: web.Request, resource: ResourceType) -> WatchRenderer:
        wanted = tables.negotiate(request.headers.get("Accept"))

        def plain(item: WatchItem) -> Object:
            return {"type": item.type, "object": item.object}

        if not wanted.table:
            return WatchRenderer(JSON, plain)

        def table(item: WatchItem) -> Object:
            if item.type in ("ERROR", "BOOKMARK"):
                return plain(item)
            return {
                "type": item.type,
                "object": tables.watch_table(
                    resource, item.object, include_object=wanted.include_object
                ),
            }

        return WatchRenderer(JSON, table)
