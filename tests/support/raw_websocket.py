"""Raw TCP on loopback for tests of what a server does with slow or silent peers: an HTTP
upgrade written by hand, and the frames a server sends, read byte by byte (RFC 6455)."""

from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass

UPGRADE = (
    b"GET /ws HTTP/1.1\r\n"
    b"Host: 127.0.0.1\r\n"
    b"Upgrade: websocket\r\n"
    b"Connection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    b"Sec-WebSocket-Version: 13\r\n"
    b"\r\n"
)
OPCODE_CLOSE = 0x8
OPCODE_PING = 0x9
OPCODE_PONG = 0xA


@dataclass(frozen=True)
class Frame:
    opcode: int
    payload: bytes

    @property
    def close_code(self) -> int:
        assert self.opcode == OPCODE_CLOSE and len(self.payload) >= 2, self
        code: int = struct.unpack("!H", self.payload[:2])[0]
        return code

    @property
    def close_reason(self) -> str:
        return self.payload[2:].decode()


async def open_upgraded(
    port: int,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A WebSocket on ``/ws`` of 127.0.0.1:``port``, upgraded and nothing sent since."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(UPGRADE)
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101"), head
    return reader, writer


async def read_frame(reader: asyncio.StreamReader) -> Frame:
    """The next frame a server sent (servers never mask)."""
    first, second = await reader.readexactly(2)
    length = second & 0x7F
    if length == 126:
        length = struct.unpack("!H", await reader.readexactly(2))[0]
    elif length == 127:
        length = struct.unpack("!Q", await reader.readexactly(8))[0]
    return Frame(first & 0x0F, await reader.readexactly(length))


def client_frame(opcode: int, payload: bytes = b"") -> bytes:
    """A frame as a client must send it: final, masked (here with a fixed key)."""
    assert len(payload) < 126
    key = b"\x01\x02\x03\x04"
    masked = bytes(byte ^ key[index % 4] for index, byte in enumerate(payload))
    return bytes([0x80 | opcode, 0x80 | len(payload)]) + key + masked
