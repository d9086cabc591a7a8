"""JSON merge patch: RFC 7386's own examples and properties over random documents."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalable_topics.store import merge_patch

# RFC 7386, appendix A (the cases whose target and patch are objects; the port patches objects).
RFC_EXAMPLES = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ({"x": [1, 2]}, {"x": {"a": "b", "c": None}}, {"x": {"a": "b"}}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch", "expected"), RFC_EXAMPLES)
def test_rfc_examples(target: dict[str, Any], patch: dict[str, Any], expected: Any) -> None:
    assert merge_patch(target, patch) == expected


def test_keeps_the_targets_member_order() -> None:
    merged = merge_patch({"b": 1, "a": 2, "c": 3}, {"a": 9, "d": 4, "b": None})
    assert list(merged) == ["a", "c", "d"]


# -- properties ------------------------------------------------------------------------------

scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=3)
keys = st.sampled_from(["a", "b", "c", "d"])
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=12,
)
json_objects = st.dictionaries(keys, json_values, max_size=4)


def rfc_reference(target: Any, patch: Any) -> Any:
    """The RFC's pseudo-code, transcribed."""
    if isinstance(patch, dict):
        if not isinstance(target, dict):
            target = {}
        target = dict(target)
        for name, value in patch.items():
            if value is None:
                target.pop(name, None)
            else:
                target[name] = rfc_reference(target.get(name), value)
        return target
    return patch


def containers(value: Any) -> list[Any]:
    found = []
    if isinstance(value, dict | list):
        found.append(value)
        for item in value.values() if isinstance(value, dict) else value:
            found += containers(item)
    return found


def without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    return value


def diff(source: dict[str, Any], wanted: dict[str, Any]) -> dict[str, Any]:
    """A merge patch that turns ``source`` into ``wanted`` (which holds no object nulls)."""
    patch: dict[str, Any] = {key: None for key in source if key not in wanted}
    for key, value in wanted.items():
        if isinstance(value, dict) and isinstance(source.get(key), dict):
            inner = diff(source[key], value)
            if inner:
                patch[key] = inner
        elif key not in source or source[key] != value or isinstance(value, dict):
            patch[key] = value
    return patch


@given(target=json_objects, patch=json_objects)
def test_agrees_with_the_rfc_pseudo_code(target: dict[str, Any], patch: dict[str, Any]) -> None:
    assert merge_patch(target, patch) == rfc_reference(target, patch)


@given(target=json_objects, patch=json_objects)
def test_inputs_are_neither_changed_nor_shared(
    target: dict[str, Any], patch: dict[str, Any]
) -> None:
    target_before, patch_before = copy.deepcopy(target), copy.deepcopy(patch)
    merged = merge_patch(target, patch)
    assert (target, patch) == (target_before, patch_before)
    inputs = {id(c) for c in containers(target) + containers(patch)}
    assert not any(id(c) in inputs for c in containers(merged))


@given(target=json_objects, patch=json_objects)
def test_applying_twice_changes_nothing_more(target: dict[str, Any], patch: dict[str, Any]) -> None:
    once = merge_patch(target, patch)
    assert merge_patch(once, patch) == once


@given(target=json_objects, patch=json_objects)
def test_patched_members_take_the_patch_and_others_stay(
    target: dict[str, Any], patch: dict[str, Any]
) -> None:
    merged = merge_patch(target, patch)
    for key, value in target.items():
        if key not in patch:
            assert merged[key] == value
    for key, value in patch.items():
        if value is None:
            assert key not in merged
        elif not isinstance(value, dict):
            assert merged[key] == value
        else:
            assert isinstance(merged[key], dict)
            assert not any(k in merged[key] for k, v in value.items() if v is None)


@given(source=json_objects, wanted=json_objects.map(without_nulls))
def test_a_diff_patch_reaches_the_wanted_document(
    source: dict[str, Any], wanted: dict[str, Any]
) -> None:
    assert merge_patch(source, diff(source, wanted)) == wanted
