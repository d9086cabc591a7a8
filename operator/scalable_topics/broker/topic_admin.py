"""The topic admin API (HTTP, JSON in camelCase) that ``stctl`` and the client's Admin use.

Every broker serves it from the store it already reads, so any broker will do:
``/admin/v1/topics[/{namespace}/{name}]`` creates, lists, describes and deletes topics,
``.../subscriptions[/{subscription}]`` declares and removes subscriptions, ``.../split`` and
``.../merge`` ask the topic's controller and wait for its answer, ``.../stats`` aggregates the
segments' stats from their brokers, ``.../load`` reports its autoscale state (topic_load.py).
docs/admin-api.md lists the routes and answers.

The ``admin_errors`` middleware authenticates every request (access.py); each route names the
action it needs on the topic's namespace (model/authorization.py).
Refusals are ``{"code": ..., "message": ...}`` with the wire protocol's error codes, plus three
codes that only this API answers with: ``AlreadyExists`` (409), ``OperationInProgress`` (409,
with the ``operation`` that holds the topic) and ``Timeout`` (504).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any, ClassVar

from aiohttp import web
from pydantic import BeforeValidator, Field

from ..admin.broker_admin import BrokerAdmin
from ..admin.errors import (
    SubscriptionBusy,
    SubscriptionExists,
    SubscriptionNotFound,
    SubscriptionUnreachable,
    UnreadableTopic,
)
from ..admin.runtime_subscriptions import read_broker_view
from ..admin.scale_requests import (
    OperationInProgress,
    RequestAbandoned,
    RequestTimedOut,
    request_scaling,
)
from ..admin.stats_gather import gather_topic_stats
from ..admin.topic_subscriptions import add_subscription, list_subscriptions, remove_subscription
from ..admin.topics import (
    create_topic,
    delete_topic,
    describe_topic,
    list_topics,
    topic_manifest,
)
from ..http_access import PRINCIPAL_KEY, Refusal, refusal_response, require
from ..http_sessions import admin_session
from ..model.authorization import Action
from ..model.errors import CorruptLayout, LayoutError
from ..model.layout import ChangeKind
from ..model.resources import OperationResult, subscription_count_problem
from ..protocol import ErrorCode
from ..store import AlreadyExists, NotFound, Store, StoreError
from ..store.informers import Informers
from .admin import TOKEN_KEY
from .admin_body import TOPIC_BODY_MAX_BYTES, AdminBody, B, BodyTooLarge, parse_body
from .topic_load import CLUSTER_AUTOSCALE_KEY, LOAD_HISTORY_LOCATION_KEY, NotReady, topic_load

STORE_KEY: web.AppKey[Store] = web.AppKey("topic_admin_store")
INFORMERS_KEY: web.AppKey[Informers] = web.AppKey("informers")
_BROKERS_KEY = web.AppKey("topic_admin_brokers", BrokerAdmin)
ALREADY_EXISTS = "AlreadyExists"  # not a wire ErrorCode: only this API creates things
TIMEOUT = "Timeout"
OPERATION_IN_PROGRESS = "OperationInProgress"
_MAX_WAIT_SECONDS = 600.0


class SubscriptionBody(AdminBody):
    name: str
    type: str = "Queue"


def _counted(subscriptions: object) -> object:
    """Counted before any is validated: past the limit, validating each is work for nothing
    (half of what the worst body within TOPIC_BODY_MAX_BYTES costs)."""
    if isinstance(subscriptions, list):
        problem = subscription_count_problem(len(subscriptions))
        if problem is not None:
            raise ValueError(problem)
    return subscriptions


class CreateTopic(AdminBody):
    MAX_BYTES: ClassVar[int] = TOPIC_BODY_MAX_BYTES

    initial_segments: int = 1
    subscriptions: Annotated[list[SubscriptionBody], BeforeValidator(_counted)] = Field(
        default_factory=list
    )
    properties: dict[str, str] = Field(default_factory=dict)
    retention: dict[str, int] | None = None
    auto_scale: dict[str, Any] | None = None  # validated as spec.autoScale


class CreateSubscription(AdminBody):
    type: str = "Queue"


class Split(AdminBody):
    segment: int = Field(ge=0)
    timeout_seconds: float = Field(default=60.0, gt=0, le=_MAX_WAIT_SECONDS)


class Merge(AdminBody):
    segments: list[int] = Field(min_length=2, max_length=2)
    timeout_seconds: float = Field(default=60.0, gt=0, le=_MAX_WAIT_SECONDS)


class _Refused(Exception):
    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.code, self.extra = status, code, extra


def _refusal(status: int, code: str, message: str, **extra: Any) -> web.Response:
    return web.json_response({"code": code, "message": message, **extra}, status=status)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _answering(handler: Handler, action: Action) -> Handler:
    """Check that the principal may ``action`` in the route's namespace, and turn what the
    admin functions raise into the API's refusals."""

    @functools.wraps(handler)
    async def answer(request: web.Request) -> web.StreamResponse:
        try:
            namespace = request.match_info.get("namespace") or request.query.get("namespace")
            if namespace:
                require(request, action, namespace)
            return await handler(request)
        except Refusal as refusal:
            return refusal_response(refusal)
        except _Refused as refused:
            return _refusal(refused.status, refused.code, str(refused), **refused.extra)
        except SubscriptionNotFound as error:
            return _refusal(404, ErrorCode.SUBSCRIPTION_NOT_FOUND.value, str(error))
        except NotFound as error:
            message = f"topic {error.namespace}/{error.name} not found"
            return _refusal(404, ErrorCode.TOPIC_NOT_FOUND.value, message)
        except SubscriptionBusy as error:
            return _refusal(409, ErrorCode.CONSUMER_BUSY.value, str(error))
        except SubscriptionUnreachable as error:
            return _refusal(503, ErrorCode.SERVICE_NOT_READY.value, str(error))
        except SubscriptionExists as error:
            return _refusal(409, ALREADY_EXISTS, str(error))
        except AlreadyExists as error:
            message = f"topic {error.namespace}/{error.name} already exists"
            return _refusal(409, ALREADY_EXISTS, message)
        except (CorruptLayout, UnreadableTopic) as error:  # stored data is at fault
            return _refusal(500, ErrorCode.INTERNAL_ERROR.value, str(error))
        except BodyTooLarge as error:
            return _refusal(413, ErrorCode.INVALID_REQUEST.value, str(error))
        except ValueError as error:
            return _refusal(400, ErrorCode.INVALID_REQUEST.value, str(error))
        except StoreError as error:
            return _refusal(503, ErrorCode.SERVICE_NOT_READY.value, f"the store failed: {error}")

    return answer


async def _body(request: web.Request, model: type[B]) -> B:
    raw = await request.read()  # from memory: body_timeout.py read it, within its deadline
    return parse_body(raw, model)


def _topic(request: web.Request) -> tuple[Store, str, str]:
    info = request.match_info
    return request.app[STORE_KEY], info["namespace"], info["name"]


async def list_topics_handler(request: web.Request) -> web.Response:
    namespace = request.query.get("namespace") or None
    summaries = await list_topics(request.app[STORE_KEY], namespace)
    # Of every namespace: those the principal may read (with a namespace, _answering checked).
    principal = request[PRINCIPAL_KEY]
    readable = [s for s in summaries if principal.may(Action.READ, s.namespace)]
    return web.json_response([s.to_dict() for s in readable])


async def create_topic_handler(request: web.Request) -> web.Response:
    store, namespace, name = _topic(request)
    body = await _body(request, CreateTopic)
    manifest = topic_manifest(
        namespace,
        name,
        body.initial_segments,
        [(s.name, s.type) for s in body.subscriptions],
        body.properties,
        body.retention,
        body.auto_scale,
    )
    await create_topic(store, manifest)
    description = await describe_topic(store, namespace, name)
    return web.json_response(description.to_dict(), status=201)


async def describe_topic_handler(request: web.Request) -> web.Response:
    store, namespace, name = _topic(request)
    view = await read_broker_view(store, request.app[_BROKERS_KEY], namespace, name)
    description = await describe_topic(store, namespace, name, view.subscriptions)
    return web.json_response(description.to_dict())


async def delete_topic_handler(request: web.Request) -> web.Response:
    # 202: the controller's finalizer deletes the segments, then the topic goes.
    return web.json_response((await delete_topic(*_topic(request))).to_dict(), status=202)


async def list_subscriptions_handler(request: web.Request) -> web.Response:
    listed = await list_subscriptions(*_topic(request), request.app[_BROKERS_KEY])
    return web.json_response(listed)


async def create_subscription_handler(request: web.Request) -> web.Response:
    store, namespace, name = _topic(request)
    body = await _body(request, CreateSubscription)
    subscription = request.match_info["subscription"]
    await add_subscription(store, namespace, name, subscription, body.type)
    return web.json_response({"name": subscription, "type": body.type}, status=201)


async def delete_subscription_handler(request: web.Request) -> web.Response:
    await remove_subscription(
        *_topic(request), request.match_info["subscription"], request.app[_BROKERS_KEY]
    )
    return web.Response(status=204)


async def _scale(
    request: web.Request, kind: ChangeKind, segments: tuple[int, ...], wait_seconds: float
) -> web.Response:
    store, namespace, name = _topic(request)
    try:
        last = await request_scaling(
            store,
            namespace,
            name,
            kind,
            segments,
            wait_seconds,
            request.app[INFORMERS_KEY].topics if INFORMERS_KEY in request.app else None,
        )
    except OperationInProgress as busy:
        raise _Refused(
            409, OPERATION_IN_PROGRESS, str(busy), operation=busy.occupant.to_dict()
        ) from None
    except (LayoutError, RequestAbandoned) as error:
        raise _Refused(409, ErrorCode.INVALID_REQUEST.value, str(error)) from None
    except RequestTimedOut as error:
        raise _Refused(504, TIMEOUT, str(error)) from None
    if last.result is not OperationResult.SUCCEEDED:
        raise _Refused(
            409,
            ErrorCode.INVALID_REQUEST.value,
            f"{last.result.value}: {last.message}",
            lastOperation=last.to_wire(),
        )
    return web.json_response(last.to_wire())


async def split_handler(request: web.Request) -> web.Response:
    body = await _body(request, Split)
    return await _scale(request, ChangeKind.SPLIT, (body.segment,), body.timeout_seconds)


async def merge_handler(request: web.Request) -> web.Response:
    body = await _body(request, Merge)
    return await _scale(request, ChangeKind.MERGE, tuple(body.segments), body.timeout_seconds)


async def stats_handler(request: web.Request) -> web.Response:
    store, namespace, name = _topic(request)
    stats = await gather_topic_stats(store, request.app[_BROKERS_KEY], namespace, name)
    return web.json_response(stats.to_dict())


async def load_handler(request: web.Request) -> web.Response:
    _, namespace, name = _topic(request)
    try:
        report = await topic_load(
            request.app[INFORMERS_KEY],
            request.app[CLUSTER_AUTOSCALE_KEY],
            request.app.get(LOAD_HISTORY_LOCATION_KEY),
            namespace,
            name,
        )
    except NotReady as error:
        raise _Refused(503, ErrorCode.SERVICE_NOT_READY.value, str(error)) from None
    return web.json_response(report)


def add_topic_routes(app: web.Application) -> None:
    """Register the routes; the application must set STORE_KEY, INFORMERS_KEY and
    CLUSTER_AUTOSCALE_KEY before serving (LOAD_HISTORY_LOCATION_KEY when it keeps a history)."""

    async def brokers(app: web.Application) -> AsyncIterator[None]:
        # Stats ask every segment's broker, with the cluster token this broker also requires.
        async with admin_session() as session:
            app[_BROKERS_KEY] = BrokerAdmin(session, app.get(TOKEN_KEY))
            yield

    app.cleanup_ctx.append(brokers)
    base = "/admin/v1/topics"
    one = base + "/{namespace}/{name}"
    subscription = one + "/subscriptions/{subscription}"
    # Reading needs any role on the namespace; changing topics and subscriptions needs admin.
    routes: list[tuple[str, str, Handler, Action]] = [
        ("GET", base, list_topics_handler, Action.READ),
        ("PUT", one, create_topic_handler, Action.ADMIN),
        ("GET", one, describe_topic_handler, Action.READ),
        ("DELETE", one, delete_topic_handler, Action.ADMIN),
        ("GET", one + "/subscriptions", list_subscriptions_handler, Action.READ),
        ("PUT", subscription, create_subscription_handler, Action.ADMIN),
        ("DELETE", subscription, delete_subscription_handler, Action.ADMIN),
        ("POST", one + "/split", split_handler, Action.ADMIN),
        ("POST", one + "/merge", merge_handler, Action.ADMIN),
        ("GET", one + "/stats", stats_handler, Action.READ),
        ("GET", one + "/load", load_handler, Action.READ),
    ]
    for method, path, handler, action in routes:
        app.router.add_route(method, path, _answering(handler, action))
