"""Protocol versions and how a connection agrees on one."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Final

from .commands import Command, CommandType

PROTOCOL_VERSION: Final = 2
# Every version this implementation speaks, newest first.
SUPPORTED_VERSIONS: Final[tuple[int, ...]] = (2, 1)

# The version that introduced each command newer than version 1. A peer that negotiated an
# older version neither sends nor receives it.
INTRODUCED_IN: Final[Mapping[CommandType, int]] = MappingProxyType(
    {
        CommandType.WATCH_NAMESPACE: 2,
        CommandType.NAMESPACE_UPDATE: 2,
        CommandType.NAMESPACE_WATCH_CLOSE: 2,
    }
)


def negotiate_version(
    offered: Iterable[int], supported: Iterable[int] = SUPPORTED_VERSIONS
) -> int | None:
    """The newest version both sides speak, or None when they share none."""
    common = set(offered) & set(supported)
    return max(common) if common else None


def speaks(version: int, command: Command | type[Command]) -> bool:
    """Whether a connection that negotiated ``version`` carries ``command``."""
    return INTRODUCED_IN.get(command.TYPE, 1) <= version
