"""The ``/openapi/v2`` document in protobuf, as kube-apiserver sends it to a client that asks for
``application/com.github.proto-openapi.spec.v2@v1.0+protobuf``.

kubectl asks for nothing else when it validates a manifest client-side, which it does for a
kind whose OpenAPI v3 does not show the server validating it (a kind no CRD defines, a
``kind: List``): it looks the kind up in this document and, when no definition names it, leaves
the error to the mapping step (``no matches for kind ...; ensure CRDs are installed first``).

The message is gnostic's ``openapi.v2.Document`` (gnostic-models, openapiv2/OpenAPIv2.proto),
which kube-openapi compiles from the JSON document: each object becomes its message, fields in
field-number order; map-like objects (paths, definitions, properties, responses) become
repeated (name, value) pairs in the document's order; keys starting ``x-`` become the message's
vendor extensions; free-form values (``default``, ``enum``, ``example``, extensions) become an
``Any`` holding their YAML; and where the model has a choice (a parameter's kind, a ``$ref``
or an object) the same rule picks it. Scalars at their zero value are left out, as proto3
writes them. A key the model does not have is an error (gnostic rejects such a document; here
a ValueError names it).
"""

from __future__ import annotations

import functools
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

# (field number, value, where in the document) -> the field's bytes, key included.
Codec = Callable[[int, Any, str], bytes]

_VARINT, _I64, _LEN = 0, 1, 2
# libyaml's emitter when PyYAML has it (the same text, several times faster).
_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_ONE_BYTE = tuple(bytes((value,)) for value in range(0x80))


def _varint(number: int) -> bytes:
    if 0 <= number < 0x80:
        return _ONE_BYTE[number]
    number &= (1 << 64) - 1  # a negative int64 is its two's complement, ten bytes
    out = bytearray()
    while number > 0x7F:
        out.append(number & 0x7F | 0x80)
        number >>= 7
    out.append(number)
    return bytes(out)


@functools.cache
def _key(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field: a string or a message."""
    return _key(number, _LEN) + _varint(len(payload)) + payload


def _bad(where: str, wanted: str, value: Any) -> ValueError:
    return ValueError(f"{where}: expected {wanted}, got {value!r}")


# -- scalars -----------------------------------------------------------------------------------


def _string(number: int, value: Any, where: str) -> bytes:
    if not isinstance(value, str):
        raise _bad(where, "a string", value)
    return _field(number, value.encode()) if value else b""


def _bool(number: int, value: Any, where: str) -> bytes:
    if not isinstance(value, bool):
        raise _bad(where, "a boolean", value)
    return _key(number, _VARINT) + b"\x01" if value else b""


def _int64(number: int, value: Any, where: str) -> bytes:
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not whole:
        raise _bad(where, "an integer", value)
    return _key(number, _VARINT) + _varint(int(value)) if value else b""


def _double(number: int, value: Any, where: str) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _bad(where, "a number", value)
    packed = struct.pack("<d", value)
    return _key(number, _I64) + packed if packed != bytes(8) else b""  # -0.0 is written


def _strings(number: int, value: Any, where: str) -> bytes:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _bad(where, "a list of strings", value)
    return b"".join(_field(number, item.encode()) for item in value)


def _yaml(value: Any) -> str:
    text: str = yaml.dump(
        value, Dumper=_DUMPER, sort_keys=False, allow_unicode=True, default_flow_style=False
    )
    return text


def _any(number: int, value: Any, where: str) -> bytes:
    """gnostic's Any: the value as YAML text (field 2)."""
    return _field(number, _field(2, _yaml(value).encode()))


def _anys(number: int, value: Any, where: str) -> bytes:
    if not isinstance(value, list):
        raise _bad(where, "a list", value)
    return b"".join(_any(number, item, f"{where}[{i}]") for i, item in enumerate(value))


# -- messages ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Message:
    fields: Mapping[str, tuple[int, Codec]]
    extensions: int | None = None  # the field number of its vendor extensions
    # Keys matching ``pattern`` are (name, value) pairs in field ``pattern_field``.
    pattern: re.Pattern[str] | None = None
    pattern_field: int = 0
    pattern_value: Codec | None = None


def _sequential(*fields: tuple[str, Codec], extensions: bool = True) -> _Message:
    """A message whose fields are numbered in order from 1, its vendor extensions last."""
    numbered = {name: (i, codec) for i, (name, codec) in enumerate(fields, start=1)}
    return _Message(numbered, len(fields) + 1 if extensions else None)


def encode_message(name: str, value: Any, where: str) -> bytes:
    """``value`` (a JSON object) as the gnostic message ``name``."""
    message = _MESSAGES[name]
    if not isinstance(value, Mapping):
        raise _bad(where, f"an object ({name})", value)
    parts: list[tuple[int, bytes]] = []
    for key, item in value.items():
        at = f"{where}.{key}"
        if key in message.fields:
            number, codec = message.fields[key]
            parts.append((number, codec(number, item, at)))
        elif message.extensions is not None and key.startswith("x-"):
            number = message.extensions
            parts.append((number, _field(number, _field(1, key.encode()) + _any(2, item, at))))
        elif message.pattern is not None and message.pattern.search(key):
            assert message.pattern_value is not None
            number = message.pattern_field
            pair = _field(1, key.encode()) + message.pattern_value(2, item, at)
            parts.append((number, _field(number, pair)))
        else:
            raise ValueError(f"{where}: {name} has no field {key!r}")
    parts.sort(key=lambda part: part[0])  # stable: repeated fields keep their order
    return b"".join(payload for _, payload in parts)


def _message(name: str) -> Codec:
    def encode(number: int, value: Any, where: str) -> bytes:
        return _field(number, encode_message(name, value, where))

    return encode


def _repeated(codec: Codec) -> Codec:
    def encode(number: int, value: Any, where: str) -> bytes:
        if not isinstance(value, list):
            raise _bad(where, "a list", value)
        return b"".join(codec(number, item, f"{where}[{i}]") for i, item in enumerate(value))

    return encode


def _named(value_codec: Codec) -> Codec:
    """A map (definitions, properties, ...): a message of repeated (name=1, value=2) pairs in
    its field 1."""

    def encode(number: int, value: Any, where: str) -> bytes:
        if not isinstance(value, Mapping):
            raise _bad(where, "an object", value)
        pairs = b"".join(
            _field(1, _field(1, key.encode()) + value_codec(2, item, f"{where}.{key}"))
            for key, item in value.items()
        )
        return _field(number, pairs)

    return encode


# -- where the model has a choice --------------------------------------------------------------


def _one_of(number: int, choice: int, payload: bytes) -> bytes:
    """A message holding one member of its oneof; a member is written even when empty."""
    return _field(number, _field(choice, payload))


def _type_item(number: int, value: Any, where: str) -> bytes:
    names = [value] if isinstance(value, str) else value
    return _field(number, _strings(1, names, where))


def _items_item(number: int, value: Any, where: str) -> bytes:
    # ItemsItem's schemas (field 1) hold one: gnostic reads an object only (a list is an error).
    return _field(number, _field(1, encode_message("Schema", value, where)))


def _additional_properties(number: int, value: Any, where: str) -> bytes:
    if isinstance(value, bool):
        return _field(number, _key(2, _VARINT) + _varint(int(value)))
    return _one_of(number, 1, encode_message("Schema", value, where))


def _json_reference(value: Mapping[str, Any], where: str) -> bytes:
    """gnostic's JsonReference keeps ``$ref`` and ``description`` and ignores other keys."""
    kept = {key: value[key] for key in ("$ref", "description") if key in value}
    return encode_message("JsonReference", kept, where)


_NON_BODY = {
    "header": (1, "HeaderParameterSubSchema"),
    "formData": (2, "FormDataParameterSubSchema"),
    "query": (3, "QueryParameterSubSchema"),
    "path": (4, "PathParameterSubSchema"),
}


def _parameter(number: int, value: Any, where: str) -> bytes:
    """A Parameter: a BodyParameter (1) for ``in: body``, else a NonBodyParameter (2) holding
    the sub-schema its ``in`` names."""
    if not isinstance(value, Mapping):
        raise _bad(where, "an object (Parameter)", value)
    located = value.get("in")
    if located == "body":
        return _one_of(number, 1, encode_message("BodyParameter", value, where))
    if located not in _NON_BODY:
        raise _bad(f"{where}.in", "body, header, formData, query or path", located)
    choice, name = _NON_BODY[located]
    return _one_of(number, 2, _field(choice, encode_message(name, value, where)))


def _parameters_item(number: int, value: Any, where: str) -> bytes:
    if isinstance(value, Mapping) and "$ref" in value:
        return _one_of(number, 2, _json_reference(value, where))
    return _field(number, _parameter(1, value, where))


def _response_value(number: int, value: Any, where: str) -> bytes:
    if isinstance(value, Mapping) and "$ref" in value:
        return _one_of(number, 2, _json_reference(value, where))
    return _one_of(number, 1, encode_message("Response", value, where))


_FILE_SCHEMA_KEYS = frozenset(
    [
        "default",
        "description",
        "example",
        "externalDocs",
        "format",
        "readOnly",
        "required",
        "title",
        "type",
    ]
)


def _schema_item(number: int, value: Any, where: str) -> bytes:
    """A response's schema. gnostic tries a Schema, then a FileSchema, and keeps the last that
    fits: a FileSchema whenever ``type`` is a string and every key is one a FileSchema has."""
    is_file = (
        isinstance(value, Mapping)
        and isinstance(value.get("type"), str)
        and all(key in _FILE_SCHEMA_KEYS or key.startswith("x-") for key in value)
    )
    if is_file:
        return _one_of(number, 2, encode_message("FileSchema", value, where))
    return _one_of(number, 1, encode_message("Schema", value, where))


_OAUTH2_FLOWS = {
    "implicit": (3, "Oauth2ImplicitSecurity"),
    "password": (4, "Oauth2PasswordSecurity"),
    "application": (5, "Oauth2ApplicationSecurity"),
    "accessCode": (6, "Oauth2AccessCodeSecurity"),
}


def _security_definitions_item(number: int, value: Any, where: str) -> bytes:
    if not isinstance(value, Mapping):
        raise _bad(where, "an object (SecurityDefinitionsItem)", value)
    kind = value.get("type")
    if kind == "basic":
        choice, name = 1, "BasicAuthenticationSecurity"
    elif kind == "apiKey":
        choice, name = 2, "ApiKeySecurity"
    elif kind == "oauth2" and value.get("flow") in _OAUTH2_FLOWS:
        choice, name = _OAUTH2_FLOWS[value["flow"]]
    else:
        raise _bad(where, "a basic, apiKey or oauth2 (with its flow) security scheme", value)
    return _one_of(number, choice, encode_message(name, value, where))


# -- the model ---------------------------------------------------------------------------------

_S, _B, _I, _D, _SS = _string, _bool, _int64, _double, _strings
_EXTERNAL_DOCS = _message("ExternalDocs")


def _string_array(number: int, value: Any, where: str) -> bytes:
    return _field(number, _strings(1, value, where))


def _limits(*, items: Codec | None) -> tuple[tuple[str, Codec], ...]:
    """The primitive keywords non-body parameters, headers and primitive items share, from
    ``type`` to ``multipleOf`` (``items`` where the message has them)."""
    head: tuple[tuple[str, Codec], ...] = (("type", _S), ("format", _S))
    if items is not None:
        head += (("items", items), ("collectionFormat", _S))
    return (
        *head,
        ("default", _any),
        ("maximum", _D),
        ("exclusiveMaximum", _B),
        ("minimum", _D),
        ("exclusiveMinimum", _B),
        ("maxLength", _I),
        ("minLength", _I),
        ("pattern", _S),
        ("maxItems", _I),
        ("minItems", _I),
        ("uniqueItems", _B),
        ("enum", _anys),
        ("multipleOf", _D),
    )


_PRIMITIVES = _message("PrimitivesItems")
_PARAMETER_HEAD = (("required", _B), ("in", _S), ("description", _S), ("name", _S))
_ALLOW_EMPTY = (("allowEmptyValue", _B),)
_SECURITY = _repeated(_message("SecurityRequirement"))

_MESSAGES: dict[str, _Message] = {
    "Document": _sequential(
        ("swagger", _S),
        ("info", _message("Info")),
        ("host", _S),
        ("basePath", _S),
        ("schemes", _SS),
        ("consumes", _SS),
        ("produces", _SS),
        ("paths", _message("Paths")),
        ("definitions", _named(_message("Schema"))),
        ("parameters", _named(_parameter)),
        ("responses", _named(_message("Response"))),
        ("security", _SECURITY),
        ("securityDefinitions", _named(_security_definitions_item)),
        ("tags", _repeated(_message("Tag"))),
        ("externalDocs", _EXTERNAL_DOCS),
    ),
    "Info": _sequential(
        ("title", _S),
        ("version", _S),
        ("description", _S),
        ("termsOfService", _S),
        ("contact", _message("Contact")),
        ("license", _message("License")),
    ),
    "Contact": _sequential(("name", _S), ("url", _S), ("email", _S)),
    "License": _sequential(("name", _S), ("url", _S)),
    "ExternalDocs": _sequential(("description", _S), ("url", _S)),
    "Tag": _sequential(("name", _S), ("description", _S), ("externalDocs", _EXTERNAL_DOCS)),
    "Xml": _sequential(
        ("name", _S), ("namespace", _S), ("prefix", _S), ("attribute", _B), ("wrapped", _B)
    ),
    "Paths": _Message(
        {},
        extensions=1,
        pattern=re.compile("^/"),
        pattern_field=2,
        pattern_value=_message("PathItem"),
    ),
    "PathItem": _sequential(
        ("$ref", _S),
        *((method, _message("Operation")) for method in ("get", "put", "post", "delete")),
        *((method, _message("Operation")) for method in ("options", "head", "patch")),
        ("parameters", _repeated(_parameters_item)),
    ),
    "Operation": _sequential(
        ("tags", _SS),
        ("summary", _S),
        ("description", _S),
        ("externalDocs", _EXTERNAL_DOCS),
        ("operationId", _S),
        ("produces", _SS),
        ("consumes", _SS),
        ("parameters", _repeated(_parameters_item)),
        ("responses", _message("Responses")),
        ("schemes", _SS),
        ("deprecated", _B),
        ("security", _SECURITY),
    ),
    "JsonReference": _sequential(("$ref", _S), ("description", _S), extensions=False),
    "BodyParameter": _sequential(
        ("description", _S),
        ("name", _S),
        ("in", _S),
        ("required", _B),
        ("schema", _message("Schema")),
    ),
    "HeaderParameterSubSchema": _sequential(*_PARAMETER_HEAD, *_limits(items=_PRIMITIVES)),
    "PathParameterSubSchema": _sequential(*_PARAMETER_HEAD, *_limits(items=_PRIMITIVES)),
    "QueryParameterSubSchema": _sequential(
        *_PARAMETER_HEAD, *_ALLOW_EMPTY, *_limits(items=_PRIMITIVES)
    ),
    "FormDataParameterSubSchema": _sequential(
        *_PARAMETER_HEAD, *_ALLOW_EMPTY, *_limits(items=_PRIMITIVES)
    ),
    "PrimitivesItems": _sequential(*_limits(items=_PRIMITIVES)),
    "Header": _sequential(*_limits(items=_PRIMITIVES), ("description", _S)),
    "Responses": _Message(
        {},
        extensions=2,
        pattern=re.compile(r"^([0-9]{3})$|^(default)$"),
        pattern_field=1,
        pattern_value=_response_value,
    ),
    "Response": _sequential(
        ("description", _S),
        ("schema", _schema_item),
        ("headers", _named(_message("Header"))),
        ("examples", _named(_any)),
    ),
    "Schema": _sequential(
        ("$ref", _S),
        ("format", _S),
        ("title", _S),
        ("description", _S),
        ("default", _any),
        ("multipleOf", _D),
        ("maximum", _D),
        ("exclusiveMaximum", _B),
        ("minimum", _D),
        ("exclusiveMinimum", _B),
        ("maxLength", _I),
        ("minLength", _I),
        ("pattern", _S),
        ("maxItems", _I),
        ("minItems", _I),
        ("uniqueItems", _B),
        ("maxProperties", _I),
        ("minProperties", _I),
        ("required", _SS),
        ("enum", _anys),
        ("additionalProperties", _additional_properties),
        ("type", _type_item),
        ("items", _items_item),
        ("allOf", _repeated(_message("Schema"))),
        ("properties", _named(_message("Schema"))),
        ("discriminator", _S),
        ("readOnly", _B),
        ("xml", _message("Xml")),
        ("externalDocs", _EXTERNAL_DOCS),
        ("example", _any),
    ),
    "FileSchema": _sequential(
        ("format", _S),
        ("title", _S),
        ("description", _S),
        ("default", _any),
        ("required", _SS),
        ("type", _S),
        ("readOnly", _B),
        ("externalDocs", _EXTERNAL_DOCS),
        ("example", _any),
    ),
    # Each scheme's name, with the scopes it needs (a StringArray).
    "SecurityRequirement": _Message(
        {}, pattern=re.compile(""), pattern_field=1, pattern_value=_string_array
    ),
    "BasicAuthenticationSecurity": _sequential(("type", _S), ("description", _S)),
    "ApiKeySecurity": _sequential(("type", _S), ("name", _S), ("in", _S), ("description", _S)),
    "Oauth2ImplicitSecurity": _sequential(
        ("type", _S),
        ("flow", _S),
        ("scopes", _named(_S)),
        ("authorizationUrl", _S),
        ("description", _S),
    ),
    "Oauth2PasswordSecurity": _sequential(
        ("type", _S), ("flow", _S), ("scopes", _named(_S)), ("tokenUrl", _S), ("description", _S)
    ),
    "Oauth2ApplicationSecurity": _sequential(
        ("type", _S), ("flow", _S), ("scopes", _named(_S)), ("tokenUrl", _S), ("description", _S)
    ),
    "Oauth2AccessCodeSecurity": _sequential(
        ("type", _S),
        ("flow", _S),
        ("scopes", _named(_S)),
        ("authorizationUrl", _S),
        ("tokenUrl", _S),
        ("description", _S),
    ),
}


def encode_document(document: Mapping[str, Any]) -> bytes:
    """The Swagger 2.0 ``document`` as a serialised gnostic ``openapi.v2.Document``."""
    return encode_message("Document", document, "#")
