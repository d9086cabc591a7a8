"""The answer to a WebSocket upgrade that a broker will not take (docs/protocol.md, section 4).

A broker at a connection limit answers the upgrade with HTTP 503 instead of 101: the admin APIs'
JSON error body, a ``Retry-After`` header, and the body's message again in REFUSAL_HEADER,
because WebSocket client libraries (aiohttp's among them) give a program the status and the
headers of a refused upgrade, never its body.
"""

from __future__ import annotations

from typing import Final

REFUSAL_HEADER: Final = "Scalable-Topics-Refusal"
