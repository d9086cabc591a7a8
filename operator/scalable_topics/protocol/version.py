"""Protocol versions and how a connection agrees on one."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

PROTOCOL_VERSION: Final = 1
# Every version this implementation speaks, newest first.
SUPPORTED_VERSIONS: Final[tuple[int, ...]] = (PROTOCOL_VERSION,)


def negotiate_version(
    offered: Iterable[int], supported: Iterable[int] = SUPPORTED_VERSIONS
) -> int | None:
    """The newest version both sides speak, or None when they share none."""
    common = set(offered) & set(supported)
    return max(common) if common else None
