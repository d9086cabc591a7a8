"""Frames: one command as one msgpack array ``[tag, fields...]``, carried by one binary
WebSocket message.

``decode_frame`` is where untrusted bytes enter: it refuses, with a :class:`ProtocolError`
naming the problem, a frame over the size limit (before unpacking it), bytes that are not one
msgpack value, anything that is not an array opened by a known tag, and any field that is
missing, of the wrong type or out of range. The unpacker is bounded by the frame's own length
and refuses extension types, so a hostile frame cannot make it allocate more than the frame.

``encode_frame`` trusts its input: commands are built by typed code, and the receiving side
checks everything anyway.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import msgpack

from .commands import COMMAND_CLASSES, Command
from .errors import ErrorCode, ProtocolError
from .limits import DEFAULT_MAX_FRAME_BYTES
from .schema import FieldError, StructSchema, describe, struct_schema, wire_form


@dataclass(frozen=True, slots=True)
class _CommandCodec:
    schema: StructSchema
    to_wire: Callable[[Any], tuple[Any, ...]]
    # Where the request id sits in the frame, to name the request an Error answers.
    request_id_index: int | None

    def decode(self, frame: tuple[Any, ...]) -> Command:
        schema = self.schema
        if len(frame) - 1 != len(schema.field_names):
            raise self._refusal(
                frame,
                f"{schema.name} has {len(schema.field_names)} fields "
                f"({', '.join(schema.field_names) or 'none'}), the frame carries {len(frame) - 1}",
            )
        try:
            command: Command = schema.decode_fields(frame[1:])
        except FieldError as error:
            raise self._refusal(frame, f"{schema.name}{error.path}: {error.problem}") from None
        return command

    def _refusal(self, frame: tuple[Any, ...], message: str) -> ProtocolError:
        index = self.request_id_index
        request_id = frame[index] if index is not None and index < len(frame) else None
        if type(request_id) is not int or request_id < 0:
            request_id = None
        return ProtocolError(ErrorCode.MALFORMED_FRAME, message, request_id)


def _command_codec(command_type: type[Command]) -> _CommandCodec:
    schema = struct_schema(command_type)
    tag = int(command_type.TYPE)
    names = schema.field_names
    to_wire: Callable[[Any], tuple[Any, ...]]
    if not names:

        def to_wire(command: Any) -> tuple[Any, ...]:
            return (tag,)

    elif len(names) == 1:
        get_one = attrgetter(names[0])

        def to_wire(command: Any) -> tuple[Any, ...]:
            return (tag, get_one(command))

    else:
        get_all = attrgetter(*names)

        def to_wire(command: Any) -> tuple[Any, ...]:
            return (tag, *get_all(command))

    request_id_index = names.index("request_id") + 1 if "request_id" in names else None
    return _CommandCodec(schema, to_wire, request_id_index)


_CODECS_BY_CLASS: dict[type[Command], _CommandCodec] = {
    command_type: _command_codec(command_type) for command_type in COMMAND_CLASSES
}
_CODECS_BY_TAG: dict[int, _CommandCodec] = {
    int(command_type.TYPE): codec for command_type, codec in _CODECS_BY_CLASS.items()
}


def encode_frame(command: Command) -> bytes:
    codec = _CODECS_BY_CLASS.get(type(command))
    if codec is None:
        raise TypeError(f"{type(command).__name__} is not a protocol command")
    frame: bytes = msgpack.packb(codec.to_wire(command), use_bin_type=True, default=wire_form)
    return frame


def decode_frame(data: bytes, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> Command:
    size = len(data)
    if size > max_frame_bytes:
        raise ProtocolError(
            ErrorCode.FRAME_TOO_LARGE,
            f"the frame is {size} bytes, over the limit of {max_frame_bytes}",
        )
    try:
        frame = msgpack.unpackb(
            data,
            raw=False,
            use_list=False,
            strict_map_key=True,
            max_str_len=size,
            max_bin_len=size,
            max_array_len=size,
            max_map_len=size,
            max_ext_len=0,
        )
    except (ValueError, TypeError, msgpack.UnpackException) as error:
        reason = str(error) or type(error).__name__
        raise ProtocolError(
            ErrorCode.MALFORMED_FRAME, f"the frame is not one msgpack value: {reason}"
        ) from error
    if type(frame) is not tuple or not frame:
        raise ProtocolError(
            ErrorCode.MALFORMED_FRAME,
            f"a frame is a msgpack array [tag, fields...], got {describe(frame)}",
        )
    tag = frame[0]
    if type(tag) is not int:
        raise ProtocolError(
            ErrorCode.MALFORMED_FRAME, f"a frame opens with an int tag, got {describe(tag)}"
        )
    codec = _CODECS_BY_TAG.get(tag)
    if codec is None:
        raise ProtocolError(ErrorCode.UNKNOWN_COMMAND, f"no command has the tag {tag}")
    return codec.decode(frame)
