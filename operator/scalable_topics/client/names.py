"""Names checked before anything is sent: a topic (its namespace and name) and a subscription,
with the rules and messages of the admin API and the CRD (model/resources.py), so a name no
broker would take is refused at once, naming the field and the rule."""

from __future__ import annotations

from ..model.resources import namespace_problem, subscription_name_problem, topic_name_problem
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
