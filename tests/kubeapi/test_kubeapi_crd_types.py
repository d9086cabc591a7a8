"""CustomResourceDefinitions: resources, validation in the API server's words, status."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from scalable_topics.kubeapi import builtins, crd_types
from scalable_topics.kubeapi.status import invalid
from scalable_topics.model.resources import GROUP

CRD_DIR = Path(__file__).parents[2] / "crds"
# Every CRD file (crds/ also holds its kustomization.yaml).
PROJECT_CRDS = {
    p.name: yaml.safe_load(p.read_text()) for p in sorted(CRD_DIR.glob(f"{GROUP}_*.yaml"))
}
THEN = datetime(2026, 5, 1, tzinfo=UTC)


def widget_crd(**spec: Any) -> dict[str, Any]:
    crd: dict[str, Any] = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {"size": {"type": "integer"}},
                                }
                            },
                        }
                    },
                }
            ],
        },
    }
    crd["spec"].update(spec)
    return crd


def messages(crd: dict[str, Any]) -> list[str]:
    return [cause.describe() for cause in crd_types.validate(crd)]


@pytest.mark.parametrize("name", sorted(PROJECT_CRDS))
def test_the_project_crds_are_valid(name: str) -> None:
    assert crd_types.validate(PROJECT_CRDS[name]) == []


def test_the_builtin_schemas_would_be_valid_crd_schemas() -> None:
    """Structural, as the API server requires of a CRD (so admission and pruning can use them)."""
    for resource in builtins.BUILTIN_RESOURCES:
        crd = widget_crd()
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = copy.deepcopy(resource.schema)
        assert crd_types.validate(crd) == [], resource.kind


def test_resource_types() -> None:
    [topic] = crd_types.resource_types(PROJECT_CRDS["scalabletopics.dev_scalabletopics.yaml"])
    assert (topic.group, topic.version, topic.kind, topic.plural, topic.singular) == (
        "scalabletopics.dev",
        "v1alpha1",
        "ScalableTopic",
        "scalabletopics",
        "scalabletopic",
    )
    assert topic.namespaced and topic.status_subresource
    assert topic.short_names == ("st",) and topic.categories == ("streaming",)
    assert [c["name"] for c in topic.printer_columns] == [
        "Segments",
        "Epoch",
        "Leader",
        "Phase",
        "Age",
    ]
    assert topic.store_kind == "ScalableTopic" and topic.schema is not None

    crd = widget_crd()
    crd["spec"]["versions"].append(
        {**crd["spec"]["versions"][0], "name": "v2", "storage": False, "served": False}
    )
    assert [t.version for t in crd_types.resource_types(crd)] == ["v1"]
    assert crd_types.storage_version(crd) == "v1"
    assert crd_types.resource_types(crd)[0].singular == "widget"  # defaulted from the kind


def test_defaults() -> None:
    crd = crd_types.with_defaults(widget_crd())
    assert crd["spec"]["names"]["singular"] == "widget"
    assert crd["spec"]["names"]["listKind"] == "WidgetList"
    assert crd["spec"]["conversion"] == {"strategy": "None"}
    assert crd["status"]["storedVersions"] == ["v1"]


def test_name_must_be_plural_dot_group() -> None:
    crd = widget_crd()
    crd["metadata"]["name"] = "widget.example.com"
    assert messages(crd) == [
        'metadata.name: Invalid value: "widget.example.com": must be spec.names.plural+"."+spec.group'
    ]


def test_spec_fields() -> None:
    crd = widget_crd(group="example", scope="Global")
    crd["metadata"]["name"] = "widgets.example"
    assert messages(crd) == [
        'spec.group: Invalid value: "example": should be a domain with at least one dot',
        'spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced"',
    ]
    crd = widget_crd(
        names={"plural": "Widgets", "kind": "Widget_Thing", "shortNames": ["w1", "1w"]}
    )
    crd["metadata"]["name"] = "Widgets.example.com"
    found = messages(crd)
    assert (
        'spec.names.plural: Invalid value: "Widgets": a DNS-1035 label must consist of' in found[0]
    )
    assert any(
        m.startswith('spec.names.kind: Invalid value: "Widget_Thing": may have mixed case')
        for m in found
    )
    assert any(m.startswith('spec.names.shortNames[1]: Invalid value: "1w"') for m in found)


def test_exactly_one_storage_version() -> None:
    crd = widget_crd()
    version = crd["spec"]["versions"][0]
    crd["spec"]["versions"] = [
        {**version, "storage": False},
        {**version, "name": "v2", "storage": False},
    ]
    found = messages(crd)
    assert any(
        m.startswith("spec.versions: Invalid value: ")
        and m.endswith("must have exactly one version marked as storage version")
        for m in found
    )
    assert (
        "status.storedVersions: Invalid value: null: must have at least one stored version" in found
    )


def test_a_schema_is_required() -> None:
    crd = widget_crd()
    del crd["spec"]["versions"][0]["schema"]
    assert messages(crd) == ["spec.versions[0].schema.openAPIV3Schema: Required value"]


def test_schema_errors_of_a_single_version_read_spec_validation() -> None:
    crd = widget_crd()
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = {
        "type": "object",
        "properties": {
            "spec": {"properties": {"size": {"type": "integer"}}},
            "status": {"$ref": "#/definitions/Status", "type": "object"},
            "tags": {"type": "array"},
            "kind": {"type": "integer"},
        },
    }
    assert messages(crd) == [
        'spec.validation.openAPIV3Schema.properties[kind].type: Invalid value: "integer": must be string',
        "spec.validation.openAPIV3Schema.properties[spec].type: Required value: must not be empty for "
        "specified object fields",
        "spec.validation.openAPIV3Schema.properties[tags].items: Required value: must be specified",
        "spec.validation.openAPIV3Schema.properties[status].$ref: Forbidden: $ref is not supported",
    ]


def test_schema_errors_of_differing_versions_read_their_version() -> None:
    crd = widget_crd()
    version = crd["spec"]["versions"][0]
    other = copy.deepcopy(version)
    other.update(name="v2", storage=False)
    other["schema"]["openAPIV3Schema"]["properties"]["extra"] = {"description": "untyped"}
    crd["spec"]["versions"].append(other)
    assert messages(crd) == [
        "spec.versions[1].schema.openAPIV3Schema.properties[extra].type: Required value: must not be "
        "empty for specified object fields"
    ]


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (
            {"type": "object", "additionalProperties": {"type": "string"}},
            [
                "spec.validation.openAPIV3Schema.additionalProperties: Forbidden: must not be used at the root"
            ],
        ),
        (
            {
                "type": "object",
                "properties": {
                    "metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}
                },
            },
            [
                "spec.validation.openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything "
                "other than name and generateName, but metadata is implicitly specified"
            ],
        ),
        (
            {
                "type": "object",
                "properties": {
                    "metadata": {
                        "type": "object",
                        "properties": {"name": {"type": "string", "maxLength": 10}},
                    }
                },
            },
            [],
        ),
        (
            {
                "type": "object",
                "properties": {
                    "a": {
                        "type": "object",
                        "properties": {"b": {"type": "string"}},
                        "additionalProperties": {"type": "string"},
                    }
                },
            },
            [
                "spec.validation.openAPIV3Schema.properties[a].additionalProperties: Forbidden: "
                "additionalProperties and properties are mutual exclusive"
            ],
        ),
        (
            {
                "type": "object",
                "properties": {
                    "a": {
                        "x-kubernetes-int-or-string": True,
                        "anyOf": [{"type": "integer"}, {"type": "string"}],
                    }
                },
            },
            [],
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string", "anyOf": [{"type": "string"}]}},
            },
            [
                "spec.validation.openAPIV3Schema.properties[a].anyOf[0].type: Forbidden: must be empty to be structural"
            ],
        ),
        (
            {
                "type": "object",
                "properties": {
                    "a": {
                        "type": "array",
                        "items": {"type": "string"},
                        "x-kubernetes-list-type": "map",
                    }
                },
            },
            [
                "spec.validation.openAPIV3Schema.properties[a].x-kubernetes-list-map-keys: Required value: must "
                "not be empty if x-kubernetes-list-type is map",
                'spec.validation.openAPIV3Schema.properties[a].items.type: Invalid value: "string": must be '
                "object if parent array's x-kubernetes-list-type is map",
            ],
        ),
        (
            {"type": "object", "properties": {"a": {"type": "null"}}},
            [
                'spec.validation.openAPIV3Schema.properties[a].type: Unsupported value: "null": supported '
                'values: "array", "boolean", "integer", "number", "object", "string"',
                "spec.validation.openAPIV3Schema.properties[a].type: Forbidden: type cannot be set to null, "
                "use nullable as an alternative",
            ],
        ),
        (
            {"type": "object", "properties": {"kind": {"type": "string", "default": "Widget"}}},
            [
                "spec.validation.openAPIV3Schema.properties[kind].default: Forbidden: must not be set in top-level kind"
            ],
        ),
    ],
)
def test_structural_schema_rules(schema: dict[str, Any], expected: list[str]) -> None:
    crd = widget_crd()
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = schema
    assert messages(crd) == expected


def test_status_subresource_restricts_the_root() -> None:
    crd = widget_crd()
    version = crd["spec"]["versions"][0]
    version["subresources"] = {"status": {}}
    version["schema"]["openAPIV3Schema"]["additionalProperties"] = False
    found = messages(crd)
    assert found[0].startswith("spec.validation.openAPIV3Schema: Invalid value: ")
    assert found[0].endswith(
        "only [Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength "
        "MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items Properties ExternalDocs "
        "Example XPreserveUnknownFields XValidations] fields are allowed at the root of the schema if the "
        "status subresource is enabled"
    )


def test_printer_columns() -> None:
    crd = widget_crd()
    crd["spec"]["versions"][0]["additionalPrinterColumns"] = [
        {"name": "Size", "type": "int", "jsonPath": ".spec.size"},
        {
            "name": "Ready",
            "type": "string",
            "format": "text",
            "jsonPath": 'status.conditions[?(@.type=="Ready")]',
        },
        {"name": "", "type": "string", "jsonPath": ".spec[bad"},
        {
            "name": "Ok",
            "type": "string",
            "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
        },
    ]
    found = messages(crd)
    assert found[0] == (
        'spec.additionalPrinterColumns[0].type: Invalid value: "int": must be one of boolean,date,integer,number,string'
    )
    assert found[1].startswith(
        'spec.additionalPrinterColumns[1].format: Invalid value: "text": must be one of byte,'
    )
    assert found[2] == (
        'spec.additionalPrinterColumns[1].JSONPath: Invalid value: "status.conditions[?(@.type==\\"Ready\\")]": '
        "must be a simple json path starting with ."
    )
    assert found[3] == "spec.additionalPrinterColumns[2].name: Required value"
    assert found[4].startswith(
        'spec.additionalPrinterColumns[2].JSONPath: Invalid value: ".spec[bad"'
    )
    assert len(found) == 5


def test_update_keeps_group_plural_and_established_scope() -> None:
    old = crd_types.with_defaults(widget_crd())
    old["status"] = crd_types.crd_status(old, now=THEN)
    new = widget_crd(scope="Cluster", group="example.org")
    new["metadata"]["name"] = "widgets.example.org"
    found = [c.describe() for c in crd_types.validate_update(new, old)]
    assert 'spec.scope: Invalid value: "Cluster": field is immutable' in found
    assert 'spec.group: Invalid value: "example.org": field is immutable' in found


def test_webhook_conversion_is_refused() -> None:
    crd = widget_crd(conversion={"strategy": "Webhook"})
    assert messages(crd) == [
        "spec.conversion.strategy: Forbidden: this API server does not call conversion webhooks; use None"
    ]


def test_status_of_an_accepted_crd() -> None:
    crd = widget_crd()
    status = crd_types.crd_status(crd, now=THEN)
    assert status == {
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "lastTransitionTime": "2026-05-01T00:00:00Z",
                "reason": "NoConflicts",
                "message": "no conflicts found",
            },
            {
                "type": "Established",
                "status": "True",
                "lastTransitionTime": "2026-05-01T00:00:00Z",
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
            },
        ],
        "acceptedNames": {
            "plural": "widgets",
            "singular": "widget",
            "kind": "Widget",
            "listKind": "WidgetList",
        },
        "storedVersions": ["v1"],
    }
    stored = {**crd, "status": status}
    assert crd_types.crd_status(stored, now=datetime(2030, 1, 1, tzinfo=UTC)) == status  # stable
    assert crd_types.is_established(stored)


def test_conflicting_names_are_not_accepted() -> None:
    crd = widget_crd(names={"plural": "widgets", "kind": "Widget", "shortNames": ["w"]})
    taken = [
        t
        for t in crd_types.resource_types(
            widget_crd(names={"plural": "gadgets", "kind": "Gadget", "shortNames": ["w"]})
        )
    ]
    status = crd_types.crd_status(crd, taken, now=THEN)
    names_accepted, established = status["conditions"]
    assert (names_accepted["status"], names_accepted["reason"], names_accepted["message"]) == (
        "False",
        "ShortNamesConflict",
        '"w" is already in use',
    )
    assert (established["status"], established["reason"]) == ("False", "NotAccepted")
    assert "shortNames" not in status["acceptedNames"]


def test_causes_make_the_api_servers_message() -> None:
    crd = widget_crd(scope="")
    error = invalid(
        "CustomResourceDefinition",
        "widgets.example.com",
        "apiextensions.k8s.io",
        crd_types.validate(crd),
    )
    assert error.message == (
        'CustomResourceDefinition.apiextensions.k8s.io "widgets.example.com" is invalid: spec.scope: Required value'
    )
