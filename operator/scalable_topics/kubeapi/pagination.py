"""Paged lists (``limit`` and ``continue``) that stay consistent across pages.

The API server serves every page of a list from the revision of its first page. The store keeps
no old revisions to list from, so the first page's complete result is held here and later pages
are cut from it; the continue token names the held result. Held results are bounded in number
and in objects, and expire: a token whose result is gone gets 410 Expired, and the client lists
again from the start, exactly as when etcd has compacted a continue token's revision.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .status import ApiError, Reason

Object = dict[str, Any]

MAX_HELD_LISTS = 32
MAX_HELD_OBJECTS = 200_000
HOLD_SECONDS = 300.0
TOO_OLD = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter."
)


@dataclass(frozen=True, slots=True)
class Page:
    items: list[Object]
    resource_version: str
    continue_token: str | None
    remaining: int | None


@dataclass(slots=True)
class _Held:
    items: list[Object]
    resource_version: str
    expires: float


class ListPager:
    """Holds the results of paged lists until their last page is read, or they expire."""

    def __init__(
        self,
        *,
        max_lists: int = MAX_HELD_LISTS,
        max_objects: int = MAX_HELD_OBJECTS,
        hold_seconds: float = HOLD_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._held: OrderedDict[str, _Held] = OrderedDict()
        self._max_lists = max_lists
        self._max_objects = max_objects
        self._hold_seconds = hold_seconds
        self._clock = clock

    @property
    def held_objects(self) -> int:
        return sum(len(held.items) for held in self._held.values())

    def first_page(self, items: list[Object], resource_version: str, limit: int) -> Page:
        if limit <= 0 or len(items) <= limit:
            return Page(items, resource_version, None, None)
        key = secrets.token_urlsafe(12)
        self._expire()
        self._held[key] = _Held(items, resource_version, self._clock() + self._hold_seconds)
        self._evict()
        return self._cut(key, 0, limit)

    def next_page(self, token: str, limit: int) -> Page:
        key, offset = _decode(token)
        self._expire()
        held = self._held.get(key)
        if held is None:
            raise ApiError(410, Reason.EXPIRED, TOO_OLD)
        return self._cut(key, offset, limit if limit > 0 else len(held.items))

    def _cut(self, key: str, offset: int, limit: int) -> Page:
        held = self._held[key]
        end = offset + limit
        page = held.items[offset:end]
        if end >= len(held.items):
            del self._held[key]
            return Page(page, held.resource_version, None, None)
        token = _encode(key, end)
        return Page(page, held.resource_version, token, len(held.items) - end)

    def _expire(self) -> None:
        now = self._clock()
        for key in [key for key, held in self._held.items() if held.expires <= now]:
            del self._held[key]

    def _evict(self) -> None:
        while len(self._held) > self._max_lists or (
            len(self._held) > 1 and self.held_objects > self._max_objects
        ):
            self._held.popitem(last=False)


def _encode(key: str, offset: int) -> str:
    raw = json.dumps({"k": key, "o": offset}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode(token: str) -> tuple[str, int]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        decoded = json.loads(raw)
        key, offset = decoded["k"], decoded["o"]
        if not isinstance(key, str) or not isinstance(offset, int) or offset < 0:
            raise ValueError(decoded)
    except (ValueError, KeyError, TypeError) as exc:
        raise ApiError(400, Reason.BAD_REQUEST, f"continue key is not valid: {token!r}") from exc
    return key, offset
