"""Topic, namespace and subscription name rules: what every surface checks before writing."""

from __future__ import annotations

import string

from hypothesis import given
from hypothesis import strategies as st

from scalable_topics.model.hash_range import HashRange
from scalable_topics.model.resources import (
    TOPIC_NAME_MAX,
    namespace_problem,
    subscription_name_problem,
    topic_name_problem,
)
from scalable_topics.model.segment import descriptor
from scalable_topics.store.errors import Invalid
from scalable_topics.store.selectors import is_dns_label, is_dns_subdomain, validate_label_value

NAME_LIKE = st.text(alphabet=string.ascii_letters + string.digits + "-._", max_size=80)


@given(NAME_LIKE)
def test_a_topic_name_is_accepted_exactly_when_it_is_a_dns_label(name: str) -> None:
    assert (topic_name_problem(name) is None) == (name != "" and is_dns_label(name))
    assert (namespace_problem(name) is None) == (name != "" and is_dns_label(name))


@given(NAME_LIKE)
def test_an_accepted_topic_name_labels_and_names_its_segments(name: str) -> None:
    """What the 63-character rule is for: every Segment of an accepted topic can be stored."""
    if topic_name_problem(name) is not None:
        return
    try:
        validate_label_value(name)
    except Invalid as refused:  # pragma: no cover - the property fails here
        raise AssertionError(f"{name!r} was accepted but cannot label a Segment") from refused
    assert is_dns_subdomain(f"{name}-{descriptor(2**20, HashRange(0, 0xFFFF))}")


def test_refusals_name_the_rule() -> None:
    too_long = topic_name_problem("o" * (TOPIC_NAME_MAX + 1))
    assert too_long is not None
    assert "not a DNS label: at most 63 lower-case letters, digits and '-'" in too_long
    assert "(it has 64 characters)" in too_long
    dotted = topic_name_problem("my.orders")
    assert dotted is not None and dotted.startswith("topic name 'my.orders' is not a DNS label")
    assert namespace_problem("") == "namespace must not be empty"
    spaced = subscription_name_problem("bad name")
    assert spaced is not None and "letters, digits, '.', '_' and '-'" in spaced
