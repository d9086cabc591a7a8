"""The wire type of every field, derived once from the type hints of commands and values.

=====================================  ===============================================
Python type                            wire (msgpack)
=====================================  ===============================================
``int``                                int in ``0 .. 2**64-1``; a bool is refused
``bool``                               bool
``str``                                str (UTF-8)
``bytes``                              bin
``X | None``                           nil, or X
``tuple[X, ...]``                      array of X
``Mapping[str, str]``                  map of str to str
an enum                                its value
a NamedTuple or dataclass              array of its fields, in declaration order
=====================================  ===============================================

Decoding checks each value against its type and raises :class:`FieldError`; the path to the
offending field is collected while the error unwinds, so valid data never pays for it. The
values that come by the hundred per frame are first tried by the inline checks of
``fast_paths.py``; only a value those refuse goes through the generic decoder.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from enum import Enum
from types import NoneType, UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

from .fast_paths import ACCEPTORS, Acceptor

Decoder = Callable[[Any], Any]

_MAX_QUOTED = 40


class FieldError(Exception):
    """A wire value that does not fit its field."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self._path_innermost_first: list[str] = []

    def within(self, part: str) -> None:
        """Record that the value sat at ``part`` (``.name`` or ``[index]``) of its container."""
        self._path_innermost_first.append(part)

    @property
    def path(self) -> str:
        return "".join(reversed(self._path_innermost_first))


def describe(value: object) -> str:
    """A wire value's msgpack type, and the value itself when short, for error messages."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return f"bool {str(value).lower()}"
    if isinstance(value, int | float):
        return f"{type(value).__name__} {value}"
    if isinstance(value, str):
        return f"str {_clip(repr(value))}"
    if isinstance(value, bytes):
        return f"bin of {len(value)} bytes"
    if isinstance(value, tuple):
        return f"array of {len(value)}"
    if isinstance(value, dict):
        return f"map of {len(value)}"
    return type(value).__name__


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_QUOTED else text[: _MAX_QUOTED - 3] + "..."


# -- scalars --------------------------------------------------------------------------------------


def _uint(value: Any) -> int:
    # msgpack cannot carry an int above 2**64-1, so only the lower bound needs a check.
    if type(value) is int and value >= 0:
        return value
    raise FieldError(f"expected an unsigned int, got {describe(value)}")


def _bool(value: Any) -> bool:
    if type(value) is bool:
        return value
    raise FieldError(f"expected a bool, got {describe(value)}")


def _str(value: Any) -> str:
    if type(value) is str:
        return value
    raise FieldError(f"expected a str, got {describe(value)}")


def _bin(value: Any) -> bytes:
    if type(value) is bytes:
        return value
    raise FieldError(f"expected bin, got {describe(value)}")


def _string_map(value: Any) -> Mapping[str, str]:
    if type(value) is not dict:
        raise FieldError(f"expected a map of str to str, got {describe(value)}")
    for key, item in value.items():
        if type(key) is not str:
            raise FieldError(f"expected str keys, got {describe(key)}")
        if type(item) is not str:
            error = FieldError(f"expected a str, got {describe(item)}")
            error.within(f"[{_clip(repr(key))}]")
            raise error
    return value


# -- composites -----------------------------------------------------------------------------------


def _optional(decode_present: Decoder) -> Decoder:
    def decode(value: Any) -> Any:
        return None if value is None else decode_present(value)

    return decode


def _array(decode_item: Decoder) -> Decoder:
    def decode(value: Any) -> tuple[Any, ...]:
        if type(value) is not tuple:
            raise FieldError(f"expected an array, got {describe(value)}")
        items = []
        for index, item in enumerate(value):
            try:
                items.append(decode_item(item))
            except FieldError as error:
                error.within(f"[{index}]")
                raise
        return tuple(items)

    return decode


def _accepted_or_explained(accept: Acceptor, decode_any: Decoder) -> Decoder:
    def decode(value: Any) -> Any:
        accepted = accept(value)
        return decode_any(value) if accepted is None else accepted

    return decode


def _array_accepted_or_explained(accept: Acceptor, decode_any_array: Decoder) -> Decoder:
    def decode(value: Any) -> Any:
        if type(value) is tuple:
            items = tuple(map(accept, value))
            if None not in items:
                return items
        return decode_any_array(value)

    return decode


def _enum(enum_type: type[Enum]) -> Decoder:
    by_value = {member.value: member for member in enum_type}
    value_types = {type(value) for value in by_value}
    allowed = ", ".join(repr(value) for value in by_value)
    expected = f"one of {allowed}" if len(by_value) <= 8 else f"a value of {enum_type.__name__}"

    def decode(value: Any) -> Enum:
        member = by_value.get(value) if type(value) in value_types else None
        if member is None:
            raise FieldError(f"expected {expected}, got {describe(value)}")
        return member

    return decode


@dataclasses.dataclass(frozen=True, slots=True)
class StructSchema:
    """A NamedTuple's or dataclass's fields, their decoders, and how to build the value."""

    name: str
    field_names: tuple[str, ...]
    decoders: tuple[Decoder, ...]
    build: Callable[[list[Any]], Any]

    def decode(self, value: Any) -> Any:
        if type(value) is not tuple or len(value) != len(self.field_names):
            raise FieldError(
                f"expected an array of {len(self.field_names)} "
                f"({', '.join(self.field_names)}), got {describe(value)}"
            )
        return self.decode_fields(value)

    def decode_fields(self, items: tuple[Any, ...]) -> Any:
        """Decode exactly ``len(field_names)`` wire values into the value they describe."""
        values = []
        for name, decode, item in zip(self.field_names, self.decoders, items, strict=True):
            try:
                values.append(decode(item))
            except FieldError as error:
                error.within(f".{name}")
                raise
        try:
            return self.build(values)
        except ValueError as error:  # an invariant of the type, checked by its constructor
            raise FieldError(str(error)) from error


def struct_schema(struct_type: type) -> StructSchema:
    schema = _SCHEMAS.get(struct_type)
    if schema is None:
        schema = _SCHEMAS[struct_type] = _derive_struct_schema(struct_type)
    return schema


_SCHEMAS: dict[type, StructSchema] = {}


def _derive_struct_schema(struct_type: type) -> StructSchema:
    hints = get_type_hints(struct_type)
    if _is_named_tuple(struct_type):
        names: tuple[str, ...] = struct_type._fields  # type: ignore[attr-defined]
        build: Callable[[list[Any]], Any] = struct_type._make  # type: ignore[attr-defined]
    elif dataclasses.is_dataclass(struct_type):
        names = tuple(f.name for f in dataclasses.fields(struct_type))

        def build(values: list[Any]) -> Any:
            return struct_type(*values)

    else:
        raise TypeError(f"{struct_type!r} is neither a NamedTuple nor a dataclass")
    return StructSchema(
        name=struct_type.__name__,
        field_names=names,
        decoders=tuple(decoder_for(hints[name]) for name in names),
        build=build,
    )


def decoder_for(hint: Any) -> Decoder:
    """The decoder of one type hint; a hint without a wire form is a programming error."""
    scalar = _SCALARS.get(hint)
    if scalar is not None:
        return scalar
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, UnionType) and len(args) == 2 and NoneType in args:
        (present,) = (arg for arg in args if arg is not NoneType)
        return _optional(decoder_for(present))
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        decode_array = _array(decoder_for(args[0]))
        accept_item = ACCEPTORS.get(args[0])
        if accept_item is not None:
            return _array_accepted_or_explained(accept_item, decode_array)
        return decode_array
    if origin is Mapping and args == (str, str):
        return _string_map
    if isinstance(hint, type) and issubclass(hint, Enum):
        return _enum(hint)
    if isinstance(hint, type) and (_is_named_tuple(hint) or dataclasses.is_dataclass(hint)):
        accept = ACCEPTORS.get(hint)
        if accept is not None:
            return _accepted_or_explained(accept, struct_schema(hint).decode)
        return struct_schema(hint).decode
    raise TypeError(f"the protocol has no wire form for {hint!r}")


_SCALARS: dict[Any, Decoder] = {int: _uint, bool: _bool, str: _str, bytes: _bin}


def _is_named_tuple(cls: type) -> bool:
    return issubclass(cls, tuple) and hasattr(cls, "_fields")


def wire_form(value: object) -> object:
    """msgpack's hook for the values it cannot write natively (NamedTuples, enums, dicts and
    tuples it can): dataclasses inside values (HashRange) and mappings that are not dicts."""
    if isinstance(value, Mapping):
        return dict(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return tuple(getattr(value, f.name) for f in dataclasses.fields(value))
    raise TypeError(f"the protocol has no wire form for {type(value).__name__}")
