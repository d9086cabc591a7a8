"""A service URL: one broker's ``ws://HOST:PORT`` (or wss), or several comma-separated, tried
in turn. The client, the client configuration file and ``stctl --url`` take the same form."""

from __future__ import annotations


def parse_service_urls(service_url: str) -> tuple[str, ...]:
    """The broker URLs in ``service_url``: ``ws://host:port`` (or wss), comma-separated."""
    urls = tuple(url.strip().rstrip("/") for url in service_url.split(",") if url.strip())
    if not urls:
        raise ValueError("the service URL names no broker, e.g. ws://127.0.0.1:6650")
    for url in urls:
        if not url.startswith(("ws://", "wss://")) or len(url.split("://", 1)[1]) == 0:
            raise ValueError(f"a broker URL looks like ws://HOST:PORT, not {url!r}")
    return urls
