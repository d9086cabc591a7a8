"""The API server's verbs on one resource, over the store port, with its semantics.

Every write reads the stored object, computes the new one (patch, status rules, admission) and
stores it with a compare-and-swap on the resourceVersion read, as the API server's
GuaranteedUpdate does: a request without a precondition of its own is retried on a conflict, one
with a precondition (a resourceVersion in the body, a JSON patch ``test``) answers 409 or 422.
HTTP is not here: the server parses requests into these calls and renders what they return.
"""

from __future__ import annotations

import builtins
import copy
import secrets
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from ..model.timefmt import format_time
from ..store import (
    AlreadyExists,
    Conflict,
    EventType,
    Expired,
    Invalid,
    NotFound,
    Store,
    StoreError,
    Watch,
    parse_selector,
)
from .admission import Admitted, FieldValidation
from .field_selectors import FieldSelector
from .object_meta import metadata_causes
from .pagination import ListPager, Page
from .patches import apply_patch
from .registry import Registry
from .resources import ResourceType
from .status import ApiError, Cause, CauseType, Reason, invalid

Object = dict[str, Any]

GUARANTEED_UPDATE_ATTEMPTS = 8
GENERATE_NAME_ATTEMPTS = 8
_GENERATED_CHARS = "bcdfghjklmnpqrstvwxz2456789"
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
TERMINATING = "Terminating"
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


class Admission(Protocol):
    """Schema defaulting, pruning and validation of one object (old is the stored one)."""

    def __call__(
        self,
        resource: ResourceType,
        new: Object,
        old: Object | None,
        field_validation: FieldValidation,
    ) -> Admitted: ...


@dataclass(frozen=True, slots=True)
class Written:
    object: Object
    warnings: tuple[str, ...] = ()
    created: bool = False


@dataclass(frozen=True, slots=True)
class Deleted:
    object: Object
    removed: bool  # False: finalizers hold it, marked for deletion


@dataclass(frozen=True, slots=True)
class WatchItem:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
    object: Object


class Operations:
    def __init__(
        self,
        store: Store,
        registry: Registry,
        admission: Admission,
        *,
        pager: ListPager | None = None,
        new_suffix: Callable[[], str] | None = None,
    ) -> None:
        self.store = store
        self.registry = registry
        self._admission = admission
        self._pager = pager or ListPager()
        self._new_suffix = new_suffix or _random_suffix

    # -- reads -----------------------------------------------------------------------------

    async def get(self, resource: ResourceType, namespace: str | None, name: str) -> Object:
        try:
            stored = await self.store.get(resource.stored_as, namespace or "", name)
        except StoreError as exc:
            raise self._store_error(resource, name, exc) from exc
        return self.registry.from_storage(resource, stored)

    async def list(
        self,
        resource: ResourceType,
        namespace: str | None,
        *,
        label_selector: str | None,
        field_selector: FieldSelector,
        limit: int = 0,
        continue_token: str | None = None,
    ) -> Page:
        check_label_selector(label_selector)
        if continue_token:
            return self._pager.next_page(continue_token, limit)
        try:
            revision, items = await self._listed(
                resource, namespace, label_selector, field_selector
            )
        except StoreError as exc:
            raise self._store_error(resource, None, exc) from exc
        return self._pager.first_page(items, revision, limit)

    async def _listed(
        self,
        resource: ResourceType,
        namespace: str | None,
        label_selector: str | None,
        field_selector: FieldSelector,
    ) -> tuple[str, builtins.list[Object]]:
        """The store's revision and the objects it holds that the selectors pick, served."""
        namespace = field_selector.value_of("metadata.namespace") or namespace
        found = await self.store.list(resource.stored_as, namespace, label_selector)
        served = (self.registry.from_storage(resource, obj) for obj in found.items)
        return found.resource_version, [obj for obj in served if field_selector.matches(obj)]

    async def watch(
        self,
        resource: ResourceType,
        namespace: str | None,
        *,
        resource_version: str | None,
        label_selector: str | None,
        field_selector: FieldSelector,
        allow_bookmarks: bool,
        send_initial_events: bool = False,
    ) -> WatchStream:
        """Open a watch (bad parameters raise here, before any answer is sent). With
        ``send_initial_events`` (a watch-list, what kubectl wait asks for) the stream starts
        with an ADDED event per object, then a BOOKMARK marking their end."""
        check_label_selector(label_selector)
        namespace = field_selector.value_of("metadata.namespace") or namespace
        start = None if resource_version in (None, "", "0") else resource_version
        initial: list[Object] | None = None
        try:
            if send_initial_events:
                if start is not None:
                    raise ApiError(
                        400,
                        Reason.BAD_REQUEST,
                        "sendInitialEvents is served only without a resourceVersion (or 0)",
                    )
                start, initial = await self._listed(
                    resource, namespace, label_selector, field_selector
                )
            watch = self.store.watch(
                resource.stored_as,
                namespace,
                start,
                label_selector,
                allow_bookmarks=allow_bookmarks,
            )
        except Invalid as exc:
            raise ApiError(400, Reason.BAD_REQUEST, str(exc)) from exc
        except StoreError as exc:
            raise store_error(resource, None, exc) from exc
        return WatchStream(self.registry, resource, watch, field_selector, initial, start)

    # -- writes ----------------------------------------------------------------------------

    async def create(
        self,
        resource: ResourceType,
        namespace: str | None,
        body: Object,
        field_validation: FieldValidation,
        *,
        dry_run: bool = False,
    ) -> Written:
        self._check_identity(resource, body, namespace, None)
        if resource.namespaced:
            await self._check_namespace_open(resource, body, namespace or "")
        meta = body.setdefault("metadata", {})
        generate = not meta.get("name")
        for _attempt in range(GENERATE_NAME_ATTEMPTS if generate else 1):
            obj = copy.deepcopy(body)
            if generate:
                prefix = meta.get("generateName")
                if not prefix:
                    raise invalid(
                        resource.kind,
                        "",
                        resource.group,
                        [
                            Cause(
                                CauseType.REQUIRED,
                                "metadata.name",
                                "Required value: name or generateName is required",
                            )
                        ],
                    )
                obj["metadata"]["name"] = f"{prefix}{self._new_suffix()}"
            if resource.status_subresource:
                obj.pop("status", None)
            if obj["metadata"].get("resourceVersion"):
                # kube-apiserver's words (and status) for it, from its storage layer.
                raise ApiError(
                    500,
                    Reason.INTERNAL_ERROR,
                    "resourceVersion should not be set on objects to be created",
                )
            for field in ("uid", "creationTimestamp", "deletionTimestamp"):
                obj["metadata"].pop(field, None)
            admitted = self._admit(resource, obj, None, field_validation)
            if dry_run:
                return await self._dry_create(resource, admitted)
            try:
                stored = await self.store.create(
                    self.registry.to_storage(resource, admitted.object)
                )
            except AlreadyExists as exc:
                if generate:
                    continue
                raise self._store_error(resource, obj["metadata"]["name"], exc) from exc
            except StoreError as exc:
                raise self._store_error(resource, obj["metadata"]["name"], exc) from exc
            return Written(self.registry.from_storage(resource, stored), admitted.warnings, True)
        raise ApiError(
            500,
            Reason.INTERNAL_ERROR,
            f"could not find a free name for generateName {meta.get('generateName')!r}",
        )

    async def update(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        body: Object,
        field_validation: FieldValidation,
        *,
        status: bool = False,
        dry_run: bool = False,
    ) -> Written:
        """PUT: replace the object (or, with ``status``, its status) with ``body``."""
        self._check_identity(resource, body, namespace, name)
        precondition = body.get("metadata", {}).get("resourceVersion") or None

        def change(stored: Object) -> Object:
            return copy.deepcopy(body)

        return await self._guaranteed_update(
            resource,
            namespace,
            name,
            change,
            precondition,
            field_validation,
            status=status,
            dry_run=dry_run,
        )

    async def patch(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        body: bytes,
        content_type: str,
        field_validation: FieldValidation,
        *,
        status: bool = False,
        builtin: bool = False,
        dry_run: bool = False,
    ) -> Written:
        def change(stored: Object) -> Object:
            patched = apply_patch(
                stored,
                body,
                content_type,
                builtin=builtin,
                kind=resource.kind,
                name=name,
                group=resource.group,
            )
            if not isinstance(patched, dict):
                raise ApiError(422, Reason.INVALID, "the patch does not leave an object")
            return patched

        return await self._guaranteed_update(
            resource,
            namespace,
            name,
            change,
            None,
            field_validation,
            status=status,
            patch=True,
            dry_run=dry_run,
        )

    async def delete(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        *,
        resource_version: str | None = None,
        uid: str | None = None,
        propagation: str | None = None,
        dry_run: bool = False,
    ) -> Deleted:
        ns = namespace or ""
        if dry_run:
            return await self._dry_delete(resource, ns, name, resource_version, uid)
        if resource.stored_as == "Namespace":
            return await self._terminate_namespace(resource, name)
        try:
            if uid is not None:
                stored = await self.store.get(resource.stored_as, ns, name)
                if stored["metadata"].get("uid") != uid:
                    raise ApiError(
                        409,
                        Reason.CONFLICT,
                        f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                        f"{stored['metadata'].get('uid')}",
                        kind=resource.plural,
                        name=name,
                        group=resource.group,
                    )
            if propagation in ("Orphan", "Foreground"):
                await self._add_deletion_finalizer(resource, ns, name, propagation)
            result = await self.store.delete(resource.stored_as, ns, name, resource_version)
        except StoreError as exc:
            raise self._store_error(resource, name, exc) from exc
        removed = "deletionTimestamp" not in result["metadata"] or not result["metadata"].get(
            "finalizers"
        )
        return Deleted(self.registry.from_storage(resource, result), removed)

    # -- dry runs: every check a write makes, and what it would answer, without writing ----

    async def _dry_create(self, resource: ResourceType, admitted: Admitted) -> Written:
        obj = copy.deepcopy(admitted.object)
        meta = obj["metadata"]
        try:
            await self.store.get(resource.stored_as, meta.get("namespace", ""), meta["name"])
        except NotFound:
            pass
        else:
            identity = (resource.stored_as, meta.get("namespace", ""), meta["name"])
            raise self._store_error(resource, meta["name"], AlreadyExists(*identity))
        meta.update(
            uid=str(uuid.uuid4()),
            creationTimestamp=format_time(datetime.now(UTC)),
            generation=1,
        )
        return Written(obj, admitted.warnings, True)

    @staticmethod
    def _dry_update(resource: ResourceType, current: Object, admitted: Admitted) -> Written:
        obj = copy.deepcopy(admitted.object)
        meta, before = obj["metadata"], current["metadata"]
        if before["resourceVersion"] != meta.get("resourceVersion"):
            identity = (resource.stored_as, before.get("namespace", ""), before["name"])
            conflict = Conflict(
                *identity, meta.get("resourceVersion", ""), before["resourceVersion"]
            )
            raise store_error(resource, before["name"], conflict)
        for field in ("uid", "creationTimestamp", "deletionTimestamp", "generation"):
            if field in before:
                meta[field] = before[field]
        if obj.get("spec") != current.get("spec"):
            meta["generation"] = before.get("generation", 0) + 1
        return Written(obj, admitted.warnings)

    async def _dry_delete(
        self,
        resource: ResourceType,
        namespace: str,
        name: str,
        resource_version: str | None,
        uid: str | None,
    ) -> Deleted:
        try:
            stored = await self.store.get(resource.stored_as, namespace, name)
        except StoreError as exc:
            raise self._store_error(resource, name, exc) from exc
        meta = stored["metadata"]
        if (uid is not None and meta.get("uid") != uid) or (
            resource_version is not None and meta["resourceVersion"] != resource_version
        ):
            raise ApiError(
                409,
                Reason.CONFLICT,
                f'Operation cannot be fulfilled on {_resource_name(resource)} "{name}": '
                "the precondition does not hold",
                kind=resource.plural,
                name=name,
                group=resource.group,
            )
        obj = self.registry.from_storage(resource, stored)
        if not meta.get("finalizers"):
            return Deleted(obj, removed=True)
        obj["metadata"].setdefault("deletionTimestamp", format_time(datetime.now(UTC)))
        return Deleted(obj, removed=False)

    async def _terminate_namespace(self, resource: ResourceType, name: str) -> Deleted:
        """A Namespace goes in phase Terminating; the collector deletes what is in it, then
        the Namespace itself."""
        try:
            stored = await self.store.get("Namespace", "", name)
            if (stored.get("status") or {}).get("phase") != TERMINATING:
                stored = await self.store.patch_status(
                    "Namespace", "", name, {"status": {"phase": TERMINATING}}
                )
        except StoreError as exc:
            raise self._store_error(resource, name, exc) from exc
        return Deleted(self.registry.from_storage(resource, stored), removed=False)

    async def _add_deletion_finalizer(
        self, resource: ResourceType, namespace: str, name: str, propagation: str
    ) -> None:
        finalizer = "orphan" if propagation == "Orphan" else "foregroundDeletion"
        for _attempt in range(GUARANTEED_UPDATE_ATTEMPTS):
            stored = await self.store.get(resource.stored_as, namespace, name)
            meta = stored["metadata"]
            if "deletionTimestamp" in meta or finalizer in (meta.get("finalizers") or []):
                return
            meta["finalizers"] = [*(meta.get("finalizers") or []), finalizer]
            try:
                await self.store.replace(stored)
                return
            except Conflict:
                continue

    # -- helpers ---------------------------------------------------------------------------

    async def _guaranteed_update(
        self,
        resource: ResourceType,
        namespace: str | None,
        name: str,
        change: Callable[[Object], Object],
        precondition: str | None,
        field_validation: FieldValidation,
        *,
        status: bool,
        patch: bool = False,
        dry_run: bool = False,
    ) -> Written:
        if status and not resource.status_subresource:
            raise ApiError(404, Reason.NOT_FOUND, f"{resource.plural} has no status subresource")
        ns = namespace or ""
        for _attempt in range(GUARANTEED_UPDATE_ATTEMPTS):
            try:
                stored = await self.store.get(resource.stored_as, ns, name)
            except StoreError as exc:
                raise self._store_error(resource, name, exc) from exc
            current = self.registry.from_storage(resource, stored)
            new = change(copy.deepcopy(current))
            if patch:
                # A resourceVersion the patch sets is its precondition.
                requested = new.get("metadata", {}).get("resourceVersion")
                if requested and requested != current["metadata"]["resourceVersion"]:
                    precondition = requested
                self._check_identity(resource, new, namespace, name)
            new = self._shape(resource, current, new, status=status)
            new["metadata"]["resourceVersion"] = (
                precondition or stored["metadata"]["resourceVersion"]
            )
            admitted = self._admit(resource, new, current, field_validation)
            if dry_run:
                return self._dry_update(resource, current, admitted)
            to_store = self.registry.to_storage(resource, admitted.object)
            try:
                if status:
                    written = await self.store.replace_status(to_store)
                else:
                    written = await self.store.replace(to_store)
            except Conflict as exc:
                if precondition is not None:
                    raise self._store_error(resource, name, exc) from exc
                continue
            except StoreError as exc:
                raise self._store_error(resource, name, exc) from exc
            return Written(self.registry.from_storage(resource, written), admitted.warnings)
        raise ApiError(
            409,
            Reason.CONFLICT,
            f'Operation cannot be fulfilled on {_resource_name(resource)} "{name}": the object '
            "kept changing; please try again",
            kind=resource.plural,
            name=name,
            group=resource.group,
        )

    @staticmethod
    def _shape(resource: ResourceType, current: Object, new: Object, *, status: bool) -> Object:
        """What a write may change: the main resource ignores status, /status ignores the rest
        (metadata included, but labels and annotations, as the API server allows)."""
        if status:
            shaped = copy.deepcopy(current)
            if "status" in new:
                shaped["status"] = new["status"]
            else:
                shaped.pop("status", None)
            return shaped
        if resource.status_subresource:
            new.pop("status", None)
            if "status" in current:
                new["status"] = copy.deepcopy(current["status"])
        return new

    def _admit(
        self,
        resource: ResourceType,
        new: Object,
        old: Object | None,
        field_validation: FieldValidation,
    ) -> Admitted:
        meta = new.get("metadata")
        if not isinstance(meta, dict):
            raise ApiError(400, Reason.BAD_REQUEST, "metadata must be an object")
        causes: list[Cause] = metadata_causes(meta, dns_label_name=resource.kind == "Namespace")
        if old is not None and "deletionTimestamp" in old["metadata"]:
            added = set(meta.get("finalizers") or []) - set(old["metadata"].get("finalizers") or [])
            if added:
                causes.append(
                    Cause(
                        CauseType.FORBIDDEN,
                        "metadata.finalizers",
                        f"Forbidden: no new finalizers can be added if the object is being "
                        f"deleted, found new finalizers {sorted(added)}",
                    )
                )
        admitted = Admitted(new, ())
        try:
            admitted = self._admission(resource, new, old, field_validation)
        except ApiError as exc:
            if exc.code != 422 or not causes:
                raise
            causes = [*causes, *exc.causes]
        if causes:
            raise invalid(resource.kind, meta.get("name", ""), resource.group, causes)
        return admitted

    @staticmethod
    def _check_identity(
        resource: ResourceType, body: Object, namespace: str | None, name: str | None
    ) -> None:
        if not isinstance(body, dict):
            raise ApiError(400, Reason.BAD_REQUEST, "the request body must be a JSON object")
        api_version, kind = body.get("apiVersion"), body.get("kind")
        if not kind:
            raise ApiError(400, Reason.BAD_REQUEST, "Object 'Kind' is missing in the request")
        if kind != resource.kind or api_version != resource.api_version:
            raise ApiError(
                400,
                Reason.BAD_REQUEST,
                f"the API version in the data ({api_version}) and kind ({kind}) do not match "
                f"the resource {resource.api_version}, Kind={resource.kind}",
            )
        meta = body.get("metadata")
        if meta is None:
            meta = body["metadata"] = {}
        if not isinstance(meta, dict):
            raise ApiError(400, Reason.BAD_REQUEST, "metadata must be an object")
        if resource.namespaced:
            given = meta.get("namespace")
            if given and namespace and given != namespace:
                raise ApiError(
                    400,
                    Reason.BAD_REQUEST,
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request",
                )
            if not namespace:
                raise ApiError(
                    400, Reason.BAD_REQUEST, f"{resource.plural} are namespaced: name a namespace"
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if name is not None:
            given_name = meta.get("name")
            if given_name and given_name != name:
                raise ApiError(
                    400,
                    Reason.BAD_REQUEST,
                    f"the name of the object ({given_name}) does not match the name on the URL "
                    f"({name})",
                )
            meta["name"] = name

    async def _check_namespace_open(
        self, resource: ResourceType, body: Object, namespace: str
    ) -> None:
        try:
            found = await self.store.get("Namespace", "", namespace)
        except NotFound as exc:
            raise ApiError(
                404,
                Reason.NOT_FOUND,
                f'namespaces "{namespace}" not found',
                kind="namespaces",
                name=namespace,
            ) from exc
        except StoreError as exc:
            raise ApiError(500, Reason.INTERNAL_ERROR, str(exc)) from exc
        if (found.get("status") or {}).get("phase") == TERMINATING:
            name = body.get("metadata", {}).get("name") or ""
            raise ApiError(
                403,
                Reason.FORBIDDEN,
                f'{_resource_name(resource)} "{name}" is forbidden: unable to create new '
                f"content in namespace {namespace} because it is being terminated",
                kind=resource.plural,
                name=name,
                group=resource.group,
            )

    @staticmethod
    def _store_error(resource: ResourceType, name: str | None, exc: StoreError) -> ApiError:
        return store_error(resource, name, exc)


class WatchStream:
    """A watch's events as the API server sends them; a history that is gone ends it with an
    ERROR event carrying a 410 Expired Status, as the API server does mid-stream."""

    def __init__(
        self,
        registry: Registry,
        resource: ResourceType,
        watch: Watch,
        selector: FieldSelector,
        initial: list[Object] | None = None,
        initial_version: str | None = None,
    ) -> None:
        self._registry = registry
        self._resource = resource
        self._watch = watch
        self._selector = selector
        self._initial = initial
        self._initial_version = initial_version

    async def aclose(self) -> None:
        await self._watch.aclose()

    async def __aenter__(self) -> WatchStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def __aiter__(self) -> AsyncIterator[WatchItem]:
        resource = self._resource
        if self._initial is not None:
            for obj in self._initial:
                yield WatchItem("ADDED", obj)
            end = {
                "apiVersion": resource.api_version,
                "kind": resource.kind,
                "metadata": {
                    "resourceVersion": self._initial_version,
                    "annotations": {INITIAL_EVENTS_END: "true"},
                },
            }
            yield WatchItem("BOOKMARK", end)
        try:
            async for event in self._watch:
                if event.type is EventType.BOOKMARK:
                    bookmark = copy.deepcopy(event.object)
                    bookmark["apiVersion"] = resource.api_version
                    bookmark["kind"] = resource.kind
                    yield WatchItem(event.type.value, bookmark)
                    continue
                obj = self._registry.from_storage(resource, event.object)
                if self._selector.matches(obj):
                    yield WatchItem(event.type.value, obj)
        except Expired as exc:
            gone = ApiError(
                410,
                Reason.EXPIRED,
                f"too old resource version: {exc.resource_version} ({exc.oldest})",
            )
            yield WatchItem("ERROR", gone.status())
        except StoreError as exc:
            failed = ApiError(500, Reason.INTERNAL_ERROR, f"the watch failed: {exc}")
            yield WatchItem("ERROR", failed.status())


def check_label_selector(text: str | None) -> None:
    """400 for a label selector that does not parse, as the API server answers."""
    try:
        parse_selector(text)
    except Invalid as exc:
        raise ApiError(400, Reason.BAD_REQUEST, f"unable to parse requirement: {exc}") from exc


def store_error(resource: ResourceType, name: str | None, exc: StoreError) -> ApiError:
    """The Status the API server answers for a store error about ``resource``."""
    qualified = _resource_name(resource)
    details: dict[str, Any] = {"kind": resource.plural, "name": name, "group": resource.group}
    if isinstance(exc, NotFound):
        return ApiError(404, Reason.NOT_FOUND, f'{qualified} "{name}" not found', **details)
    if isinstance(exc, AlreadyExists):
        return ApiError(
            409, Reason.ALREADY_EXISTS, f'{qualified} "{name}" already exists', **details
        )
    if isinstance(exc, Conflict):
        return ApiError(
            409,
            Reason.CONFLICT,
            f'Operation cannot be fulfilled on {qualified} "{name}": the object has been '
            "modified; please apply your changes to the latest version and try again",
            **details,
        )
    if isinstance(exc, Expired):
        return ApiError(410, Reason.EXPIRED, str(exc))
    if isinstance(exc, Invalid):
        return ApiError(
            422,
            Reason.INVALID,
            f'{resource.kind} "{name}" is invalid: {exc}',
            causes=[Cause(CauseType.INVALID, "", str(exc))],
            **details,
        )
    return ApiError(500, Reason.INTERNAL_ERROR, f"the store failed: {exc}")


def _resource_name(resource: ResourceType) -> str:
    return f"{resource.plural}.{resource.group}" if resource.group else resource.plural


def _random_suffix() -> str:
    return "".join(secrets.choice(_GENERATED_CHARS) for _ in range(5))
