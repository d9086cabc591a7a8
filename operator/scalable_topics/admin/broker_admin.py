"""The controller's client of the segment admin API that every broker serves.

Every step of a split, merge, create or delete is one of these calls, and each is idempotent
on the broker: creating an existing segment returns it, deleting a missing one answers 404,
which :meth:`BrokerAdmin.delete_segment` reports as "already gone" instead of failing (a retried
delete must not get stuck on what the first attempt removed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import aiohttp

from ..protocol import InitialPosition

_TIMEOUT = aiohttp.ClientTimeout(total=30)


# The broker hosts as many segments as it can (code BrokerFull): the segment goes elsewhere.
BROKER_FULL_STATUS = 507


class BrokerAdminError(Exception):
    """The broker answered with an error; ``code`` is the wire protocol's error code."""

    def __init__(
        self, status: int, code: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(f"{code} ({status}): {message}")
        self.status, self.code, self.message = status, code, message
        self.details = details or {}  # the rest of the error's JSON body


class SegmentBusy(BrokerAdminError):
    """A conditional fence refused: ``producers`` (names) are connected to the segment."""

    def __init__(self, status: int, message: str, producers: Sequence[str]) -> None:
        super().__init__(status, "ProducerBusy", message)
        self.producers = tuple(producers)


class BrokerUnreachable(Exception):
    """The broker did not answer: it may be down, or the network between us."""


def admin_base(broker_url: str) -> str:
    """The HTTP base of a broker advertised as ``ws://host:port`` (or wss, http, https)."""
    for websocket, http in (("ws://", "http://"), ("wss://", "https://")):
        if broker_url.startswith(websocket):
            return http + broker_url.removeprefix(websocket).rstrip("/")
    if broker_url.startswith(("http://", "https://")):
        return broker_url.rstrip("/")
    raise ValueError(f"broker URL {broker_url!r} is not ws://, wss://, http:// or https://")


class BrokerAdmin:
    def __init__(self, session: aiohttp.ClientSession, token: str | None = None) -> None:
        self._session = session
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}

    async def create_segment(
        self,
        broker_url: str,
        namespace: str,
        topic: str,
        descriptor: str,
        *,
        parents: Sequence[int] = (),
        subscriptions: Sequence[str] = (),
        producer_epoch: int = 0,
        producer_holder: str | None = None,
        retention: tuple[int | None, int | None] = (None, None),
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "parents": list(parents),
            "subscriptions": list(subscriptions),
            "producerEpoch": producer_epoch,
            "producerHolder": producer_holder,
        }
        size, age = retention
        if size is not None or age is not None:
            body["retention"] = {
                k: v for k, v in (("maxSizeBytes", size), ("maxAgeSeconds", age)) if v is not None
            }
        stats: dict[str, Any] = await self._call(
            "PUT", broker_url, _path(namespace, topic, descriptor), body
        )
        return stats

    async def terminate_segment(
        self, broker_url: str, namespace: str, topic: str, descriptor: str
    ) -> int:
        """Seal the segment (idempotent); returns its last entry id (-1 when empty)."""
        reply = await self._call(
            "POST", broker_url, _path(namespace, topic, descriptor) + "/terminate"
        )
        return int(reply["lastEntryId"])

    async def delete_segment(
        self, broker_url: str, namespace: str, topic: str, descriptor: str
    ) -> bool:
        """Delete the segment's storage; False when it was already gone."""
        try:
            await self._call("DELETE", broker_url, _path(namespace, topic, descriptor))
        except BrokerAdminError as error:
            if error.status == 404:
                return False
            raise
        return True

    async def fence(
        self,
        broker_url: str,
        namespace: str,
        topic: str,
        descriptor: str,
        epoch: int,
        holder: str | None = None,
        *,
        if_free: bool = False,
    ) -> int:
        """Raise the segment's producer epoch and reserve it for ``holder`` (None: no
        reservation); returns the epoch in force. ``if_free``: the broker refuses, changing
        nothing, while a producer of another name is connected (SegmentBusy names them)."""
        body: dict[str, Any] = {"epoch": epoch, "holder": holder}
        if if_free:
            body["ifFree"] = True
        try:
            reply = await self._call(
                "POST", broker_url, _path(namespace, topic, descriptor) + "/fence", body
            )
        except BrokerAdminError as error:
            if error.code == "ProducerBusy" and isinstance(error.details.get("producers"), list):
                raise SegmentBusy(
                    error.status, error.message, [str(p) for p in error.details["producers"]]
                ) from None
            raise
        return int(reply["producerEpoch"])

    async def release(
        self, broker_url: str, namespace: str, topic: str, descriptor: str, epoch: int
    ) -> int:
        """Clear the segment's reservation if it was made at ``epoch`` or before, raising no
        epoch; returns the epoch in force."""
        reply = await self._call(
            "POST",
            broker_url,
            _path(namespace, topic, descriptor) + "/release",
            {"epoch": epoch},
        )
        return int(reply["producerEpoch"])

    async def producers(
        self, broker_url: str, namespace: str, topic: str, descriptor: str
    ) -> list[str]:
        """The names of the producers connected to the segment."""
        listing = await self._call(
            "GET", broker_url, _path(namespace, topic, descriptor) + "/producers"
        )
        return [str(producer["name"]) for producer in listing]

    async def stats(
        self, broker_url: str, namespace: str, topic: str, descriptor: str
    ) -> dict[str, Any]:
        stats: dict[str, Any] = await self._call(
            "GET", broker_url, _path(namespace, topic, descriptor) + "/stats"
        )
        return stats

    async def subscriptions(
        self, broker_url: str, namespace: str, topic: str, descriptor: str
    ) -> list[str]:
        names = await self._call(
            "GET", broker_url, _path(namespace, topic, descriptor) + "/subscriptions"
        )
        return [str(name) for name in names]

    async def create_subscription(
        self,
        broker_url: str,
        namespace: str,
        topic: str,
        descriptor: str,
        subscription: str,
        initial: InitialPosition = InitialPosition.EARLIEST,
    ) -> None:
        path = (
            _path(namespace, topic, descriptor) + "/subscriptions/" + quote(subscription, safe="")
        )
        await self._call("PUT", broker_url, path, {"initialPosition": initial.value})

    async def delete_subscription(
        self, broker_url: str, namespace: str, topic: str, descriptor: str, subscription: str
    ) -> bool:
        """False when the subscription (or its segment) was already gone."""
        path = (
            _path(namespace, topic, descriptor) + "/subscriptions/" + quote(subscription, safe="")
        )
        try:
            await self._call("DELETE", broker_url, path)
        except BrokerAdminError as error:
            if error.status == 404:
                return False
            raise
        return True

    async def _call(
        self, method: str, broker_url: str, path: str, body: object | None = None
    ) -> Any:
        url = admin_base(broker_url) + path
        try:
            async with self._session.request(
                method, url, json=body, headers=self._headers, timeout=_TIMEOUT
            ) as response:
                payload = (
                    await response.json() if response.content_type == "application/json" else None
                )
                if response.status >= 400:
                    code = (
                        payload.get("code", "Unknown") if isinstance(payload, dict) else "Unknown"
                    )
                    message = (
                        payload.get("message", "")
                        if isinstance(payload, dict)
                        else await response.text()
                    )
                    details = payload if isinstance(payload, dict) else None
                    raise BrokerAdminError(response.status, code, message, details)
                return payload
        except (aiohttp.ClientConnectionError, TimeoutError) as error:
            raise BrokerUnreachable(f"{method} {url}: {error or type(error).__name__}") from error


def _path(namespace: str, topic: str, descriptor: str) -> str:
    return f"/admin/v1/segments/{quote(namespace, safe='')}/{quote(topic, safe='')}/{quote(descriptor, safe='')}"
