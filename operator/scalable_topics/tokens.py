"""Client tokens: signed JWTs naming a subject and its grants, and the authenticator servers use.

A token is a JWT (RFC 7519) signed with Ed25519 (``EdDSA``) by the holder of the cluster's
token key; brokers and controllers verify it with the public half alone, so no server can mint
one. Claims: ``sub`` (the subject), ``grants`` (``["produce:team-a", "admin:*"]``, see
model/authorization.py), ``iss`` and ``aud`` (both ``scalable-topics``), ``iat`` and ``exp``
(required: every token expires). PyJWT does the signing and verifying; nothing here is crypto
of our own.

The cluster token (a shared secret, compared in constant time) stays what the control plane's
parts present to one another; whoever holds it may do everything.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .credentials import same_secret
from .model.authorization import CONTROL_PLANE, OPEN_ACCESS, Grant, GrantError, Principal

ISSUER = AUDIENCE = "scalable-topics"
ALGORITHM = "EdDSA"
GRANTS_CLAIM = "grants"
# Clocks of the issuer and the servers may disagree by this much.
LEEWAY_SECONDS = 30.0
# What a server reads of a token at most: a header line must not cost it memory.
MAX_TOKEN_BYTES = 8192


class TokenRefused(Exception):
    """Credentials that do not authenticate; the message says why, never the token."""


class TokenKeyError(ValueError):
    """A key file that cannot be used; the message names the file."""


@dataclass(frozen=True, slots=True)
class Authenticated:
    principal: Principal
    expires_at: float | None  # epoch seconds; None for the cluster token and open access

    def expired(self, now: float | None = None) -> bool:
        return self.expires_at is not None and (now or time.time()) >= self.expires_at


def generate_key() -> tuple[bytes, bytes]:
    """A new token key: (private PEM, public PEM)."""
    private = Ed25519PrivateKey.generate()
    private_pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return private_pem, public_pem(private)


def public_pem(key: Ed25519PrivateKey) -> bytes:
    """The public half of ``key``, as PEM."""
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def load_private_key(path: Path) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as error:
        raise TokenKeyError(f"cannot read the token key {path}: {error}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise TokenKeyError(f"the token key {path} is not an Ed25519 private key")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    try:
        data = path.read_bytes()
        key = (
            serialization.load_pem_private_key(data, password=None).public_key()
            if b"PRIVATE KEY" in data
            else serialization.load_pem_public_key(data)
        )
    except (OSError, ValueError, TypeError) as error:
        raise TokenKeyError(f"cannot read the token public key {path}: {error}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise TokenKeyError(f"the token public key {path} is not an Ed25519 key")
    return key


def issue(
    key: Ed25519PrivateKey,
    subject: str,
    grants: Iterable[str],
    lifetime_seconds: float,
    now: float | None = None,
) -> str:
    """A signed token for ``subject`` with ``grants``, valid ``lifetime_seconds`` from now;
    GrantError for a grant that does not parse, ValueError for an empty subject or a lifetime
    that is not positive."""
    grant_list = [str(Grant.parse(g)) for g in grants]
    if not subject:
        raise ValueError("a token needs a subject")
    if not lifetime_seconds > 0:
        raise ValueError(f"a token's lifetime must be positive, not {lifetime_seconds}s")
    issued = int(now if now is not None else time.time())
    claims = {
        "sub": subject,
        GRANTS_CLAIM: grant_list,
        "iss": ISSUER,
        "aud": AUDIENCE,
        "iat": issued,
        "exp": issued + int(lifetime_seconds),
    }
    return jwt.encode(claims, key, algorithm=ALGORITHM)


class Authenticator:
    """What a server accepts: the cluster token, tokens signed by the token key, or, with
    neither configured, anyone (open access)."""

    def __init__(
        self, cluster_token: str | None = None, token_key: Ed25519PublicKey | None = None
    ) -> None:
        self._cluster_token = cluster_token
        self._token_key = token_key

    @property
    def open(self) -> bool:
        return self._cluster_token is None and self._token_key is None

    def authenticate(self, offered: str | None) -> Authenticated:
        """Who ``offered`` proves to be; TokenRefused saying why not."""
        if self.open:
            return Authenticated(OPEN_ACCESS, None)
        if not offered:
            raise TokenRefused("credentials are required")
        if len(offered) > MAX_TOKEN_BYTES:
            raise TokenRefused(f"the token is longer than {MAX_TOKEN_BYTES} bytes")
        if self._cluster_token is not None and same_secret(offered, self._cluster_token):
            return Authenticated(CONTROL_PLANE, None)
        if self._token_key is None:
            raise TokenRefused("the token is not valid")
        return self._verify(offered)

    def control_plane(self, offered: str | None) -> bool:
        """Whether ``offered`` is the control plane's own credential (or access is open)."""
        if self.open:
            return True
        return (
            offered is not None
            and self._cluster_token is not None
            and same_secret(offered, self._cluster_token)
        )

    def _verify(self, offered: str) -> Authenticated:
        key = self._token_key
        assert key is not None
        try:
            compact = offered.encode("ascii")  # base64url and dots; PyJWT raises on surrogates
        except UnicodeEncodeError:
            raise TokenRefused("the token is not valid: it is not ASCII") from None
        try:
            claims = jwt.decode(
                compact,
                key,
                algorithms=[ALGORITHM],
                audience=AUDIENCE,
                issuer=ISSUER,
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "iat", "sub", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise TokenRefused("the token has expired") from None
        except jwt.InvalidTokenError as error:
            raise TokenRefused(f"the token is not valid: {error}") from None
        grants = claims.get(GRANTS_CLAIM, [])
        if not isinstance(grants, list) or not all(isinstance(g, str) for g in grants):
            raise TokenRefused(f"the token's {GRANTS_CLAIM} claim is not a list of strings")
        try:
            principal = Principal.of(str(claims["sub"]), grants)
        except GrantError as error:
            raise TokenRefused(f"the token's grants do not parse: {error}") from None
        return Authenticated(principal, float(claims["exp"]) + LEEWAY_SECONDS)
