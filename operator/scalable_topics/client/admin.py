"""Topic administration over the brokers' topic admin API (docs/admin-api.md).

Any broker serves the API from the store, so the Admin asks the first broker of the service
URL and moves on to the next only when one cannot be reached: the request was never sent, so
trying another cannot apply it twice.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, cast
from urllib.parse import quote

import aiohttp

from ..http_sessions import admin_session
from ..model.resources import subscription_count_problem, subscription_name_problem
from ..protocol import ErrorCode
from .admin_types import (
    DeclaredSubscription,
    Operation,
    SubscriptionDescription,
    TopicDescription,
    TopicSummary,
)
from .client_settings import ClientSettings
from .connect_errors import connect_failure
from .errors import (
    AlreadyExists,
    AuthenticationFailed,
    ClientClosed,
    ClientError,
    ConnectionFailed,
    ConsumerBusy,
    InvalidRequest,
    NotAuthorized,
    NotFound,
    OperationInProgress,
    ServerError,
    Timeout,
)
from .names import check_subscription_name, checked_topic
from .topic_layout import qualified_topic

DEFAULT_CONNECT_TIMEOUT = 5.0  # the Client's too

_REQUEST_SECONDS = 30.0
# A split or merge answer comes after the controller's; the HTTP wait covers it with room.
_SCALING_SLACK_SECONDS = 30.0
_BY_STATUS: Mapping[int, type[ClientError]] = {
    400: InvalidRequest,
    401: AuthenticationFailed,
    403: NotAuthorized,
    404: NotFound,
    408: Timeout,  # the request body did not arrive in time (a broker's --body-timeout)
    504: Timeout,
}


def admin_urls(service_url: str) -> tuple[str, ...]:
    """The HTTP bases of ``service_url``: comma-separated ws://, wss://, http:// or https://
    URLs, WebSocket ones mapped to their HTTP(S) form."""
    return tuple(_as_given(service_url))


def _as_given(service_url: str) -> dict[str, str]:
    """Each HTTP base of ``service_url`` -> the URL as given (what messages name)."""
    urls = {}
    for given in (part.strip().rstrip("/") for part in service_url.split(",")):
        if not given:
            continue
        url = given
        for websocket, http in (("ws://", "http://"), ("wss://", "https://")):
            if url.startswith(websocket):
                url = http + url.removeprefix(websocket)
        if not url.startswith(("http://", "https://")) or not url.split("://", 1)[1]:
            raise ValueError(f"a broker URL looks like ws://HOST:PORT, not {url!r}")
        urls[url] = given
    if not urls:
        raise ValueError("the service URL names no broker, e.g. ws://127.0.0.1:6650")
    return urls


def topic_path(topic: str) -> str:
    namespace, name = qualified_topic(topic).split("/")
    return f"/admin/v1/topics/{quote(namespace, safe='')}/{quote(name, safe='')}"


def _refusal(status: int, payload: Any, fallback: str) -> ClientError:
    body = payload if isinstance(payload, dict) else {}
    code_text = str(body.get("code", ""))
    message = str(body.get("message") or fallback)
    try:
        code: ErrorCode | None = ErrorCode(code_text)
    except ValueError:  # AlreadyExists, OperationInProgress and Timeout are this API's own
        code = None
    if code_text == "AlreadyExists":
        return AlreadyExists(message)
    if code_text == "OperationInProgress":
        operation = body.get("operation")
        return OperationInProgress(message, operation if isinstance(operation, dict) else None)
    if code is ErrorCode.CONSUMER_BUSY:
        return ConsumerBusy(message, code)
    if status == 409:
        return InvalidRequest(message, code)
    kind = _BY_STATUS.get(status, ServerError if status >= 500 else InvalidRequest)
    return kind(message, code)


class Admin:
    def __init__(
        self,
        service_url: str,
        auth_token: str | None = None,
        *,
        http: aiohttp.ClientSession | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    ) -> None:
        """``connect_timeout``: seconds connecting to a broker (TCP, TLS) may take before the
        next URL is tried; ConnectionFailed, naming each URL and why, when none can be."""
        if connect_timeout <= 0:
            raise ValueError("connect_timeout must be positive (seconds)")
        self._given = _as_given(service_url)
        self.urls = tuple(self._given)
        self._connect_timeout = connect_timeout
        self._headers = {"Authorization": f"Bearer {auth_token}"} if auth_token else {}
        self._http = http
        self._owns_http = http is None
        self._closed = False
        self._preferred = 0  # the broker that answered last

    @classmethod
    def from_config(
        cls,
        path: str | os.PathLike[str] | None = None,
        context: str | None = None,
        *,
        http: aiohttp.ClientSession | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    ) -> Admin:
        """An Admin on the service URL and token of the client configuration file ``path``
        (else $STCTL_CONFIG's, else ~/.config/stctl/config) and its ``context`` (else the
        current one), under $STCTL_URL and $STCTL_AUTH_TOKEN: ClientSettings.load. The token
        file is read now. ClientConfigError naming the file and the field when the file
        cannot be used."""
        settings = ClientSettings.load(path, context)
        return cls(
            settings.service_url,
            settings.auth_token,
            http=http,
            connect_timeout=connect_timeout,
        )

    async def __aenter__(self) -> Admin:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        self._closed = True
        if self._owns_http and self._http is not None:
            await self._http.close()
        self._http = None

    # -- topics ---------------------------------------------------------------------------------

    async def create_topic(
        self,
        topic: str,
        initial_segments: int = 1,
        subscriptions: Iterable[tuple[str, str] | str] = (),
        properties: Mapping[str, str] | None = None,
        retention: Mapping[str, int] | None = None,
        auto_scale: Mapping[str, Any] | None = None,
    ) -> TopicDescription:
        """Create it; ``subscriptions`` are names (Queue) or (name, type) pairs, ``retention``
        has ``maxSizeBytes`` and/or ``maxAgeSeconds``, ``auto_scale`` is ``spec.autoScale``
        (camelCase keys). AlreadyExists when the name is taken; InvalidRequest naming the
        field for an invalid one (ValueError, before anything is sent, for a name no broker
        would take)."""
        checked_topic(topic)  # before anything is sent
        declared = [
            {"name": s, "type": "Queue"} if isinstance(s, str) else {"name": s[0], "type": s[1]}
            for s in subscriptions
        ]
        problem = subscription_count_problem(len(declared))
        if problem is not None:
            raise ValueError(f"invalid topic: spec.subscriptions: {problem}")
        for index, entry in enumerate(declared):
            problem = subscription_name_problem(entry["name"])
            if problem is not None:
                raise ValueError(f"invalid topic: spec.subscriptions.{index}.name: {problem}")
        body: dict[str, Any] = {
            "initialSegments": initial_segments,
            "subscriptions": declared,
            "properties": dict(properties or {}),
        }
        if retention is not None:
            body["retention"] = dict(retention)
        if auto_scale is not None:
            body["autoScale"] = dict(auto_scale)
        return cast(TopicDescription, await self._call("PUT", topic_path(topic), body))

    async def list_topics(self, namespace: str | None = None) -> list[TopicSummary]:
        """The topics of ``namespace``, or of every namespace."""
        query = f"?namespace={quote(namespace, safe='')}" if namespace else ""
        return cast(list[TopicSummary], await self._call("GET", "/admin/v1/topics" + query))

    async def describe_topic(self, topic: str) -> TopicDescription:
        return cast(TopicDescription, await self._call("GET", topic_path(topic)))

    async def delete_topic(self, topic: str) -> TopicSummary:
        """Ask for deletion; the controller removes the segments, then the topic goes."""
        return cast(TopicSummary, await self._call("DELETE", topic_path(topic)))

    # -- subscriptions --------------------------------------------------------------------------

    async def create_subscription(
        self, topic: str, name: str, type: str = "Queue"
    ) -> DeclaredSubscription:
        """Declare it (it starts at the latest message); AlreadyExists when declared;
        ValueError, before anything is sent, for a name no broker would take."""
        check_subscription_name(name)
        path = f"{topic_path(topic)}/subscriptions/{quote(name, safe='')}"
        return cast(DeclaredSubscription, await self._call("PUT", path, {"type": type}))

    async def delete_subscription(self, topic: str, name: str) -> None:
        """Undeclare a declared subscription (the controller deletes it from every segment),
        or delete one a consumer created from every segment's broker at once: NotFound when
        neither has it, ConsumerBusy while consumers are attached to a runtime one,
        ServerError when a segment's broker does not answer (ask again)."""
        await self._call("DELETE", f"{topic_path(topic)}/subscriptions/{quote(name, safe='')}")

    async def list_subscriptions(self, topic: str) -> list[SubscriptionDescription]:
        """Declared subscriptions and the ones consumers created (``declared`` false), with
        the segments whose brokers have each."""
        path = f"{topic_path(topic)}/subscriptions"
        return cast(list[SubscriptionDescription], await self._call("GET", path))

    # -- scaling and stats ----------------------------------------------------------------------

    async def split(self, topic: str, segment_id: int, wait_seconds: float = 60) -> Operation:
        """Split an active segment and wait for the controller: OperationInProgress when
        another split or merge holds the topic, InvalidRequest when refused, Timeout when no
        controller answered in time (the request stays on the topic)."""
        body = {"segment": segment_id, "timeoutSeconds": wait_seconds}
        answer = await self._call(
            "POST", topic_path(topic) + "/split", body, wait_seconds + _SCALING_SLACK_SECONDS
        )
        return cast(Operation, answer)

    async def merge(self, topic: str, a: int, b: int, wait_seconds: float = 60) -> Operation:
        """Merge two adjacent active segments; errors as for :meth:`split`."""
        body = {"segments": [a, b], "timeoutSeconds": wait_seconds}
        answer = await self._call(
            "POST", topic_path(topic) + "/merge", body, wait_seconds + _SCALING_SLACK_SECONDS
        )
        return cast(Operation, answer)

    async def stats(self, topic: str) -> dict[str, Any]:
        """Segment counts, rates, backlogs and consumers (``stctl topics stats -o json``)."""
        return cast(dict[str, Any], await self._call("GET", topic_path(topic) + "/stats"))

    async def topic_load(self, topic: str) -> dict[str, Any]:
        """Segment loads and window rates, recommendation, cooldowns and policy
        (``stctl topics load -o json``)."""
        return cast(dict[str, Any], await self._call("GET", topic_path(topic) + "/load"))

    # -- the HTTP exchange ----------------------------------------------------------------------

    def _session(self) -> aiohttp.ClientSession:
        if self._closed:
            raise ClientClosed("the admin client is closed")
        if self._http is None:
            self._http = admin_session()
        return self._http

    async def _call(
        self,
        method: str,
        path: str,
        body: object | None = None,
        wait_seconds: float = _REQUEST_SECONDS,
    ) -> Any:
        session = self._session()
        order = self.urls[self._preferred :] + self.urls[: self._preferred]
        failures = []
        for url in order:
            try:
                answer = await self._exchange(session, method, url + path, body, wait_seconds)
            except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as error:
                # Nothing was sent: the next broker can be asked without doing it twice.
                reason = connect_failure(error, self._connect_timeout)
                failures.append(f"{self._given[url]}: {reason}")
                continue
            self._preferred = self.urls.index(url)
            return answer
        where = failures[0] if len(failures) == 1 else f"any broker: {'; '.join(failures)}"
        raise ConnectionFailed(
            f"cannot connect to {where}; is `stctl standalone` (or a broker) running there?"
        )

    async def _exchange(
        self, session: aiohttp.ClientSession, method: str, url: str, body: object, seconds: float
    ) -> Any:
        try:
            async with session.request(
                method,
                url,
                json=body,
                headers=self._headers,
                timeout=aiohttp.ClientTimeout(total=seconds, connect=self._connect_timeout),
            ) as response:
                payload = (
                    await response.json() if response.content_type == "application/json" else None
                )
                if response.status >= 400:
                    fallback = f"{method} {url} answered {response.status} {response.reason}"
                    raise _refusal(response.status, payload, fallback)
                return payload
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError):
            raise
        except aiohttp.ClientError as error:
            raise ConnectionFailed(f"{method} {url}: {error or type(error).__name__}") from error
        except TimeoutError:
            raise Timeout(f"{method} {url}: no answer within {seconds:g} s") from None
