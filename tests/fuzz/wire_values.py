"""Random msgpack values for the wire fuzzer: integers at the edges, odd strings and bytes, and
raw msgpack that no msgpack encoder writes (invalid UTF-8 in a str, an int of 2**64, extension
types, lengths past the end).

msgpack refuses to encode those last ones, so a value holds a placeholder string instead and
:class:`Splices` swaps the placeholder's encoding for the raw bytes after packing: the rest of
the frame still goes through msgpack's C packer, which is what keeps the fuzzer fast.
"""

from __future__ import annotations

import random
import struct
from typing import Any

import msgpack

from scalable_topics.protocol.schema import wire_form

# Integers where a decoder, a struct format or a counter may break: the ends of the signed and
# unsigned 32- and 64-bit ranges, and just past them.
INT_EDGES = (
    0,
    1,
    -1,
    2**31 - 1,
    2**31,
    2**32 - 1,
    2**32,
    2**53 + 1,
    2**63 - 1,
    2**63,
    2**64 - 1,
    -(2**31),
    -(2**63),
)
_UINT_EDGES = tuple(n for n in INT_EDGES if 0 <= n < 2**64)
# msgpack has no encoding for 2**64: it travels as a uint64 with a 9th byte, i.e. raw bytes.
TWO_TO_THE_64 = b"\xcf" + (2**64 - 1).to_bytes(8, "big") + b"\x01"

ODD_STRINGS = (
    "",
    " ",
    "\x00",
    "é",
    "日本語のトピック",
    "🙂🙃",
    "\u202etxt.exe",
    "a" * 253,
    "../../etc/passwd",
    "default/",
    "/orders",
    "default//orders",
    "%s%n",
    "null",
)

# Raw msgpack that no encoder writes, each a whole value (or one that lies about its length).
RAW_VALUES = (
    b"\xa3\xff\xfe\xfd",  # a str of 3 bytes that are not UTF-8
    b"\xa3\xed\xa0\x80",  # a str holding a UTF-8-encoded lone surrogate
    b"\xd9\x02\xc3\x28",  # a str8 with an invalid 2-byte sequence
    TWO_TO_THE_64,
    b"\xcf\x00\x00\x00\x00\x00\x00\x00\x05",  # 5 as a uint64: valid, not minimal
    b"\xd3\xff\xff\xff\xff\xff\xff\xff\xff",  # -1 as an int64
    b"\xcb\x7f\xf8\x00\x00\x00\x00\x00\x00",  # float64 NaN
    b"\xca\x7f\x80\x00\x00",  # float32 infinity
    b"\xd4\x01\x00",  # fixext 1
    b"\xd6\xff\x00\x00\x00\x00",  # the msgpack timestamp extension
    b"\xc7\x00\x05",  # ext 8 of length 0
    b"\xc1",  # the byte msgpack never uses
    b"\xdd\xff\xff\xff\xff",  # an array32 claiming 4 billion items
    b"\xdf\xff\xff\xff\xff",  # a map32 claiming 4 billion pairs
    b"\xdb\xff\xff\xff\xff",  # a str32 claiming 4 GiB
    b"\xc6\x7f\xff\xff\xff",  # a bin32 claiming 2 GiB
    b"\x81\x01\xa1x",  # a map with an int key
    b"\x81\xc4\x01k\xa1v",  # a map with a bin key
    b"\x81\x90\xa1v",  # a map with an array key
)


class Splices:
    """Raw bytes to put in place of placeholders once a frame is packed."""

    __slots__ = ("_raw",)

    def __init__(self) -> None:
        self._raw: dict[bytes, bytes] = {}

    def __bool__(self) -> bool:
        return bool(self._raw)

    def placeholder(self, raw: bytes) -> str:
        """A string that stands for ``raw`` in a value until :meth:`pack` replaces it."""
        token = f"\x00splice-{len(self._raw)}\x00"
        self._raw[msgpack.packb(token)] = raw
        return token

    def pack(self, value: Any) -> bytes:
        packed: bytes = msgpack.packb(value, use_bin_type=True, default=wire_form)
        for token, raw in self._raw.items():
            packed = packed.replace(token, raw)
        return packed


def small_uint(rng: random.Random) -> int:
    return rng.randrange(8)


def edge_int(rng: random.Random) -> int:
    return rng.choice(INT_EDGES)


def uint_edge(rng: random.Random) -> int:
    """An edge within the uint range: a valid value a broker may still mishandle."""
    return rng.choice(_UINT_EDGES)


def any_uint(rng: random.Random) -> int:
    """Mostly small, now and then an edge of the uint range or any 64-bit value."""
    roll = rng.random()
    if roll < 0.8:
        return rng.randrange(16)
    if roll < 0.9:
        return uint_edge(rng)
    return rng.getrandbits(rng.choice((8, 16, 32, 64)))


def text(rng: random.Random, splices: Splices) -> str:
    roll = rng.random()
    if roll < 0.5:
        return "".join(
            rng.choice("abcdefghijklmnop-_.0123456789") for _ in range(rng.randrange(12))
        )
    if roll < 0.8:
        return rng.choice(ODD_STRINGS)
    if roll < 0.97:
        return "".join(chr(rng.randrange(0x20, 0x2FFF)) for _ in range(rng.randrange(1, 40)))
    if roll < 0.995:
        return splices.placeholder(rng.choice(RAW_VALUES[:3]))
    return "x" * rng.choice((1024, 65_536, 300_000))


def payload(rng: random.Random) -> bytes:
    roll = rng.random()
    if roll < 0.9:
        return rng.randbytes(rng.randrange(64))
    if roll < 0.995:
        return b""
    return rng.randbytes(rng.choice((4096, 65_536, 1_000_000)))


def wrong_value(rng: random.Random, splices: Splices, depth: int = 0) -> Any:
    """A value of any msgpack type, likely the wrong one for the field it lands in."""
    roll = rng.randrange(14)
    if roll == 0:
        return None
    if roll == 1:
        return rng.random() < 0.5
    if roll == 2:
        return edge_int(rng)
    if roll == 3:
        return rng.choice((0.0, -0.5, 1e300, float("inf"), float("nan"), 3.0))
    if roll == 4:
        return text(rng, splices)
    if roll == 5:
        return rng.randbytes(rng.randrange(8))
    if roll == 6:
        return str(any_uint(rng))  # an int spelt as a str
    if roll == 7 and depth < 3:
        return [wrong_value(rng, splices, depth + 1) for _ in range(rng.randrange(4))]
    if roll == 8 and depth < 3:
        return {text(rng, splices): wrong_value(rng, splices, depth + 1) for _ in range(2)}
    if roll == 9:
        return splices.placeholder(rng.choice(RAW_VALUES))
    if roll == 10:
        # Arrays nested past any sensible depth (msgpack's unpacker stops at its stack limit).
        levels = rng.choice((8, 100, 1100, 5000))
        return splices.placeholder(b"\x91" * levels + b"\xc0")
    if roll == 11:
        return [0] * rng.choice((0, 1, 10_000, 200_000))
    if roll == 12:
        return -rng.randrange(1, 2**63)
    return struct.unpack(">d", rng.randbytes(8))[0]  # any float64, NaNs included
