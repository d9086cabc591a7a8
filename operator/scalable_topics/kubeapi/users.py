"""Who a request comes from: the user a bearer token stands for, as kube-apiserver's static
token authenticator knows users (a name, a uid, groups), and the users of requests without one.

Tokens are secrets, so a lookup compares the offered token with every known one in constant
time (``same_secret``) rather than hashing it into a dict, whose probing depends on the secret.
The table is small (a token file's lines), so trying them all costs nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..credentials import same_secret

# kube-apiserver adds this group to every authenticated user, and RBAC bindings may name it.
AUTHENTICATED = "system:authenticated"


@dataclass(frozen=True, slots=True)
class User:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()


def authenticated(name: str, uid: str = "", groups: Iterable[str] = ()) -> User:
    """A user a token proved, in the groups given plus ``system:authenticated``."""
    listed = tuple(dict.fromkeys(groups))
    return User(name, uid, listed if AUTHENTICATED in listed else (*listed, AUTHENTICATED))


# The user of the single ``--token-file`` token: the whole API is theirs.
ADMIN = authenticated("admin", groups=("system:masters",))
# A request without a token, on a path anyone may read (``/version``, ``/healthz``).
ANONYMOUS = User("system:anonymous", groups=("system:unauthenticated",))
# A request whose token proved nobody: it was answered 401.
NOBODY = User("")


class TokenUsers:
    """Bearer tokens and the users they stand for."""

    def __init__(self, entries: Iterable[tuple[str, User]]) -> None:
        self._entries = tuple(entries)
        if not self._entries:
            raise ValueError("no tokens: nobody could use the API")
        if any(not token for token, _user in self._entries):
            raise ValueError("an empty token would let any request in")
        # Startup only, not on a request's path: equality here leaks nothing to a client.
        if len({token for token, _user in self._entries}) != len(self._entries):
            raise ValueError("a token is listed twice")

    @classmethod
    def single(cls, token: str) -> TokenUsers:
        return cls([(token, ADMIN)])

    @property
    def first_token(self) -> str:
        """The token a kubeconfig written for this server carries."""
        return self._entries[0][0]

    def authenticate(self, offered: str) -> User | None:
        """The user ``offered`` is the token of, or None. Every entry is compared, so the time
        taken does not tell which entry (if any) matched."""
        found: User | None = None
        for token, user in self._entries:
            if same_secret(offered, token) and found is None:
                found = user
        return found

    def __len__(self) -> int:
        return len(self._entries)
