"""Names checked before anything is sent: a topic (its namespace and name) and a subscription,
with the rules and messages of the admin API and the CRD (model/resources.py), so a name no
broker would take is refused at once, naming the field and the rule."""

from __future__ import annotations

from collections.abc import Mapping

from ..model.resources import namespace_problem, subscription_name_problem, topic_name_problem
from ..protocol.limits import MAX_NAMESPACE_WATCH_FILTERS
from .topic_layout import qualified_topic


def checked_topic(topic: str) -> tuple[str, str]:
    """(namespace, name) of ``topic`` (NAME or NAMESPACE/NAME); ValueError naming the field
    and its rule when either cannot name a topic."""
    namespace, name = qualified_topic(topic).split("/")
    for field, problem in (
        ("metadata.namespace", namespace_problem(namespace)),
        ("metadata.name", topic_name_problem(name)),
    ):
        if problem is not None:
            raise ValueError(f"invalid topic: {field}: {problem}")
    return namespace, name


def check_subscription_name(name: str, field: str = "name") -> None:
    """ValueError naming the field and the rule unless ``name`` can name a subscription."""
    problem = subscription_name_problem(name)
    if problem is not None:
        raise ValueError(f"invalid subscription: {field}: {problem}")


def check_namespace_watch(namespace: str, filters: Mapping[str, str] | None) -> dict[str, str]:
    """The filters of a namespace watch as sent; ValueError naming the problem unless
    ``namespace`` names a namespace and ``filters`` maps at most 64 property names to values,
    all strings."""
    if not isinstance(namespace, str):
        raise ValueError(
            f"invalid namespace watch: namespace: expected a string, not {namespace!r}"
        )
    problem = namespace_problem(namespace)
    if problem is not None:
        raise ValueError(f"invalid namespace watch: namespace: {problem}")
    if filters is None:
        return {}
    if not isinstance(filters, Mapping):
        raise ValueError(
            f"invalid namespace watch: filters: expected a mapping of property names to values, "
            f"not {type(filters).__name__}"
        )
    if len(filters) > MAX_NAMESPACE_WATCH_FILTERS:
        raise ValueError(
            f"invalid namespace watch: filters: at most {MAX_NAMESPACE_WATCH_FILTERS}, "
            f"not {len(filters)}"
        )
    for key, value in filters.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ValueError(
                f"invalid namespace watch: filters: property names and values are strings, "
                f"not {key!r}: {value!r}"
            )
    return dict(filters)
