"""The HTTP face of :class:`Operations`: one handler for every resource URL.

Verbs follow the API server: GET a name (get), GET a collection (list, or watch with
``watch=true``), POST a collection (create), PUT a name (update), PATCH a name (patch), DELETE a
name (delete) or a collection (deletecollection); ``/status`` is the status subresource.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from .field_selectors import parse_field_selector
from .http import (
    dry_run,
    encode,
    error_response,
    field_validation,
    flag,
    integer,
    json_response,
    read_json,
)
from .operations import Operations, Written
from .paths import ResourcePath
from .presentation import Presentation
from .resources import ResourceType
from .status import ApiError, Reason, success

# A watch without timeoutSeconds ends after a random time in this range, as the API server's
# --min-request-timeout spreads them, so that clients re-watch (and rebalance) now and then.
WATCH_TIMEOUT_RANGE = (1800.0, 3600.0)
DEFAULT_MAX_WATCHES = 2000

Object = dict[str, Any]


class ResourceHandler:
    def __init__(
        self,
        operations: Operations,
        presentation: Presentation,
        *,
        is_builtin: Callable[[ResourceType], bool],
        on_written: Callable[[ResourceType, Object], Awaitable[None]] | None = None,
        max_watches: int = DEFAULT_MAX_WATCHES,
    ) -> None:
        self._ops = operations
        self._presentation = presentation
        self._is_builtin = is_builtin
        self._on_written = on_written or _nothing
        self._max_watches = max_watches
        self.open_watches = 0

    async def handle(self, request: web.Request, path: ResourcePath) -> web.StreamResponse:
        resource = self._ops.registry.resolve(path.group, path.version, path.plural)
        if resource is None:
            raise not_found_resource()
        if path.subresource is not None and not (
            path.subresource == "status" and resource.status_subresource
        ):
            raise not_found_resource()
        namespace = path.namespace
        if namespace is not None and not resource.namespaced:
            raise not_found_resource()
        method = request.method
        if path.name is None:
            if method == "GET":
                if flag(request, "watch"):
                    return await self._watch(request, resource, namespace)
                return await self._list(request, resource, namespace)
            if method == "POST":
                return await self._create(request, resource, namespace)
            if method == "DELETE":
                return await self._delete_collection(request, resource, namespace)
        else:
            if resource.namespaced and namespace is None:
                raise not_found_resource()
            status = path.subresource == "status"
            if method == "GET":
                obj = await self._ops.get(resource, namespace, path.name)
                return self._presentation.one(request, resource, obj)
            if method == "PUT":
                return await self._update(request, resource, namespace, path.name, status)
            if method == "PATCH":
                return await self._patch(request, resource, namespace, path.name, status)
            if method == "DELETE" and not status:
                return await self._delete(request, resource, namespace, path.name)
        raise ApiError(
            405,
            Reason.METHOD_NOT_ALLOWED,
            f"the server does not allow this method on the requested resource: {method}",
        )

    # -- reads -----------------------------------------------------------------------------

    async def _list(
        self, request: web.Request, resource: ResourceType, namespace: str | None
    ) -> web.StreamResponse:
        page = await self._ops.list(
            resource,
            namespace,
            label_selector=request.query.get("labelSelector") or None,
            field_selector=parse_field_selector(
                request.query.get("fieldSelector"), resource.stored_as
            ),
            limit=integer(request, "limit") or 0,
            continue_token=request.query.get("continue") or None,
        )
        return self._presentation.many(request, resource, page)

    async def _watch(
        self, request: web.Request, resource: ResourceType, namespace: str | None
    ) -> web.StreamResponse:
        if self.open_watches >= self._max_watches:
            raise ApiError(
                429,
                Reason.TOO_MANY_REQUESTS,
                f"too many open watches (the limit is {self._max_watches}); retry later",
                retry_after_seconds=1,
            )
        timeout = integer(request, "timeoutSeconds")
        seconds = float(timeout) if timeout is not None else random.uniform(*WATCH_TIMEOUT_RANGE)
        stream = await self._ops.watch(
            resource,
            namespace,
            resource_version=request.query.get("resourceVersion") or None,
            label_selector=request.query.get("labelSelector") or None,
            field_selector=parse_field_selector(
                request.query.get("fieldSelector"), resource.stored_as
            ),
            allow_bookmarks=flag(request, "allowWatchBookmarks"),
            send_initial_events=flag(request, "sendInitialEvents"),
        )
        async with stream:
            render = self._presentation.watch_event(request, resource)
            response = web.StreamResponse(headers={"Content-Type": render.content_type})
            response.enable_chunked_encoding()
            self.open_watches += 1
            try:
                await response.prepare(request)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(seconds):
                        async for item in stream:
                            await response.write(encode(render(item)) + b"\n")
                await response.write_eof()
            except ConnectionError:
                pass  # the client went away: nothing to answer
            finally:
                self.open_watches -= 1
        return response

    # -- writes ----------------------------------------------------------------------------

    async def _create(
        self, request: web.Request, resource: ResourceType, namespace: str | None
    ) -> web.StreamResponse:
        body = await read_json(request)
        written = await self._ops.create(
            resource,
            namespace,
            body,
            field_validation(request, "CreateOptions"),
            dry_run=dry_run(request),
        )
        return await self._answer(request, resource, written, 201)

    async def _update(
        self,
        request: web.Request,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        status: bool,
    ) -> web.StreamResponse:
        body = await read_json(request)
        written = await self._ops.update(
            resource,
            namespace,
            name,
            body,
            field_validation(request, "UpdateOptions"),
            status=status,
            dry_run=dry_run(request),
        )
        return await self._answer(request, resource, written, 200)

    async def _patch(
        self,
        request: web.Request,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        status: bool,
    ) -> web.StreamResponse:
        written = await self._ops.patch(
            resource,
            namespace,
            name,
            await request.read(),
            request.content_type,
            field_validation(request, "PatchOptions"),
            status=status,
            builtin=self._is_builtin(resource),
            dry_run=dry_run(request),
        )
        return await self._answer(request, resource, written, 200)

    async def _answer(
        self, request: web.Request, resource: ResourceType, written: Written, code: int
    ) -> web.StreamResponse:
        """The written object, after the server's own follow-up (a CRD's status and
        registration), which a dry run does not get."""
        if not dry_run(request):
            await self._on_written(resource, written.object)
        return json_response(written.object, code, written.warnings)

    async def _delete(
        self, request: web.Request, resource: ResourceType, namespace: str | None, name: str
    ) -> web.StreamResponse:
        options = await _delete_options(request)
        preconditions = options.get("preconditions") or {}
        deleted = await self._ops.delete(
            resource,
            namespace,
            name,
            resource_version=preconditions.get("resourceVersion"),
            uid=preconditions.get("uid"),
            propagation=options.get("propagationPolicy") or request.query.get("propagationPolicy"),
        )
        if deleted.removed and self._is_builtin(resource):
            # Built-in kinds answer a Status once the object is gone; custom resources answer
            # the object, as kube-apiserver's registries do.
            meta = deleted.object["metadata"]
            return json_response(
                success(resource.plural, meta["name"], resource.group, meta.get("uid"))
            )
        return json_response(deleted.object, 200 if deleted.removed else 202)

    async def _delete_collection(
        self, request: web.Request, resource: ResourceType, namespace: str | None
    ) -> web.StreamResponse:
        page = await self._ops.list(
            resource,
            namespace,
            label_selector=request.query.get("labelSelector") or None,
            field_selector=parse_field_selector(
                request.query.get("fieldSelector"), resource.stored_as
            ),
        )
        options = await _delete_options(request)
        for obj in page.items:
            meta = obj["metadata"]
            try:
                await self._ops.delete(
                    resource,
                    meta.get("namespace"),
                    meta["name"],
                    propagation=options.get("propagationPolicy"),
                    dry_run=dry_run(request),
                )
            except ApiError as exc:
                if exc.code != 404:
                    raise
        return json_response(success(resource.plural))


async def _delete_options(request: web.Request) -> dict[str, Any]:
    raw = await request.read()
    options: dict[str, Any] = {}
    if raw:
        try:
            options = json.loads(raw)
        except ValueError as exc:
            raise ApiError(400, Reason.BAD_REQUEST, f"DeleteOptions are not JSON: {exc}") from exc
        if not isinstance(options, dict):
            raise ApiError(400, Reason.BAD_REQUEST, "DeleteOptions must be a JSON object")
    policy = options.get("propagationPolicy") or request.query.get("propagationPolicy")
    if policy not in (None, "Orphan", "Background", "Foreground"):
        raise ApiError(
            400,
            Reason.BAD_REQUEST,
            f"propagationPolicy must be Orphan, Background or Foreground, not {policy!r}",
        )
    if policy:
        options["propagationPolicy"] = policy
    return options


async def _nothing(resource: ResourceType, obj: Object) -> None:
    return None


def not_found_resource() -> ApiError:
    return ApiError(404, Reason.NOT_FOUND, "the server could not find the requested resource")


__all__ = ["ResourceHandler", "error_response", "not_found_resource"]
