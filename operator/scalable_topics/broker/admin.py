"""The segment admin API (HTTP, JSON) that the controller drives, plus health.

``/admin/v1/segments/{namespace}/{topic}/{descriptor}``: PUT creates (idempotent), DELETE
deletes, ``.../terminate`` seals and returns the last entry id, ``.../fence`` raises the
producer epoch and reserves the segment for the topic-wide exclusive holder (with ``ifFree``,
only while no producer of another name is connected: 409 ProducerBusy naming them otherwise),
``.../release`` clears a reservation without raising the epoch, ``.../producers`` lists the
connected producers, ``.../stats`` reports, ``.../subscriptions[/{name}]`` lists, creates and
deletes subscriptions. Errors are JSON ``{"code": ..., "message": ...}`` with the wire
protocol's error codes, so the controller can tell "already gone" (404) from a failure.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import ClassVar

from aiohttp import web
from pydantic import Field

from ..model.resources import (
    MAX_SEGMENT_SUBSCRIPTIONS,
    namespace_problem,
    subscription_name_problem,
    topic_name_problem,
)
from ..protocol import ErrorCode, InitialPosition
from ..protocol.limits import MAX_PRODUCER_EPOCH
from .admin_body import (
    SEGMENT_BODY_MAX_BYTES,
    AdminBody,
    B,
    BodyTooLarge,
    ProducerName,
    SubscriptionName,
    parse_body,
)
from .errors import BrokerError
from .registry import SegmentRegistry
from .segment import BrokerFull, HostedSegment, SegmentBusy, SegmentError

_STATUS = {
    ErrorCode.SEGMENT_NOT_FOUND: 404,
    ErrorCode.SUBSCRIPTION_NOT_FOUND: 404,
    ErrorCode.INVALID_REQUEST: 400,
    ErrorCode.NOT_AUTHORIZED: 403,
    ErrorCode.AUTHENTICATION_FAILED: 401,
    ErrorCode.SERVICE_NOT_READY: 503,
    ErrorCode.INTERNAL_ERROR: 500,
}
REGISTRY_KEY = web.AppKey("segment_registry", SegmentRegistry)
BROKER_FULL = "BrokerFull"  # a code of this API only: no client ever creates a segment
TOKEN_KEY = web.AppKey("admin_token", str)


class Retention(AdminBody):
    max_size_bytes: int | None = Field(default=None, ge=0)
    max_age_seconds: int | None = Field(default=None, ge=0)


class CreateSegment(AdminBody):
    MAX_BYTES: ClassVar[int] = SEGMENT_BODY_MAX_BYTES

    parents: list[int] = Field(default_factory=list, max_length=2)
    subscriptions: list[SubscriptionName] = Field(
        default_factory=list, max_length=MAX_SEGMENT_SUBSCRIPTIONS
    )
    producer_epoch: int = Field(default=0, ge=0, le=MAX_PRODUCER_EPOCH)
    # The topic-wide exclusive holder it is reserved for.
    producer_holder: ProducerName | None = None
    retention: Retention | None = None


class Fence(AdminBody):
    epoch: int = Field(ge=0, le=MAX_PRODUCER_EPOCH)
    holder: ProducerName | None = None  # reserve the segment for this holder; None: no reservation
    if_free: bool = False  # only while no producer of another name is connected


class Release(AdminBody):
    epoch: int = Field(
        ge=0, le=MAX_PRODUCER_EPOCH
    )  # the grant that ended: reservations made at it or before go


class CreateSubscription(AdminBody):
    initial_position: InitialPosition = InitialPosition.EARLIEST


def _error(code: ErrorCode, message: str) -> web.Response:
    return web.json_response(
        {"code": code.value, "message": message}, status=_STATUS.get(code, 409)
    )


async def _body(request: web.Request, model: type[B]) -> B:
    raw = await request.read()  # from memory: body_timeout.py read it, within its deadline
    try:
        return parse_body(raw, model)
    except BodyTooLarge:
        raise
    except ValueError as error:
        raise SegmentError(ErrorCode.INVALID_REQUEST, str(error)) from None


def _names(request: web.Request, *, subscription: bool = False) -> None:
    """The names of what a route would create, by the rules of every other surface
    (model/resources.py): InvalidRequest naming the one that breaks them, before anything is
    made. A route that only looks up finds nothing by another name (404), so that deleting
    what could never have been made is "already gone"."""
    info = request.match_info
    problems = [
        ("namespace", namespace_problem(info["namespace"])),
        ("topic", topic_name_problem(info["topic"])),
    ]
    if subscription:
        problems.append(("subscription", subscription_name_problem(info["subscription"])))
    for field, problem in problems:
        if problem is not None:
            raise SegmentError(ErrorCode.INVALID_REQUEST, f"invalid request: {field}: {problem}")


def _segment(request: web.Request) -> HostedSegment:
    info = request.match_info
    return request.app[REGISTRY_KEY].by_descriptor(
        info["namespace"], info["topic"], info["descriptor"]
    )


async def list_segments(request: web.Request) -> web.Response:
    return web.json_response(
        [
            {
                "namespace": s.key.namespace,
                "topic": s.key.topic,
                "descriptor": s.meta.descriptor,
                "state": "Terminated" if s.sealed else "Active",
                "lastEntryId": s.last_entry_id,
            }
            for s in request.app[REGISTRY_KEY]
        ]
    )


async def create_segment(request: web.Request) -> web.Response:
    _names(request)
    body = await _body(request, CreateSegment)
    info = request.match_info
    retention = body.retention or Retention()
    segment, created = await request.app[REGISTRY_KEY].create(
        info["namespace"],
        info["topic"],
        info["descriptor"],
        tuple(body.parents),
        body.subscriptions,
        body.producer_epoch,
        (retention.max_size_bytes, retention.max_age_seconds),
        holder=body.producer_holder,
    )
    return web.json_response(segment.stats(), status=201 if created else 200)


async def delete_segment(request: web.Request) -> web.Response:
    await request.app[REGISTRY_KEY].delete(_segment(request))
    return web.Response(status=204)


async def terminate_segment(request: web.Request) -> web.Response:
    return web.json_response({"lastEntryId": await _segment(request).terminate()})


async def fence_segment(request: web.Request) -> web.Response:
    body = await _body(request, Fence)
    try:
        epoch = await _segment(request).fence(body.epoch, body.holder, if_free=body.if_free)
    except SegmentBusy as busy:
        return web.json_response(
            {"code": busy.code.value, "message": str(busy), "producers": busy.producers},
            status=_STATUS.get(busy.code, 409),
        )
    return web.json_response({"producerEpoch": epoch})


async def release_segment(request: web.Request) -> web.Response:
    body = await _body(request, Release)
    return web.json_response({"producerEpoch": await _segment(request).release(body.epoch)})


async def segment_producers(request: web.Request) -> web.Response:
    return web.json_response(_segment(request).producer_names())


async def segment_stats(request: web.Request) -> web.Response:
    return web.json_response(_segment(request).stats())


async def list_subscriptions(request: web.Request) -> web.Response:
    return web.json_response(sorted(_segment(request).subscriptions))


async def create_subscription(request: web.Request) -> web.Response:
    _names(request, subscription=True)
    body = await _body(request, CreateSubscription)
    segment = _segment(request)
    name = request.match_info["subscription"]
    existed = name in segment.subscriptions
    await segment.create_subscription(name, body.initial_position)
    return web.json_response({"subscription": name}, status=200 if existed else 201)


async def delete_subscription(request: web.Request) -> web.Response:
    segment = _segment(request)
    name = request.match_info["subscription"]
    if not await segment.delete_subscription(name):
        return _error(
            ErrorCode.SUBSCRIPTION_NOT_FOUND, f"segment {segment.key} has no subscription {name!r}"
        )
    return web.Response(status=204)


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def admin_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except BrokerFull as error:
        return web.json_response({"code": BROKER_FULL, "message": str(error)}, status=507)
    except BodyTooLarge as error:
        return web.json_response(
            {"code": ErrorCode.INVALID_REQUEST.value, "message": str(error)}, status=413
        )
    except BrokerError as error:
        return _error(error.code, str(error))


def add_routes(app: web.Application) -> None:
    base = "/admin/v1/segments"
    one = base + "/{namespace}/{topic}/{descriptor}"
    app.router.add_get(base, list_segments)
    app.router.add_put(one, create_segment)
    app.router.add_delete(one, delete_segment)
    app.router.add_post(one + "/terminate", terminate_segment)
    app.router.add_post(one + "/fence", fence_segment)
    app.router.add_post(one + "/release", release_segment)
    app.router.add_get(one + "/producers", segment_producers)
    app.router.add_get(one + "/stats", segment_stats)
    app.router.add_get(one + "/subscriptions", list_subscriptions)
    app.router.add_put(one + "/subscriptions/{subscription}", create_subscription)
    app.router.add_delete(one + "/subscriptions/{subscription}", delete_subscription)
    app.router.add_get("/healthz", healthz)
