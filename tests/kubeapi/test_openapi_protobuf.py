"""``/openapi/v2`` in protobuf: gnostic's openapi.v2.Document, as kube-apiserver serves it to
kubectl. The bytes are read back with a schema-less wire reader, field numbers as in gnostic's
OpenAPIv2.proto."""

from __future__ import annotations

import struct
from typing import Any

import pytest
import yaml
from kubeapi_crds import resource_types

from scalable_topics.kubeapi import openapi
from scalable_topics.kubeapi.openapi_protobuf import encode_document, encode_message
from support.protobuf_wire import double, fields, message, named

RESOURCES = resource_types()
TOPIC = "dev.scalabletopics.v1alpha1.ScalableTopic"
TOPIC_ITEM_PATH = "/apis/scalabletopics.dev/v1alpha1/namespaces/{namespace}/scalabletopics/{name}"


def _schema(value: dict[str, Any]) -> bytes:
    return encode_message("Schema", value, "#")


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "string"}, bytes.fromhex("b201080a06") + b"string"),  # TypeItem, field 22
        ({"type": ["string", "null"]}, bytes.fromhex("b2010e0a06") + b"string" + b"\x0a\x04null"),
        ({"additionalProperties": False}, bytes.fromhex("aa01021000")),  # a oneof member: kept
        ({"additionalProperties": True}, bytes.fromhex("aa01021001")),
        ({"maxLength": 5}, bytes.fromhex("5805")),
        ({"maxLength": 0}, b""),  # proto3 leaves zero scalars out
        ({"maxItems": -1}, b"\x70" + b"\xff" * 9 + b"\x01"),  # int64: ten bytes
        ({"minimum": -1.5}, b"\x49" + struct.pack("<d", -1.5)),
        ({"minimum": 0}, b""),
        ({"uniqueItems": True}, bytes.fromhex("800101")),
        ({"uniqueItems": False, "description": ""}, b""),
        ({"required": ["a", ""]}, bytes.fromhex("9a010161") + bytes.fromhex("9a0100")),
        # Written in field-number order, whatever the document's order.
        ({"format": "int32", "$ref": "#/x"}, b"\x0a\x03#/x\x12\x05int32"),
    ],
)
def test_fields_are_written_as_protobuf_writes_them(
    schema: dict[str, Any], expected: bytes
) -> None:
    assert _schema(schema) == expected


def test_free_form_values_are_yaml_in_an_any() -> None:
    value = {"a": [1, "on", "2"], "b": None}
    encoded = fields(_schema({"default": value, "enum": ["x", 3], "example": "yes"}))
    [default], enum, [example] = encoded[5], encoded[20], encoded[30]
    assert _yaml(default) == value
    assert [_yaml(item) for item in enum] == ["x", 3]
    assert _yaml(example) == "yes"  # quoted: not YAML 1.1's true


def test_vendor_extensions_are_named_anys_after_the_fields() -> None:
    gvk = [{"group": "", "kind": "Pod", "version": "v1"}]
    encoded = list(fields(_schema({"x-kubernetes-group-version-kind": gvk, "title": "t"})).items())
    assert [number for number, _ in encoded] == [3, 31]
    [extension] = encoded[1][1]
    assert isinstance(extension, bytes)
    pair = fields(extension)
    assert pair[1] == [b"x-kubernetes-group-version-kind"]
    assert _yaml(pair[2][0]) == gvk


def test_a_key_the_model_does_not_have_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match=r"#\.properties\.a: Schema has no field 'nullable'"):
        _schema({"properties": {"a": {"nullable": True}}})
    with pytest.raises(ValueError, match=r"#\.maxLength: expected an integer, got 1\.5"):
        _schema({"maxLength": 1.5})
    with pytest.raises(ValueError, match=r"\.parameters\[0\]\.in: expected body, header"):
        encode_message("Operation", {"parameters": [{"name": "a", "in": "cookie"}]}, "")


def test_the_document_keeps_every_path_and_definition_in_order() -> None:
    document = openapi.v2_document(RESOURCES)
    encoded = encode_document(document)
    top = fields(encoded)
    assert top[1] == [b"2.0"]
    info = message(encoded, 2)
    assert info[1] == [b"Kubernetes"] and info[2] == [b"v1.37.0"]
    paths = fields(message_bytes(encoded, 8))
    assert [fields(p)[1][0].decode() for p in paths[2] if isinstance(p, bytes)] == list(
        document["paths"]
    )
    definitions = named(message_bytes(encoded, 9))
    assert list(definitions) == list(document["definitions"])


def test_a_definition_carries_its_properties_refs_and_kind() -> None:
    definitions = named(message_bytes(encode_document(openapi.v2_document(RESOURCES)), 9))
    topic = fields(definitions[TOPIC])
    properties = named(_only(topic[25]))
    assert {"apiVersion", "kind", "metadata", "spec", "status"} <= set(properties)
    assert fields(properties["metadata"])[1] == [
        b"#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    ]
    spec = fields(properties["spec"])
    assert fields(_only(spec[22]))[1] == [b"object"]
    initial_segments = fields(named(_only(spec[25]))["initialSegments"])
    assert fields(_only(initial_segments[22]))[1] == [b"integer"]
    extensions = {_only(fields(x)[1]).decode(): fields(x)[2][0] for x in topic[31]}
    assert _yaml(extensions["x-kubernetes-group-version-kind"]) == [
        {"group": "scalabletopics.dev", "kind": "ScalableTopic", "version": "v1alpha1"}
    ]
    labels = fields(named(_only(fields(definitions[_META + "ObjectMeta"])[25]))["labels"])
    assert fields(_only(fields(_only(labels[21]))[1]))[22]  # additionalProperties: a Schema


def test_parameters_and_responses_take_the_kind_gnostic_gives_them() -> None:
    encoded = encode_document(openapi.v2_document(RESOURCES))
    paths = {
        fields(p)[1][0].decode(): fields(p)[2][0]
        for p in fields(message_bytes(encoded, 8))[2]
        if isinstance(p, bytes)
    }
    item = paths[TOPIC_ITEM_PATH]
    assert isinstance(item, bytes)
    # Path-level parameters (field 9): path and query ones, each a NonBodyParameter.
    kinds = [_parameter_kind(p) for p in fields(item)[9]]
    assert kinds == [("path", "name"), ("path", "namespace"), ("query", "pretty")]
    patch = fields(_only(fields(item)[8]))
    parameters = [_parameter_kind(p) for p in patch[8]]
    assert parameters[0] == ("body", "body")
    assert ("query", "fieldValidation") in parameters
    responses = {
        fields(r)[1][0].decode(): fields(r)[2][0]
        for r in fields(_only(patch[9]))[1]
        if isinstance(r, bytes)
    }
    assert set(responses) == {"200", "201", "401"}
    ok = fields(_only(fields(responses["200"])[1]))  # a Response, not a JsonReference
    assert ok[1] == [b"OK"]
    schema = fields(_only(fields(_only(ok[2]))[1]))  # a Schema, not a FileSchema
    assert schema[1] == [b"#/definitions/" + TOPIC.encode()]
    extensions = {fields(x)[1][0] for x in patch[13] if isinstance(x, bytes)}
    assert extensions == {b"x-kubernetes-action", b"x-kubernetes-group-version-kind"}


def test_a_response_schema_of_a_bare_type_is_a_file_schema_as_gnostic_reads_it() -> None:
    responses = {"200": {"description": "OK", "schema": {"type": "string"}}}
    [pair] = fields(encode_message("Responses", responses, "#"))[1]
    assert isinstance(pair, bytes)
    response = fields(_only(fields(_only(fields(pair)[2]))[1]))
    assert fields(_only(fields(_only(response[2]))[2]))[6] == [b"string"]  # FileSchema.type
    referenced = {"default": {"$ref": "#/responses/x", "description": "d"}}
    [pair] = fields(encode_message("Responses", referenced, "#"))[1]
    assert isinstance(pair, bytes)
    reference = fields(_only(fields(_only(fields(pair)[2]))[2]))  # a JsonReference
    assert reference == {1: [b"#/responses/x"], 2: [b"d"]}


def test_a_number_limit_is_a_double() -> None:
    maximum = fields(_schema({"maximum": 65535}))[7]
    assert [double(v) for v in maximum] == [65535.0]


_META = "io.k8s.apimachinery.pkg.apis.meta.v1."


def message_bytes(data: bytes, number: int) -> bytes:
    return _only(fields(data)[number])


def _yaml(any_message: int | bytes) -> Any:
    """The value in a gnostic Any (its YAML text is field 2)."""
    assert isinstance(any_message, bytes)
    return yaml.safe_load(_only(fields(any_message)[2]).decode())


def _only(values: list[int | bytes]) -> bytes:
    [value] = values
    assert isinstance(value, bytes)
    return value


def _parameter_kind(item: int | bytes) -> tuple[str, str]:
    """(where, name) of a ParametersItem holding a Parameter."""
    assert isinstance(item, bytes)
    parameter = fields(_only(fields(item)[1]))
    if 1 in parameter:  # BodyParameter: description=1, name=2, in=3
        body = fields(_only(parameter[1]))
        return _only(body[3]).decode(), _only(body[2]).decode()
    [(choice, [sub_schema])] = fields(_only(parameter[2])).items()
    assert isinstance(sub_schema, bytes)
    sub = fields(sub_schema)  # required=1, in=2, description=3, name=4
    where = {1: "header", 2: "formData", 3: "query", 4: "path"}[choice]
    assert _only(sub[2]).decode() == where
    return where, _only(sub[4]).decode()
