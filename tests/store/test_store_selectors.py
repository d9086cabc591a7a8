"""Label selector parsing and matching, against examples and a reference evaluation."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalable_topics.store import Invalid
from scalable_topics.store.selectors import Operator, Requirement, parse_selector

LABELS = {"app": "web", "tier": "front", "example.com/owner": "team-a", "empty": ""}


@pytest.mark.parametrize(
    ("text", "matches"),
    [
        ("", True),
        ("   ", True),
        ("app=web", True),
        ("app==web", True),
        ("app = web", True),
        ("app=db", False),
        ("app!=db", True),
        ("app!=web", False),
        ("missing!=x", True),  # Kubernetes: != also matches objects without the key
        ("app in (web,db)", True),
        ("app in ( db , cache )", False),
        ("app notin (db)", True),
        ("app notin (web)", False),
        ("missing notin (x)", True),
        ("missing in (x)", False),
        ("app", True),
        ("missing", False),
        ("!missing", True),
        ("!app", False),
        ("! app", False),
        ("app=web,tier=front", True),
        ("app=web, tier=back", False),
        ("example.com/owner=team-a", True),
        ("example.com/owner in (team-b)", False),
        ("empty=", True),
        ("empty in ()", True),  # as in Kubernetes, () holds the empty value
        ("app=", False),
        ("tier in (front,),app", True),
        ("in=x", False),  # keywords are only keywords where an operator goes
    ],
)
def test_examples(text: str, matches: bool) -> None:
    assert parse_selector(text).matches(LABELS) is matches


def test_none_and_empty_select_everything() -> None:
    assert parse_selector(None).matches({})
    assert parse_selector("").is_empty


def test_parsed_structure() -> None:
    selector = parse_selector("a=1, b!=2, c in (x, y), d notin (z), e, !f")
    assert selector.requirements == (
        Requirement("a", Operator.EQUALS, frozenset({"1"})),
        Requirement("b", Operator.NOT_EQUALS, frozenset({"2"})),
        Requirement("c", Operator.IN, frozenset({"x", "y"})),
        Requirement("d", Operator.NOT_IN, frozenset({"z"})),
        Requirement("e", Operator.EXISTS),
        Requirement("f", Operator.DOES_NOT_EXIST),
    )


@pytest.mark.parametrize(
    ("text", "offending"),
    [
        ("app=web,", "end"),
        (",app", "','"),
        ("app web", "'web'"),
        ("app in web", "'web'"),
        ("app in (web", "end"),
        ("app in (a b)", "'b'"),
        ("app=a=b", "'='"),
        ("app=(a)", "'\\('"),
        ("!app=web", "'='"),
        ("!", "end"),
        ("=web", "'='"),
        ("a>1", "'>'"),
        ("a<1", "'<'"),
        ("Bad Key=1", "'Key'"),
        ("bad_prefix_/x=1", "bad_prefix_"),
        ("UPPER.example.com/x=1", "UPPER.example.com"),
        ("app=white space", "'space'"),
        ("app=-dash", "-dash"),
        ("app=" + "v" * 64, "v" * 64),
        ("k" * 64, "k" * 64),
        ("/x=1", "prefix ''"),
        ("example.com/=1", "name ''"),
        ("app in (ok,bad!)", "'!'"),
    ],
)
def test_malformed_selectors_name_the_offending_part(text: str, offending: str) -> None:
    with pytest.raises(Invalid, match=offending):
        parse_selector(text)


# -- against a reference ---------------------------------------------------------------------

KEYS = ["a", "b", "x.io/c"]
VALUES = ["", "1", "2", "v-3"]

labels_strategy = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3)
requirement_strategy = st.tuples(
    st.sampled_from(KEYS),
    st.sampled_from(["=", "==", "!=", "in", "notin", "exists", "!"]),
    st.lists(st.sampled_from(VALUES), min_size=1, max_size=3),
)
spacing = st.sampled_from(["", " ", "  ", "\t"])


def reference_matches(labels: dict[str, str], key: str, op: str, values: list[str]) -> bool:
    if op == "exists":
        return key in labels
    if op == "!":
        return key not in labels
    if op in ("=", "=="):
        return labels.get(key) == values[0]
    if op == "!=":
        return labels.get(key) != values[0]
    if op == "in":
        return key in labels and labels[key] in values
    return key not in labels or labels[key] not in values


def render(key: str, op: str, values: list[str], space: str) -> str:
    if op == "exists":
        return f"{space}{key}{space}"
    if op == "!":
        return f"{space}!{space}{key}{space}"
    if op in ("=", "==", "!="):
        return f"{space}{key}{space}{op}{space}{values[0]}{space}"
    listed = f"{space},{space}".join(values)
    return f"{space}{key} {op}{space}({space}{listed}{space}){space}"


@given(
    labels=labels_strategy,
    requirements=st.lists(requirement_strategy, max_size=4),
    space=spacing,
)
def test_matching_agrees_with_the_reference(
    labels: dict[str, str], requirements: list[tuple[str, str, list[str]]], space: str
) -> None:
    text = ",".join(render(key, op, values, space) for key, op, values in requirements)
    expected = all(reference_matches(labels, *r) for r in requirements)
    assert parse_selector(text).matches(labels) is expected, text


@given(text=st.text(alphabet="ab.=!,()< in/", max_size=14))
def test_any_text_parses_or_raises_invalid_and_nothing_else(text: str) -> None:
    with contextlib.suppress(Invalid):
        parse_selector(text).matches({"a": "b"})
