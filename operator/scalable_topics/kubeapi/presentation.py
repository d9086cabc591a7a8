"""How objects, lists and watch events are rendered for what the client accepts: the object
itself (JSON or YAML), a meta.k8s.io Table built from the resource's printer columns (what
``kubectl get`` asks for), or PartialObjectMetadata."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml
from aiohttp import web

from . import tables
from .http import JSON, encode
from .operations import WatchItem
from .pagination import Page
from .resources import ResourceType
from .tables import Negotiated, Target

Object = dict[str, Any]


@dataclass(frozen=True, slots=True)
class WatchRenderer:
    content_type: str
    render: Callable[[WatchItem], Object]

    def __call__(self, item: WatchItem) -> Object:
        return self.render(item)


class Presentation:
    def one(self, request: web.Request, resource: ResourceType, obj: Object) -> web.Response:
        wanted = _negotiate(request)
        tables.check_list_target(wanted, is_list=False)
        if wanted.target is Target.TABLE:
            body = tables.object_table(
                resource, obj, wanted.include_object, group_version=wanted.group_version
            )
        elif wanted.target is Target.PARTIAL_OBJECT_METADATA:
            body = tables.partial_object_metadata(obj, wanted.group_version)
        else:
            body = obj
        return _response(wanted, body)

    def many(self, request: web.Request, resource: ResourceType, page: Page) -> web.Response:
        wanted = _negotiate(request)
        tables.check_list_target(wanted, is_list=True)
        metadata: Object = {"resourceVersion": page.resource_version}
        if page.continue_token:
            metadata["continue"] = page.continue_token
        if page.remaining is not None:
            metadata["remainingItemCount"] = page.remaining
        if wanted.target is Target.TABLE:
            body = tables.list_table(
                resource,
                page.items,
                metadata,
                wanted.include_object,
                group_version=wanted.group_version,
            )
        elif wanted.target is Target.PARTIAL_OBJECT_METADATA_LIST:
            body = tables.partial_object_metadata_list(page.items, metadata, wanted.group_version)
        else:
            body = {
                "apiVersion": resource.api_version,
                "kind": resource.list_kind,
                "metadata": metadata,
                "items": page.items,
            }
        return _response(wanted, body)

    def watch_event(self, request: web.Request, resource: ResourceType) -> WatchRenderer:
        """A renderer for one watch stream (Table headers go with its first event only)."""
        wanted = _negotiate(request)
        transform = tables.WatchTransform(resource, wanted)

        def render(item: WatchItem) -> Object:
            if item.type == "BOOKMARK":
                return {"type": item.type, "object": item.object}
            return {"type": item.type, "object": transform(item.object)}

        return WatchRenderer(JSON, render)


def _negotiate(request: web.Request) -> Negotiated:
    return tables.negotiate(request.headers.get("Accept"), request.query)


def _response(wanted: Negotiated, body: Object) -> web.Response:
    if wanted.media_type == tables.YAML:
        text = yaml.safe_dump(body, sort_keys=False, allow_unicode=True)
        return web.Response(text=text, content_type=tables.YAML)
    return web.Response(body=encode(body), content_type=JSON)
