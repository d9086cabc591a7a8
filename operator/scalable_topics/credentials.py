"""Comparing a secret a peer offers with the one expected, in constant time.

``hmac.compare_digest`` on two ``str`` raises TypeError when either holds a non-ASCII
character, so a peer that sends one would turn an authentication failure into an internal
error. Comparing the UTF-8 bytes (lone surrogates included) refuses it like any wrong secret.
"""

from __future__ import annotations

import hmac


def same_secret(offered: str | bytes, expected: str | bytes) -> bool:
    return hmac.compare_digest(_bytes(offered), _bytes(expected))


def _bytes(secret: str | bytes) -> bytes:
    return secret if isinstance(secret, bytes) else secret.encode("utf-8", "surrogatepass")
