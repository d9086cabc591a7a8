"""Reading protobuf's wire format without the message's schema, for tests of what a server
encodes: each field's number with its raw value (an int for a varint, bytes otherwise)."""

from __future__ import annotations

import struct
from collections import defaultdict
from collections.abc import Iterator

Value = int | bytes


def _varint(data: bytes, at: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, at


def read(data: bytes) -> Iterator[tuple[int, Value]]:
    """(field number, value) in the order written; a length-delimited value (a string or a
    message) is its bytes, a 64-bit one its eight bytes."""
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, at = _varint(data, at)
            yield number, value
        elif wire_type == 1:
            yield number, data[at : at + 8]
            at += 8
        elif wire_type == 2:
            length, at = _varint(data, at)
            yield number, data[at : at + length]
            at += length
        else:
            raise ValueError(f"wire type {wire_type} of field {number} is not read here")
    assert at == len(data), "the last field runs past the end"


def fields(data: bytes) -> dict[int, list[Value]]:
    """Every field's values, by number (one value unless the field is repeated)."""
    found: dict[int, list[Value]] = defaultdict(list)
    for number, value in read(data):
        found[number].append(value)
    return dict(found)


def message(data: bytes, number: int) -> dict[int, list[Value]]:
    """The fields of the one message in field ``number``."""
    [value] = fields(data)[number]
    assert isinstance(value, bytes)
    return fields(value)


def named(data: bytes) -> dict[str, bytes]:
    """A map written as repeated (name=1, value=2) pairs in field 1: name -> value's bytes."""
    pairs: dict[str, bytes] = {}
    for pair in fields(data).get(1, []):
        assert isinstance(pair, bytes)
        [name], [value] = fields(pair)[1], fields(pair).get(2, [b""])
        assert isinstance(name, bytes) and isinstance(value, bytes)
        pairs[name.decode()] = value
    return pairs


def double(value: Value) -> float:
    assert isinstance(value, bytes)
    unpacked: float = struct.unpack("<d", value)[0]
    return unpacked
