"""Who may do what: principals, grants of a role on a namespace, and the decision.

A client's token names a subject and grants roles, each on one namespace or on all (``*``):
- ``produce``: publish to the namespace's topics;
- ``consume``: subscribe to them (which may create a subscription at runtime) and acknowledge;
- ``admin``: create, change and delete its topics and their subscriptions, split and merge;
  it includes produce and consume.
Any role on a namespace lets its holder *read* it: look topics up, watch their layout,
describe them, list them, read their stats.

The control plane (the cluster token that controllers and brokers share) is a principal of its
own: it may do everything, and it alone may use the surfaces between the control plane's
parts (the brokers' segment admin API, the controllers' endpoint).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

ALL_NAMESPACES = "*"


class Role(enum.Enum):
    PRODUCE = "produce"
    CONSUME = "consume"
    ADMIN = "admin"


class Action(enum.Enum):
    READ = "read"
    PRODUCE = "produce"
    CONSUME = "consume"
    ADMIN = "admin"


# The roles that permit each action.
_PERMITTING: dict[Action, frozenset[Role]] = {
    Action.READ: frozenset(Role),
    Action.PRODUCE: frozenset({Role.PRODUCE, Role.ADMIN}),
    Action.CONSUME: frozenset({Role.CONSUME, Role.ADMIN}),
    Action.ADMIN: frozenset({Role.ADMIN}),
}


class GrantError(ValueError):
    """A grant that does not parse; the message names it and the expected form."""


@dataclass(frozen=True, slots=True)
class Grant:
    role: Role
    namespace: str  # a namespace, or ALL_NAMESPACES

    @classmethod
    def parse(cls, text: str) -> Grant:
        """``ROLE:NAMESPACE`` (``produce:team-a``, ``admin:*``)."""
        role, separator, namespace = text.partition(":")
        try:
            parsed = Role(role)
        except ValueError:
            parsed = None
        if not separator or parsed is None or not namespace:
            roles = ", ".join(r.value for r in Role)
            raise GrantError(
                f"grant {text!r} is not ROLE:NAMESPACE with a role of {roles} and a namespace "
                f"or {ALL_NAMESPACES}"
            )
        return cls(parsed, namespace)

    def __str__(self) -> str:
        return f"{self.role.value}:{self.namespace}"

    def covers(self, action: Action, namespace: str) -> bool:
        return self.role in _PERMITTING[action] and self.namespace in (namespace, ALL_NAMESPACES)


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request comes from, as its credentials proved."""

    subject: str
    grants: frozenset[Grant] = frozenset()
    control_plane: bool = False

    @classmethod
    def of(cls, subject: str, grants: Iterable[str | Grant]) -> Principal:
        return cls(
            subject,
            frozenset(g if isinstance(g, Grant) else Grant.parse(g) for g in grants),
        )

    def may(self, action: Action, namespace: str) -> bool:
        return self.control_plane or any(g.covers(action, namespace) for g in self.grants)

    def refusal(self, action: Action, namespace: str) -> str | None:
        """None when allowed; otherwise why not, naming subject, action and namespace."""
        if self.may(action, namespace):
            return None
        return f"{self.subject} may not {action.value} in namespace {namespace!r}"


# Whoever holds the cluster token.
CONTROL_PLANE = Principal("control-plane", control_plane=True)
# Every request of a server that requires no credentials (no cluster token, no token key):
# a laptop's standalone without --auth, the tests. It may do everything.
OPEN_ACCESS = Principal("anonymous", control_plane=True)
