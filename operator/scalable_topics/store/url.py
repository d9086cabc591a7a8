"""Pick and open a store adapter from a URL, as components take it from their configuration."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from ..model.clock import Clock
from .embedded import EmbeddedStore
from .port import Store

SUPPORTED = (
    "embedded:///absolute/path/to/store.db",
    "embedded:relative/path/to/store.db",
)


def open_store(url: str, *, clock: Clock | None = None) -> Store:
    """Open the store ``url`` names; raise ValueError for a URL no adapter serves."""
    parts = urlsplit(url)
    if parts.scheme != "embedded":
        raise ValueError(f"unsupported store URL {url!r}: use one of {', '.join(SUPPORTED)}")
    if parts.netloc or parts.query or parts.fragment or not parts.path:
        raise ValueError(
            f"store URL {url!r} must name a file and nothing else: {' or '.join(SUPPORTED)}"
        )
    return EmbeddedStore(unquote(parts.path), clock=clock)
