"""KubeApiServer: the Kubernetes API over a store, served by aiohttp.

It owns the registry (built-in kinds plus what applied CRDs define, kept current by an
informer on CRDs so that another server on the same store agrees), the operations, the
collector, and the HTTP application: bearer-token authentication (each request knows its
user), discovery and OpenAPI documents, one handler for every resource URL, and an audit log of
what was asked, by whom. Every error is a metav1.Status.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from aiohttp import web

from ..http_bad_requests import quiet_malformed_requests
from ..store import AlreadyExists, Conflict, NotFound, Store, StoreError
from ..store.informer import Change, Informer
from . import admission, builtins, crd_types, discovery, openapi
from .admission import Admitted, FieldValidation
from .audit import AuditEvent, AuditSink
from .collector import CRD_CLEANUP, Collector
from .http import MAX_BODY_BYTES, error_response, json_response
from .operations import SYSTEM_NAMESPACES, Operations
from .pagination import ListPager
from .paths import parse_resource_path
from .presentation import Presentation
from .registry import Registry
from .request_attributes import request_attributes
from .resource_handler import ResourceHandler, not_found_resource
from .resources import ResourceType
from .status import ApiError, Reason, invalid
from .users import ANONYMOUS, NOBODY, TokenUsers, User

log = logging.getLogger(__name__)

Object = dict[str, Any]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# Paths anyone may read, as the API server's system:public-info-viewer role allows.
PUBLIC_PATHS = frozenset({"/version", "/healthz", "/livez", "/readyz"})
# request[USER]: the User a request comes from, once authentication has run.
USER = web.RequestKey("user", User)


class KubeApiServer:
    def __init__(
        self,
        store: Store,
        *,
        token: str | None = None,
        users: TokenUsers | None = None,
        registry: Registry | None = None,
        max_watches: int | None = None,
        audit: AuditSink | None = None,
    ) -> None:
        """Clients authenticate with ``token`` (user admin) or one of ``users``' tokens; with
        neither, every request is anonymous and allowed. ``audit`` gets every answered
        request."""
        if token is not None and users is not None:
            raise ValueError("a token or users, not both")
        self.store = store
        self._users = TokenUsers.single(token) if token is not None else users
        self._audit = audit
        self.registry = registry or default_registry()
        self.operations = Operations(store, self.registry, self._admit, pager=ListPager())
        extra = {} if max_watches is None else {"max_watches": max_watches}
        self.resources = ResourceHandler(
            self.operations,
            Presentation(),
            is_builtin=builtins.is_builtin,
            on_written=self._written,
            **extra,
        )
        self.collector = Collector(store, self.registry)
        self._crds = Informer(store, crd_types.CRD_KIND)
        self._runner: web.AppRunner | None = None

    # -- running ---------------------------------------------------------------------------

    async def start(self, sock: socket.socket, ssl_context: ssl.SSLContext | None = None) -> None:
        """Bootstrap the system namespaces, load the CRDs, and serve on ``sock`` (HTTPS with
        ``ssl_context``: kubectl sends its token only over TLS)."""
        await self.ensure_namespaces(SYSTEM_NAMESPACES)
        self._crds.subscribe(self._crd_changed)
        self._crds.start()
        await self._crds.wait_synced()
        self.collector.start()
        self._runner = web.AppRunner(self.application(), handler_cancellation=True)
        await self._runner.setup()
        await web.SockSite(self._runner, sock, ssl_context=ssl_context).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.collector.stop()
        await self._crds.stop()

    async def ensure_namespaces(self, names: Iterable[str]) -> None:
        for name in names:
            with contextlib.suppress(AlreadyExists):
                await self.store.create(builtins.namespace_object(name))

    async def install_crds(self, crds: Iterable[Object]) -> None:
        """Create or update CRDs (standalone installs its own, as an operator would)."""
        resource = self.registry.resolve(*crd_types.CRD_PATH)
        assert resource is not None
        for crd in crds:
            name = crd["metadata"]["name"]
            try:
                await self.operations.create(resource, None, dict(crd), FieldValidation.STRICT)
            except ApiError as exc:
                if exc.code != 409:
                    raise
                stored = await self.store.get(crd_types.CRD_KIND, "", name)
                body = {**crd, "metadata": {**stored["metadata"], **crd["metadata"]}}
                await self.operations.update(resource, None, name, body, FieldValidation.STRICT)
            await self._written(resource, await self.store.get(crd_types.CRD_KIND, "", name))

    # -- the application -------------------------------------------------------------------

    def application(self) -> web.Application:
        quiet_malformed_requests()
        app = web.Application(
            client_max_size=MAX_BODY_BYTES, middlewares=[self._errors, self._authenticate]
        )
        app.router.add_route("*", "/{tail:.*}", self._route)
        if self._audit is not None:
            app.on_response_prepare.append(self._audited)
        return app

    async def _audited(self, request: web.Request, response: web.StreamResponse) -> None:
        """Log the request as its answer's status line goes out (a watch's, as it starts)."""
        assert self._audit is not None
        attributes = request_attributes(request.method, request.path, request.query)
        self._audit.record(AuditEvent(request_user(request), attributes, response.status))

    @web.middleware
    async def _errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except ApiError as error:
            return error_response(error)
        except web.HTTPRequestEntityTooLarge:
            return error_response(
                ApiError(
                    413,
                    Reason.BAD_REQUEST,
                    f"the request body is larger than {MAX_BODY_BYTES} bytes",
                )
            )
        except StoreError as exc:
            log.warning("store error on %s %s: %s", request.method, request.path, exc)
            return error_response(ApiError(500, Reason.INTERNAL_ERROR, str(exc)))

    @web.middleware
    async def _authenticate(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        user = self._user_of(request)
        if user is None:
            if request.path not in PUBLIC_PATHS:
                raise ApiError(401, Reason.UNAUTHORIZED, "Unauthorized")
            user = ANONYMOUS
        request[USER] = user
        return await handler(request)

    def _user_of(self, request: web.Request) -> User | None:
        """The user the request's bearer token stands for (anonymous when no token is
        needed), or None."""
        if self._users is None:
            return ANONYMOUS
        scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            return None
        return self._users.authenticate(credentials.strip())

    async def _route(self, request: web.Request) -> web.StreamResponse:
        path = parse_resource_path(request.path)
        if path is not None:
            return await self.resources.handle(request, path)
        if request.method != "GET":
            raise not_found_resource()
        if request.path in ("/healthz", "/livez", "/readyz"):
            return web.Response(text="ok")
        served = openapi.serve(
            request.path,
            request.query,
            self.registry.resources(),
            accept=request.headers.get("Accept"),
        )
        if served is None:
            served = discovery.serve(
                request.path, request.headers.get("Accept"), self.registry.resources()
            )
        if served is None:
            raise not_found_resource()
        content_type, body = served
        if isinstance(body, bytes):  # /openapi/v2 in protobuf
            return web.Response(body=body, content_type=content_type)
        response = json_response(body)
        response.content_type = content_type.split(";")[0]
        response.headers["Content-Type"] = content_type
        return response

    # -- admission and CRDs ----------------------------------------------------------------

    def _admit(
        self,
        resource: ResourceType,
        new: Object,
        old: Object | None,
        field_validation: FieldValidation,
    ) -> Admitted:
        name = new.get("metadata", {}).get("name", "")
        if builtins.is_builtin(resource):
            is_crd = resource.kind == crd_types.CRD_KIND and resource.group == crd_types.CRD_GROUP
            if is_crd:
                new = crd_types.with_defaults(new)
            causes = builtins.admission_causes(resource, new, old)  # raises the 400s itself
            if is_crd:
                causes += admission.check_crd(new)
            if causes:
                raise invalid(resource.kind, name, resource.group, causes)
            if is_crd:
                meta = new["metadata"]
                if old is None and CRD_CLEANUP not in (meta.get("finalizers") or []):
                    meta["finalizers"] = [*(meta.get("finalizers") or []), CRD_CLEANUP]
                self._check_crd_kind(new)
            return Admitted(new, ())
        return admission.admit_resource(
            resource, new, old, field_validation=field_validation, name=name
        )

    def _check_crd_kind(self, crd: Object) -> None:
        """A kind is stored under its name alone: two groups cannot both define one."""
        names = crd.get("spec", {}).get("names", {})
        kind, group = names.get("kind"), crd.get("spec", {}).get("group")
        owner = self.registry.owner_of(group, kind) if group and kind else None
        taken = kind in self.registry.store_kinds and owner is None
        if taken or (owner is not None and owner != crd["metadata"].get("name")):
            raise ApiError(
                422,
                Reason.INVALID,
                f"spec.names.kind: Invalid value: {kind!r}: this server stores every kind "
                "under its name, and another resource has it already",
            )

    async def _written(self, resource: ResourceType, obj: Object) -> None:
        if resource.kind != crd_types.CRD_KIND or resource.group != crd_types.CRD_GROUP:
            return
        self._define(obj)
        name = obj["metadata"]["name"]
        for _attempt in range(8):
            try:
                stored = await self.store.get(crd_types.CRD_KIND, "", name)
                wanted = crd_types.crd_status(stored, self._other_resources(name))
                if stored.get("status") == wanted:
                    return
                await self.store.patch_status(
                    crd_types.CRD_KIND,
                    "",
                    name,
                    {"status": wanted},
                    stored["metadata"]["resourceVersion"],
                )
                return
            except Conflict:
                continue
            except NotFound:
                return

    def _other_resources(self, crd_name: str) -> list[ResourceType]:
        mine = {id(resource) for resource in self.registry.defined_by(crd_name)}
        return [r for r in self.registry.resources() if id(r) not in mine]

    def _crd_changed(self, change: Change) -> None:
        if change.new is None:
            self.registry.forget(change.key[1])
        else:
            self._define(change.new)

    def _define(self, crd: Object) -> None:
        types = crd_types.resource_types(crd)
        self.registry.define(crd["metadata"]["name"], types, crd_types.storage_version(crd))
        self.collector.kinds_changed()


def request_user(request: web.Request) -> User:
    """Who sent ``request``: nobody (``""``) until authentication has accepted it."""
    user: User = request.get(USER, NOBODY)  # .get does not type by the key
    return user


def default_registry() -> Registry:
    return Registry(builtins.BUILTIN_RESOURCES, builtins.conversions(), builtins.storage_defaults())


__all__ = ["USER", "KubeApiServer", "default_registry", "json_response", "request_user"]
