"""metadata validation, worded as kube-apiserver's ValidateObjectMeta words it."""

from __future__ import annotations

from typing import Any

from scalable_topics.kubeapi.object_meta import metadata_causes


def lines(meta: dict[str, Any], *, dns_label_name: bool = False) -> list[str]:
    return [f"{c.field}: {c.message}" for c in metadata_causes(meta, dns_label_name=dns_label_name)]


def test_valid_metadata_has_no_causes() -> None:
    meta = {
        "name": "orders.v1",
        "labels": {"app.kubernetes.io/name": "st", "empty": ""},
        "annotations": {"example.com/note": "anything at all"},
        "finalizers": ["scalabletopics.dev/cleanup"],
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u"}],
    }
    assert lines(meta) == []


def test_names() -> None:
    assert lines({"name": "Bad_Name"}) == [
        'metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist '
        "of lower case alphanumeric characters, '-' or '.', and must start and end with an "
        "alphanumeric character (e.g. 'example.com', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    ]
    assert lines({"name": "a" * 254})[0] == (
        f'metadata.name: Invalid value: "{"a" * 254}": must be no more than 253 characters'
    )
    assert lines({"name": "a.b"}, dns_label_name=True) == [
        'metadata.name: Invalid value: "a.b": must not contain dots'
    ]


def test_labels_annotations_and_finalizers() -> None:
    found = lines({"labels": {"a/b/c": "x", "k": "a" * 64}})
    assert found[0].startswith('metadata.labels: Invalid value: "a/b/c": a valid label key must')
    assert (
        found[1] == f'metadata.labels: Invalid value: "{"a" * 64}": must be no more than 63 bytes'
    )
    assert lines({"annotations": {"/x": "v"}}) == [
        'metadata.annotations: Invalid value: "/x": prefix part must be non-empty'
    ]
    assert lines({"annotations": {"k": "v" * (256 * 1024)}}) == [
        "metadata.annotations: Too long: may not be more than 262144 bytes"
    ]
    assert lines({"finalizers": ["ok", 7]}) == [
        "metadata.finalizers[1]: Invalid value: 7: must be a string"
    ]


def test_owner_references_and_shapes() -> None:
    assert lines({"ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p"}]}) == [
        "metadata.ownerReferences[0].uid: Required value"
    ]
    assert lines({"labels": ["a"]}) == [
        'metadata.labels: Invalid value: ["a"]: must be a map of strings'
    ]
