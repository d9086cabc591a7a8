"""A WebSocket client on a bare TCP stream, for the wire fuzzer.

A library client only writes well-formed WebSocket frames and closes politely; a fuzzer must
also stop in the middle of a frame, announce lengths it never sends, set reserved bits, split a
message into fragments, or drop the TCP connection at any point. Frames go out with the mask
key 0 (allowed: a server cannot tell it from a random key), so masking costs nothing and the
fuzzer spends its time on frames rather than on XOR.
"""

from __future__ import annotations

import asyncio
import base64
import os
import struct
from enum import IntEnum

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_ZERO_MASK = b"\x00\x00\x00\x00"


class Opcode(IntEnum):
    CONTINUATION = 0x0
    TEXT = 0x1
    BINARY = 0x2
    CLOSE = 0x8
    PING = 0x9
    PONG = 0xA


class HandshakeRefused(Exception):
    pass


def frame_header(
    opcode: int, length: int, *, fin: bool = True, rsv: int = 0, mask: bool = True
) -> bytes:
    """A client frame's header for a payload of ``length`` bytes (masked with key 0)."""
    first = (0x80 if fin else 0) | (rsv & 0x7) << 4 | (opcode & 0xF)
    mask_bit = 0x80 if mask else 0
    if length < 126:
        header = struct.pack("!BB", first, mask_bit | length)
    elif length < 1 << 16:
        header = struct.pack("!BBH", first, mask_bit | 126, length)
    else:
        header = struct.pack("!BBQ", first, mask_bit | 127, length)
    return header + _ZERO_MASK if mask else header


class RawWebSocket:
    """One client connection: frames written as given, server messages read whole."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self.close_code: int | None = None
        self._close_sent = False

    @classmethod
    async def connect(cls, host: str, port: int, path: str = "/ws") -> RawWebSocket:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            key = base64.b64encode(os.urandom(16)).decode()
            writer.write(
                (
                    f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                    f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                    "Sec-WebSocket-Version: 13\r\n\r\n"
                ).encode()
            )
            head = await reader.readuntil(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 101"):
                raise HandshakeRefused(head.split(b"\r\n", 1)[0].decode(errors="replace"))
        except BaseException:
            writer.transport.abort()
            raise
        return cls(reader, writer)

    @property
    def closing(self) -> bool:
        """Our close frame is out, or the TCP connection is going: nothing more to write."""
        return self._close_sent or self._writer.transport.is_closing()

    def write_frame(
        self, payload: bytes, opcode: int = Opcode.BINARY, *, fin: bool = True, rsv: int = 0
    ) -> None:
        self._writer.write(frame_header(opcode, len(payload), fin=fin, rsv=rsv))
        self._writer.write(payload)

    def write_raw(self, data: bytes) -> None:
        """Bytes as they are: half a frame, a header alone, an unmasked frame."""
        self._writer.write(data)

    async def drain(self) -> None:
        await self._writer.drain()

    async def receive(self) -> tuple[int, bytes] | None:
        """The next server message (fragments joined), or None once the stream ends. A server
        ping is answered here; a close frame is returned as (CLOSE, payload)."""
        fragments: list[bytes] = []
        while True:
            try:
                first, second = await self._reader.readexactly(2)
                length = second & 0x7F
                if length == 126:
                    (length,) = struct.unpack("!H", await self._reader.readexactly(2))
                elif length == 127:
                    (length,) = struct.unpack("!Q", await self._reader.readexactly(8))
                if second & 0x80:
                    await self._reader.readexactly(4)  # a server never masks; skip it anyway
                payload = await self._reader.readexactly(length)
            except (asyncio.IncompleteReadError, ConnectionError):
                return None
            opcode = first & 0x0F
            if opcode == Opcode.PING:
                if not self.closing:
                    self.write_frame(payload, Opcode.PONG)
                continue
            if opcode == Opcode.CLOSE:
                if len(payload) >= 2:
                    (self.close_code,) = struct.unpack("!H", payload[:2])
                self.send_close()  # the closing handshake: the server then ends the TCP stream
                return Opcode.CLOSE, payload
            if not fragments:
                kind = opcode
            fragments.append(payload)
            if first & 0x80:
                return kind, b"".join(fragments)

    def send_close(self, code: int = 1000) -> None:
        """Our close frame (once): starting the closing handshake, the server answers with its
        own and ends the TCP connection, which ``receive`` sees as None; answering the server's,
        it ends the TCP connection at once."""
        if not self.closing:
            self._close_sent = True
            self.write_frame(struct.pack("!H", code), Opcode.CLOSE)

    def abort(self) -> None:
        """Drop the TCP connection at once, whatever is in flight."""
        self._writer.transport.abort()
