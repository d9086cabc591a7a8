"""KubernetesStore: the store port on a real Kubernetes API server, through kubernetes_asyncio.

The port was drawn after the Kubernetes API, so each call is one request (two where noted):

* ``get`` / ``create`` / ``replace`` / ``replace_status`` / ``delete``: GET, POST (201), PUT,
  PUT ``/status`` and DELETE on ``/apis/<group>/<version>[/namespaces/<ns>]/<plural>[/<name>]``
  (``/api/v1/...`` for the core group), built from the :class:`KindInfo` of each kind, sent with
  the ApiClient's ``call_api``: the generated per-kind APIs would turn our plain dicts into
  models and back, and every kind here is a dict anyway. ``replace`` needs the resourceVersion
  the writer read (the API would take a PUT without one as an unconditional update).
* ``patch`` / ``patch_status``: PATCH as ``application/merge-patch+json`` (a dict body would
  otherwise go out as a JSON patch), the optional resourceVersion precondition written into the
  patch's ``metadata.resourceVersion``, where the API server checks it.
* ``delete``: DeleteOptions with ``preconditions.resourceVersion``. Custom resources answer the
  object as deleted or as marked for deletion; built-in kinds (Lease, Event) answer a Status when
  the object is gone at once, so for them the object is read first and deleted on the condition
  that it is still that object (uid and resourceVersion; re-read when it moved on and the caller
  set no condition), and the object read is what ``delete`` returns.
* ``list``: pages of :data:`LIST_PAGE` objects followed by their ``continue`` token (one
  consistent snapshot; the first page's resourceVersion is the list's). Items of built-in kinds
  come without ``kind`` and ``apiVersion``: they are put back.
* ``watch``: kubernetes_asyncio's ``Watch`` over a ``watch=true`` GET with ``timeoutSeconds``,
  ``allowWatchBookmarks`` and the label selector. A watch without a resourceVersion lists first
  and watches from the list's (client-go's reflector does the same): the ADDED events of a
  server-side initial list come in no revision order, so a stream cut in the middle of them
  could not be resumed exactly. When the server ends a stream (its timeout, or its own), the
  watch opens the next one from the last resourceVersion it delivered or was bookmarked, so
  the port's watch never ends by itself. A 410, as an ERROR event or as the request's status
  (kubernetes_asyncio raises both as ``ApiException(410)``), is the port's Expired. A task per
  watch reads the stream into a queue, so a reader that times out loses nothing and the stream
  stays open (bookmarks come only to a stream that lives for a while).

Errors. Every failure is a metav1.Status: 404 NotFound, 409 AlreadyExists or Conflict (the
Status does not say which version the store has: it is read back, best known), 410 Expired, 400
and 422 Invalid with the Status message (it names the fields), anything else StoreError with
the Status message; a server that cannot be reached is a StoreError naming it. What the adapter
needs to build a URL (a served kind, its apiVersion, a DNS-subdomain name, a DNS-label namespace)
it checks itself, with the messages of the other adapters, and so it does label selectors (the
port's grammar; a watch refuses a malformed one when it is made) and a create that carries a
resourceVersion (the API server answers that with a 500); everything else the server judges.

Configuration. A kubeconfig file (its current context or a named one) or the pod's service
account, loaded by kubernetes_asyncio into a Configuration of our own (never the process-wide
default, and without writing refreshed credentials back to the file) on the first request.
Timestamps are strings and go out untouched, so the Lease MicroTimes the lease lock writes keep
their six fractional digits (the API refuses any other precision).

``close()`` stops every open watch (each then raises StoreClosed once its queue is drained)
and closes the ApiClient.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import copy
import json
import logging
import os
import re
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qs, quote, unquote, urlsplit

import aiohttp
import yaml
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config import ConfigException, load_incluster_config, load_kube_config
from kubernetes_asyncio.watch import Watch as StreamWatch

from ..tasks import cancel_and_wait
from .errors import (
    AlreadyExists,
    Conflict,
    Expired,
    Invalid,
    NotFound,
    StoreClosed,
    StoreError,
    UnknownKind,
)
from .kinds import DEFAULT_KINDS, KindInfo
from .port import EventType, Object, ObjectList, WatchEvent
from .selectors import (
    DNS_LABEL_MAX,
    DNS_SUBDOMAIN_MAX,
    is_dns_label,
    is_dns_subdomain,
    parse_selector,
)

log = logging.getLogger(__name__)

SCHEME = "kubernetes"
IN_CLUSTER = "in-cluster"
DEFAULT_KUBECONFIG = "~/.kube/config"

USER_AGENT = "scalable-topics-store"
LIST_PAGE = 500  # objects per list request, as kopf and kubectl page
WATCH_TIMEOUT_SECONDS = 300  # a stream's life at the server; the next one resumes where it ended
REQUEST_TIMEOUT_SECONDS = 60.0  # a request other than a watch, from connect to the last byte
_WATCH_READ_MARGIN = 30.0  # a stream silent this much past its timeout is dead
_QUICK_END = 0.5  # a stream that ends sooner, empty, is not reopened at once
_DELETE_RETRIES = 5  # a built-in object that keeps moving between read and delete

_JSON = "application/json"
_MERGE_PATCH = "application/merge-patch+json"
_AUTH_SETTINGS = ["BearerToken"]
_OBJECT_RESPONSES = {200: "object", 201: "object", 202: "object"}


# -- where the API server is ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClusterSource:
    """Where the client configuration comes from: a kubeconfig (``path`` None: ``$KUBECONFIG``
    or ``~/.kube/config``), or the pod's service account (``in_cluster``)."""

    path: str | None = None
    context: str | None = None
    in_cluster: bool = False

    def describe(self) -> str:
        if self.in_cluster:
            return "the in-cluster service account"
        where = self.path or f"$KUBECONFIG or {DEFAULT_KUBECONFIG}"
        context = f"context {self.context!r}" if self.context else "its current context"
        return f"kubeconfig {where} ({context})"


URL_FORMS = (
    "kubernetes: (KUBECONFIG or ~/.kube/config, current context)",
    "kubernetes:in-cluster (the pod's service account)",
    "kubernetes:///absolute/path/to/kubeconfig",
    "kubernetes:relative/path/to/kubeconfig",
)


def parse_url(url: str) -> ClusterSource:
    """The cluster a ``kubernetes:`` store URL names (see URL_FORMS; any kubeconfig form takes
    ``?context=NAME``); ValueError for anything else."""
    parts = urlsplit(url)
    if parts.scheme != SCHEME:
        raise ValueError(f"store URL {url!r} is not a {SCHEME}: URL")
    if parts.netloc or parts.fragment:
        raise ValueError(
            f"store URL {url!r} names a host: the API server comes from a kubeconfig or the "
            f"service account; use one of {'; '.join(URL_FORMS)}"
        )
    try:
        query = parse_qs(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        raise ValueError(f"store URL {url!r}: malformed query {parts.query!r}") from None
    unknown = sorted(set(query) - {"context"})
    if unknown:
        raise ValueError(f"store URL {url!r}: unknown option {', '.join(unknown)} (only context)")
    contexts = query.get("context", [])
    if len(contexts) > 1 or (contexts and not contexts[0]):
        raise ValueError(f"store URL {url!r}: context takes exactly one non-empty name")
    context = contexts[0] if contexts else None
    path = unquote(parts.path)
    if path == IN_CLUSTER:
        if context is not None:
            raise ValueError(f"store URL {url!r}: the in-cluster service account has no contexts")
        return ClusterSource(in_cluster=True)
    return ClusterSource(path=path or None, context=context)


def _kubeconfig_paths(source: ClusterSource) -> str:
    """The kubeconfig path list to load (read now, not at import as kubernetes_asyncio does)."""
    if source.path is not None:
        return source.path
    return os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG


def _existing_kubeconfigs(source: ClusterSource) -> str:
    paths = _kubeconfig_paths(source)
    found = [p for p in paths.split(os.pathsep) if p and Path(p).expanduser().exists()]
    if not found:
        raise StoreError(f"no kubeconfig at {paths}: {source.describe()}")
    return os.pathsep.join(found)


async def load_configuration(source: ClusterSource) -> Any:
    """A kubernetes_asyncio Configuration of our own for ``source``; StoreError when it cannot
    be loaded."""
    configuration = Configuration()
    try:
        if source.in_cluster:
            load_in_cluster: Any = load_incluster_config
            load_in_cluster(client_configuration=configuration)
        else:
            await load_kube_config(
                config_file=_existing_kubeconfigs(source),
                context=source.context,
                client_configuration=configuration,
                persist_config=False,
            )
    except StoreError:
        raise
    except (ConfigException, OSError, ValueError, KeyError, TypeError, yaml.YAMLError) as exc:
        raise StoreError(
            f"cannot load the client configuration from {source.describe()}: {exc}"
        ) from exc
    return configuration


# -- errors -------------------------------------------------------------------------------------


def status_of(exc: ApiException) -> dict[str, Any]:
    """The metav1.Status an ApiException carries (its body), or one made of what it says."""
    body: Any = getattr(exc, "body", None)
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    parsed: Any = None
    if isinstance(body, str) and body:
        with contextlib.suppress(ValueError):
            parsed = json.loads(body)
    code = int(exc.status or 0)
    if isinstance(parsed, dict) and parsed.get("kind") == "Status":
        parsed.setdefault("code", code)
        return parsed
    reason_text = str(exc.reason or "")
    if isinstance(body, str) and body.strip():  # not a Status: a proxy's page, say
        return {"kind": "Status", "code": code, "reason": reason_text, "message": body.strip()}
    # kubernetes_asyncio's Watch raises a stream's ERROR event as reason "Reason: message".
    reason, colon, message = reason_text.partition(": ")
    if not colon or " " in reason:
        reason, message = "", reason_text
    return {"kind": "Status", "code": code, "reason": reason, "message": message}


_TOO_OLD = re.compile(r"too old resource version: (\S+) \((\S+)\)")
_META_VERSION = re.compile(r"ResourceVersion in object meta: (\S+?)[,.]?(?:\s|$)")


def _message(status: Mapping[str, Any]) -> str:
    message = str(status.get("message") or "")
    causes = (status.get("details") or {}).get("causes") or []
    described = [
        f"{c.get('field')}: {c.get('message')}" if c.get("field") else str(c.get("message"))
        for c in causes
        if isinstance(c, dict) and c.get("message")
    ]
    missing = [text for text in described if text not in message]
    if missing:
        message = f"{message}: {'; '.join(missing)}" if message else "; ".join(missing)
    return message or f"the API server answered {status.get('code')} {status.get('reason')}"


def error_from_status(
    status: Mapping[str, Any],
    kind: str,
    namespace: str,
    name: str,
    *,
    expected: str | None = None,
    watched_from: str | None = None,
) -> StoreError:
    """The port's error for the Status an API request failed with."""
    code = int(status.get("code") or 0)
    reason = str(status.get("reason") or "")
    message = _message(status)
    if code == 404:
        details = status.get("details") or {}
        if details.get("kind") == "namespaces" and kind != "Namespace":
            # Not the object: the namespace it would live in (a create or a list there).
            return StoreError(f"namespace {details.get('name')!r} does not exist: {message}")
        if name and "could not find the requested resource" not in message:
            return NotFound(kind, namespace, name)
        return StoreError(f"the API server does not serve {kind}: {message}")
    if code == 409 and reason == "AlreadyExists":
        return AlreadyExists(kind, namespace, name)
    if code == 409:
        found = _META_VERSION.search(message)
        return Conflict(kind, namespace, name, expected or "", found.group(1) if found else "")
    if code == 410:
        found = _TOO_OLD.search(message)
        return Expired(
            watched_from or (found.group(1) if found else ""),
            found.group(2) if found else "an unknown revision",
        )
    if code in (400, 422):
        return Invalid(message)
    return StoreError(f"{code} {reason}: {message}".strip())


# -- the store ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Target:
    info: KindInfo
    namespace: str
    name: str


class KubernetesStore:
    """The store port on a Kubernetes API server (see the module docstring for the mapping)."""

    def __init__(
        self,
        source: ClusterSource,
        *,
        kinds: Mapping[str, KindInfo] = DEFAULT_KINDS,
        watch_timeout_seconds: int = WATCH_TIMEOUT_SECONDS,
        request_timeout: float = REQUEST_TIMEOUT_SECONDS,
        list_page: int = LIST_PAGE,
    ) -> None:
        if watch_timeout_seconds < 1:
            raise ValueError(
                f"watch_timeout_seconds must be at least 1, not {watch_timeout_seconds}"
            )
        if list_page < 1:
            raise ValueError(f"list_page must be at least 1, not {list_page}")
        self.source = source
        self._kinds = kinds
        self._watch_timeout = watch_timeout_seconds
        self._request_timeout = request_timeout
        self._list_page = list_page
        self._client: Any = None  # an ApiClient, made on the first request
        self._client_lock = asyncio.Lock()
        self._closed = False
        self._watches: weakref.WeakSet[KubernetesWatch] = weakref.WeakSet()

    @classmethod
    async def open(cls, source: ClusterSource, **options: Any) -> KubernetesStore:
        """Open a store and load its configuration now, so that errors surface here."""
        store = cls(source, **options)
        try:
            await store._api()
        except BaseException:
            await store.close()
            raise
        return store

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def server(self) -> str:
        """The API server's address once the configuration is loaded, else where it comes from."""
        if self._client is not None:
            return str(self._client.configuration.host)
        return self.source.describe()

    @property
    def open_watches(self) -> int:
        return sum(1 for watch in self._watches if not watch.closed)

    # -- the port ---------------------------------------------------------------------------

    async def get(self, kind: str, namespace: str, name: str) -> Object:
        target = self._target(kind, namespace, name)
        return await self._object_request("GET", target)

    async def list(
        self, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> ObjectList:
        info = self._kind(kind)
        parse_selector(label_selector)  # the port's grammar, checked as the other adapters do
        return await self._list(info, namespace or None, label_selector)

    async def create(self, obj: Object) -> Object:
        request, target = self._request_object(obj)
        if request["metadata"].get("resourceVersion"):
            # The API server refuses it too, but as a 500 InternalError.
            raise Invalid(
                f"{target.info.kind} {target.name!r}: metadata.resourceVersion may not be set "
                "on an object to be created"
            )
        return await self._object_request("POST", target, body=request, collection=True)

    async def replace(self, obj: Object) -> Object:
        request, target = self._request_object(obj)
        expected = self._read_version(request, target)
        return await self._object_request("PUT", target, body=request, expected=expected)

    async def replace_status(self, obj: Object) -> Object:
        request, target = self._request_object(obj)
        self._status_subresource(target.info)
        expected = self._read_version(request, target)
        return await self._object_request(
            "PUT", target, body=request, expected=expected, subresource="status"
        )

    async def patch(
        self,
        kind: str,
        namespace: str,
        name: str,
        patch: Object,
        resource_version: str | None = None,
    ) -> Object:
        return await self._patch(kind, namespace, name, patch, resource_version, status=False)

    async def patch_status(
        self,
        kind: str,
        namespace: str,
        name: str,
        patch: Object,
        resource_version: str | None = None,
    ) -> Object:
        return await self._patch(kind, namespace, name, patch, resource_version, status=True)

    async def delete(
        self, kind: str, namespace: str, name: str, resource_version: str | None = None
    ) -> Object:
        """Return the object as deleted, or as marked for deletion when finalizers hold it."""
        target = self._target(kind, namespace, name)
        if not _answers_deleted_object(target.info):
            return await self._delete_reading_first(target, resource_version)
        answer = await self._object_request(
            "DELETE", target, body=_delete_options(resource_version), expected=resource_version
        )
        if answer.get("kind") == "Status":  # not expected of this kind; all we know
            return self._from_status(target, answer)
        return answer

    def watch(
        self,
        kind: str,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        allow_bookmarks: bool = False,
    ) -> KubernetesWatch:
        self._check_open()
        info = self._kind(kind)
        parse_selector(label_selector)  # a malformed selector is refused here, not on reading
        watch = KubernetesWatch(
            self, info, namespace or None, resource_version or None, label_selector, allow_bookmarks
        )
        self._watches.add(watch)
        return watch

    async def close(self) -> None:
        """Stop every open watch and close the client; closing twice is harmless."""
        self._closed = True
        for watch in list(self._watches):
            await watch.stop(StoreClosed("the store was closed"))
        async with self._client_lock:
            client, self._client = self._client, None
        if client is not None:
            await client.close()

    # -- requests ---------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed(f"the store on {self.server} is closed")

    async def _api(self) -> Any:
        self._check_open()
        async with self._client_lock:
            self._check_open()
            if self._client is None:
                configuration = await load_configuration(self.source)
                self._check_open()
                client = ApiClient(configuration)
                client.user_agent = USER_AGENT  # what the server's audit log names us by
                self._client = client
            return self._client

    async def _call(
        self,
        method: str,
        path: str,
        *,
        query: builtins.list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = _JSON,
    ) -> Any:
        """One request; its answer's body parsed. Raises ApiException for an error status and
        StoreError when the server cannot be reached."""
        client = await self._api()
        try:
            return await client.call_api(
                path,
                method,
                query_params=query or [],
                header_params={"Accept": _JSON, "Content-Type": content_type},
                body=body,
                response_types_map=_OBJECT_RESPONSES,
                auth_settings=_AUTH_SETTINGS,
                _return_http_data_only=True,
                _preload_content=True,
                _request_timeout=self._request_timeout,
            )
        except ApiException:
            raise
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            self._check_open()
            raise StoreError(
                f"cannot reach the Kubernetes API server {self.server} ({method} {path}): "
                f"{type(exc).__name__}: {exc}"
            ) from exc

    async def _object_request(
        self,
        method: str,
        target: _Target,
        *,
        body: Object | None = None,
        expected: str | None = None,
        subresource: str | None = None,
        collection: bool = False,
        content_type: str = _JSON,
        read_conflicts: bool = True,
    ) -> Object:
        """One request on an object; ``read_conflicts``: read the object on a Conflict, to
        tell the caller which version the store has."""
        info = target.info
        if collection:
            path = _collection_path(info, target.namespace)
        else:
            path = _object_path(info, target.namespace, target.name, subresource)
        try:
            answer = await self._call(method, path, body=body, content_type=content_type)
        except ApiException as exc:
            raise await self._error(exc, target, expected, read_conflicts) from None
        if not isinstance(answer, dict):
            raise StoreError(f"{method} {path}: the API server answered {answer!r}, not an object")
        return _with_type(answer, info)

    async def _error(
        self, exc: ApiException, target: _Target, expected: str | None, read_conflicts: bool
    ) -> StoreError:
        error = error_from_status(
            status_of(exc), target.info.kind, target.namespace, target.name, expected=expected
        )
        if isinstance(error, Conflict) and not error.actual and read_conflicts:
            # The Status does not say what the object is at now: read it, best known.
            actual = "(deleted)"
            with contextlib.suppress(NotFound):
                current = await self._object_request("GET", target)
                actual = str(current["metadata"].get("resourceVersion", ""))
            error = Conflict(
                target.info.kind, target.namespace, target.name, error.expected, actual
            )
        return error

    async def _list(
        self, info: KindInfo, namespace: str | None, label_selector: str | None
    ) -> ObjectList:
        path = _collection_path(info, namespace)
        for attempt in range(3):
            items: builtins.list[Object] = []
            query: builtins.list[tuple[str, str]] = [("limit", str(self._list_page))]
            if label_selector:
                query.append(("labelSelector", label_selector))
            version = ""
            try:
                while True:
                    answer = await self._call("GET", path, query=query)
                    meta = answer.get("metadata") or {}
                    version = version or str(meta.get("resourceVersion") or "")
                    items += [_with_type(item, info) for item in answer.get("items") or []]
                    token = meta.get("continue")
                    if not token:
                        return ObjectList(items=items, resource_version=version)
                    query = [q for q in query if q[0] != "continue"] + [("continue", token)]
            except ApiException as exc:
                status = status_of(exc)
                # A continue token outlived the history behind it: list again from the top.
                paging = any(key == "continue" for key, _ in query)
                if int(status.get("code") or 0) == 410 and paging and attempt < 2:
                    continue
                raise error_from_status(status, info.kind, namespace or "", "") from None
        raise AssertionError("unreachable")

    async def _patch(
        self,
        kind: str,
        namespace: str,
        name: str,
        patch: Object,
        resource_version: str | None,
        *,
        status: bool,
    ) -> Object:
        target = self._target(kind, namespace, name)
        if status:
            self._status_subresource(target.info)
        if not isinstance(patch, dict):
            raise Invalid(f"a merge patch must be a JSON object, not {type(patch).__name__}")
        body = copy.deepcopy(patch)
        meta = body.get("metadata")
        if isinstance(meta, dict):
            for field, value in (("name", name), ("namespace", namespace)):
                if field in meta and meta[field] != value and (value or meta[field]):
                    raise Invalid(
                        f"{kind} {name!r}: a patch cannot change metadata.{field} "
                        f"(to {meta[field]!r})"
                    )
        expected = resource_version
        if resource_version is not None:
            if not isinstance(meta, dict):
                meta = body["metadata"] = {}
            meta["resourceVersion"] = resource_version
        elif isinstance(meta, dict) and isinstance(meta.get("resourceVersion"), str):
            expected = meta["resourceVersion"]
        return await self._object_request(
            "PATCH",
            target,
            body=body,
            expected=expected,
            subresource="status" if status else None,
            content_type=_MERGE_PATCH,
        )

    async def _delete_reading_first(self, target: _Target, resource_version: str | None) -> Object:
        """Delete a kind whose immediate deletion answers a Status, so that what was deleted is
        known: read it, delete it on condition that it is still what was read."""
        for _ in range(_DELETE_RETRIES):
            before = await self._object_request("GET", target)
            meta = before["metadata"]
            read_version = str(meta.get("resourceVersion", ""))
            if resource_version is not None and resource_version != read_version:
                raise Conflict(
                    target.info.kind,
                    target.namespace,
                    target.name,
                    resource_version,
                    read_version,
                )
            options = _delete_options(read_version, uid=meta.get("uid"))
            try:
                answer = await self._object_request(
                    "DELETE",
                    target,
                    body=options,
                    expected=read_version,
                    read_conflicts=resource_version is not None,
                )
            except Conflict:
                if resource_version is not None:
                    raise
                continue  # it moved on between the read and the delete: read it again
            return before if answer.get("kind") == "Status" else answer
        raise StoreError(
            f"{target.info.kind} {target.namespace}/{target.name} kept changing while it was "
            f"being deleted ({_DELETE_RETRIES} attempts)"
        )

    @staticmethod
    def _from_status(target: _Target, status: Object) -> Object:
        details = status.get("details") or {}
        metadata: dict[str, Any] = {"name": target.name}
        if target.namespace:
            metadata["namespace"] = target.namespace
        if details.get("uid"):
            metadata["uid"] = details["uid"]
        return {
            "apiVersion": target.info.api_version,
            "kind": target.info.kind,
            "metadata": metadata,
        }

    # -- what a request is about -------------------------------------------------------------

    def _kind(self, kind: str) -> KindInfo:
        self._check_open()
        info = self._kinds.get(kind)
        if info is None:
            raise UnknownKind(kind, list(self._kinds))
        return info

    def _target(self, kind: str, namespace: str, name: str) -> _Target:
        info = self._kind(kind)
        return _Target(info, *_address(info, namespace, name))

    def _request_object(self, obj: Object) -> tuple[Object, _Target]:
        """A private copy of a write's object and what it addresses."""
        self._check_open()
        if not isinstance(obj, dict):
            raise Invalid(f"an object must be a JSON object, not {type(obj).__name__}")
        request = copy.deepcopy(obj)
        kind = request.get("kind")
        if not isinstance(kind, str) or not kind:
            raise Invalid("an object needs a kind")
        info = self._kind(kind)
        if request.get("apiVersion") != info.api_version:
            raise Invalid(
                f"{kind} has apiVersion {info.api_version!r}, "
                f"the object says {request.get('apiVersion')!r}"
            )
        meta = request.get("metadata")
        if not isinstance(meta, dict):
            raise Invalid(f"{kind}: metadata must be an object with name and namespace")
        name, namespace = meta.get("name"), meta.get("namespace")
        if not isinstance(name, str) or not name:
            raise Invalid(f"{kind}: metadata.name is required")
        if not info.namespaced and namespace == "":
            del meta["namespace"]
        if not isinstance(namespace, str):
            namespace = "" if namespace is None else str(namespace)
        return request, _Target(info, *_address(info, namespace, name))

    @staticmethod
    def _read_version(request: Object, target: _Target) -> str:
        version = request["metadata"].get("resourceVersion")
        if not isinstance(version, str) or not version:
            raise Invalid(
                f"{target.info.kind} {target.name!r}: a replace needs the resourceVersion the "
                "writer read (metadata.resourceVersion)"
            )
        return version

    @staticmethod
    def _status_subresource(info: KindInfo) -> None:
        if not info.status_subresource:
            raise Invalid(f"{info.kind} has no status subresource: write status with the object")


def _address(info: KindInfo, namespace: str, name: str) -> tuple[str, str]:
    """Check what goes into a URL: the namespace (a DNS label; empty for a cluster-scoped kind)
    and the name (a DNS subdomain)."""
    kind = info.kind
    if info.namespaced:
        if not namespace:
            raise Invalid(f"{kind} {name!r}: metadata.namespace is required")
        if not is_dns_label(namespace):
            raise Invalid(
                f"{kind} metadata.namespace {namespace!r} is not a DNS label: at most "
                f"{DNS_LABEL_MAX} lowercase alphanumerics or '-', starting and ending with an "
                "alphanumeric"
            )
    elif namespace:
        raise Invalid(f"{kind} {name!r} is cluster-scoped: metadata.namespace must be empty")
    if not isinstance(name, str) or not is_dns_subdomain(name):
        raise Invalid(
            f"{kind} metadata.name {name!r} is not a DNS subdomain name: at most "
            f"{DNS_SUBDOMAIN_MAX} lowercase alphanumerics, '-' or '.', starting and ending "
            "with an alphanumeric"
        )
    return namespace, name


def _group_path(info: KindInfo) -> str:
    return "/api/v1" if info.api_version == "v1" else f"/apis/{info.api_version}"


def _collection_path(info: KindInfo, namespace: str | None) -> str:
    if info.namespaced and namespace:
        return f"{_group_path(info)}/namespaces/{quote(namespace, safe='')}/{info.plural}"
    return f"{_group_path(info)}/{info.plural}"


def _object_path(info: KindInfo, namespace: str, name: str, subresource: str | None) -> str:
    path = f"{_collection_path(info, namespace)}/{quote(name, safe='')}"
    return f"{path}/{subresource}" if subresource else path


def _answers_deleted_object(info: KindInfo) -> bool:
    """Custom resources answer a DELETE with the object; built-in kinds (the core group and
    the *.k8s.io and dotless groups) with a Status when the object is gone at once."""
    group = info.api_version.rpartition("/")[0]
    return bool(group) and "." in group and not group.endswith(".k8s.io")


def _delete_options(resource_version: str | None, uid: Any = None) -> Object:
    options: Object = {"apiVersion": "v1", "kind": "DeleteOptions"}
    preconditions: dict[str, str] = {}
    if resource_version:
        preconditions["resourceVersion"] = resource_version
    if isinstance(uid, str) and uid:
        preconditions["uid"] = uid
    if preconditions:
        options["preconditions"] = preconditions
    return options


def _with_type(obj: Object, info: KindInfo) -> Object:
    """``obj`` with its apiVersion and kind (lists of built-in kinds leave them out)."""
    if obj.get("kind") == "Status" or ("kind" in obj and "apiVersion" in obj):
        return obj
    return {"apiVersion": info.api_version, "kind": info.kind, **obj}


# -- watches --------------------------------------------------------------------------------------


_End = StoreError  # what the reader task leaves in the queue when the watch ends


class KubernetesWatch:
    """One watch: a task reads the API server's streams into a queue (see the module
    docstring); it starts on ``async with`` or the first iteration."""

    def __init__(
        self,
        store: KubernetesStore,
        info: KindInfo,
        namespace: str | None,
        resource_version: str | None,
        label_selector: str | None,
        allow_bookmarks: bool,
    ) -> None:
        self._store = store
        self._info = info
        self._namespace = namespace
        self._cursor = resource_version  # every change up to here was queued
        self._selector = label_selector
        self._bookmarks = allow_bookmarks
        self._queue: asyncio.Queue[WatchEvent | _End] = asyncio.Queue()
        self._opened: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._entered = self._closed = False
        self._failure: StoreError | None = None
        self.streams = 0  # watch requests sent, for tests and metrics

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def resource_version(self) -> str | None:
        """Where a stream opened now would resume."""
        return self._cursor

    async def __aenter__(self) -> Self:
        self._entered = True
        await self._start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> WatchEvent:
        await self._start()
        if self._failure is not None:
            raise self._failure
        if self._closed and self._queue.empty():
            raise StopAsyncIteration
        try:
            item = await self._queue.get()
        except asyncio.CancelledError:
            if not self._entered:  # nothing else would release a plainly iterated watch
                await asyncio.shield(self.aclose())
            raise
        if isinstance(item, WatchEvent):
            return item
        if isinstance(item, StoreClosed) and not self._store._closed:
            raise StopAsyncIteration  # closed by its reader, not by the store
        self._failure = item
        raise item

    async def aclose(self) -> None:
        await self.stop(None)

    async def stop(self, reason: StoreError | None) -> None:
        """End the watch: stop reading; a reader then gets ``reason`` after what was queued
        (None: nothing more)."""
        if self._closed:
            return
        self._closed = True
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait(task)
        self._queue.put_nowait(reason or StoreClosed("the watch was closed"))

    async def _start(self) -> None:
        """Start reading and wait until the first stream is open (or failed)."""
        if self._opened is None:
            if self._closed:
                return
            self._opened = asyncio.get_running_loop().create_future()
            self._task = asyncio.create_task(self._read(), name=f"watch {self._info.plural}")
        await asyncio.shield(self._opened)

    def _signal_open(self) -> None:
        if self._opened is not None and not self._opened.done():
            self._opened.set_result(None)

    async def _read(self) -> None:
        try:
            if self._cursor is None:
                await self._list_first()
            while True:
                began = asyncio.get_running_loop().time()
                delivered = await self._stream()
                if not delivered and asyncio.get_running_loop().time() - began < _QUICK_END:
                    await asyncio.sleep(_QUICK_END)  # a server that ends streams at once
        except asyncio.CancelledError:
            raise
        except ApiException as exc:
            status = status_of(exc)
            self._end(
                error_from_status(
                    status, self._info.kind, self._namespace or "", "", watched_from=self._cursor
                )
            )
        except StoreError as exc:
            self._end(exc)
        except Exception as exc:  # a broken connection, a garbled line, or a defect here
            if not isinstance(exc, aiohttp.ClientError | OSError | TimeoutError | ValueError):
                log.exception("the watch of %s failed", self._info.plural)
            self._end(
                StoreError(
                    f"the watch of {self._info.plural} on {self._store.server} broke: "
                    f"{type(exc).__name__}: {exc}"
                )
            )
        finally:
            self._signal_open()

    def _end(self, error: StoreError) -> None:
        self._closed = True
        self._queue.put_nowait(error)

    async def _list_first(self) -> None:
        listed = await self._store._list(self._info, self._namespace, self._selector)
        for item in listed.items:
            self._queue.put_nowait(WatchEvent(EventType.ADDED, item))
        self._cursor = listed.resource_version

    async def _stream(self) -> int:
        """Read one stream to its end, queueing its events and moving the cursor; return how
        many events it delivered."""
        delivered = 0
        async with StreamWatch() as stream:
            events = stream.stream(
                self._open_stream, resource_version=self._cursor, timeout_seconds=self._timeout()
            )
            async for raw in events:
                event = self._event(raw)
                if event is not None:
                    self._cursor = event.resource_version
                    self._queue.put_nowait(event)
                    delivered += 1
        return delivered

    def _timeout(self) -> int:
        return self._store._watch_timeout

    async def _open_stream(self, **options: Any) -> Any:
        """The request kubernetes_asyncio's Watch reads: its options are ours plus
        ``watch`` and ``_preload_content``; it resumes from ``resource_version``."""
        query: list[tuple[str, str]] = [("watch", "true")]
        if options.get("resource_version"):
            query.append(("resourceVersion", str(options["resource_version"])))
        if self._bookmarks:
            query.append(("allowWatchBookmarks", "true"))
        if self._selector:
            query.append(("labelSelector", self._selector))
        timeout = int(options.get("timeout_seconds") or self._timeout())
        query.append(("timeoutSeconds", str(timeout)))
        path = _collection_path(self._info, self._namespace)
        client = await self._store._api()
        try:
            response = await client.call_api(
                path,
                "GET",
                query_params=query,
                header_params={"Accept": _JSON},
                auth_settings=_AUTH_SETTINGS,
                _preload_content=False,
                _request_timeout=aiohttp.ClientTimeout(
                    sock_connect=self._store._request_timeout,
                    sock_read=timeout + _WATCH_READ_MARGIN,
                ),
            )
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise StoreError(
                f"cannot reach the Kubernetes API server {self._store.server} "
                f"(watch {path}): {type(exc).__name__}: {exc}"
            ) from exc
        if response.status != 200:
            try:
                body = await response.read()
            finally:
                response.release()
            error = ApiException(status=response.status, reason=response.reason)
            error.body = body.decode("utf-8", "replace")
            raise error
        self.streams += 1
        self._signal_open()
        return response

    def _event(self, raw: Any) -> WatchEvent | None:
        if not isinstance(raw, dict):
            raise StoreError(f"the watch of {self._info.plural} sent {raw!r}, not an event")
        kind = str(raw.get("type", ""))
        obj = raw.get("raw_object")
        if not isinstance(obj, dict):
            raise StoreError(f"the watch of {self._info.plural} sent an event without object")
        if kind == EventType.BOOKMARK:
            if not self._bookmarks:
                return None
            version = str((obj.get("metadata") or {}).get("resourceVersion", ""))
            return WatchEvent(
                EventType.BOOKMARK,
                {
                    "kind": obj.get("kind", self._info.kind),
                    "apiVersion": obj.get("apiVersion", self._info.api_version),
                    "metadata": {"resourceVersion": version},
                },
            )
        try:
            event_type = EventType(kind)
        except ValueError:
            raise StoreError(
                f"the watch of {self._info.plural} sent an event of type {kind!r}"
            ) from None
        return WatchEvent(event_type, _with_type(obj, self._info))
