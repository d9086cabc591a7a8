"""Who a request to a broker's HTTP API comes from, and what each surface asks of it.

- ``/admin/v1/segments/...`` (the segment admin API) is the control plane's alone: the
  controllers drive it, and the brokers' own stats requests, with the cluster token.
- ``/admin/v1/topics/...`` (the topic admin API): each route names the action it needs on the
  topic's namespace (topic_admin.py); a list without a namespace shows the namespaces the
  principal may read.
- ``/metrics``, with ``--authenticate-metrics``: it names every topic, so it needs the right to
  read every namespace (a grant on ``*``) or the cluster token.
- ``/healthz`` and the WebSocket upgrade are open: the wire protocol authenticates at Connect
  (session.py).

A refused credential is 401 AuthenticationFailed saying why; a credential that authenticates
but does not allow the request is 403 NotAuthorized naming subject, action and namespace.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from .model.authorization import ALL_NAMESPACES, Action, Principal
from .protocol import ErrorCode
from .tokens import Authenticator, TokenRefused

AUTHENTICATOR_KEY = web.AppKey("authenticator", Authenticator)
METRICS_AUTHENTICATED_KEY = web.AppKey("metrics_authenticated", bool)
PRINCIPAL_KEY = web.RequestKey("principal", Principal)

SEGMENT_ADMIN_PREFIX = "/admin/v1/segments"


class Refusal(Exception):
    """A request its credentials do not allow; ``authenticated`` False for a credential
    refused outright (401), True for one that does not allow it (403)."""

    def __init__(self, message: str, *, authenticated: bool) -> None:
        super().__init__(message)
        self.authenticated = authenticated


def bearer_token(request: web.Request) -> str | None:
    """The token of ``Authorization: Bearer <token>``; None without the header."""
    header = request.headers.get("Authorization")
    if header is None:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise TokenRefused("the Authorization header is not 'Bearer <token>'")
    return token.strip()


def guards(request: web.Request) -> bool:
    """Whether ``request`` needs credentials at all."""
    if request.path.startswith("/admin/"):
        return True
    return request.path == "/metrics" and request.app.get(METRICS_AUTHENTICATED_KEY, False)


def admit(request: web.Request) -> Principal:
    """Authenticate ``request`` and check what its surface asks of every caller (the segment
    admin API, /metrics); the topic admin API checks per route. Refusal when not allowed."""
    authenticator = request.app[AUTHENTICATOR_KEY]
    try:
        principal = authenticator.authenticate(bearer_token(request)).principal
    except TokenRefused as error:
        raise Refusal(
            f"{error}; send 'Authorization: Bearer <token>'", authenticated=False
        ) from None
    if request.path.startswith(SEGMENT_ADMIN_PREFIX) and not principal.control_plane:
        raise Refusal(
            f"{principal.subject} may not use the segment admin API: it serves the control "
            "plane alone",
            authenticated=True,
        )
    if request.path == "/metrics" and not principal.may(Action.READ, ALL_NAMESPACES):
        raise Refusal(
            f"{principal.subject} may not read /metrics: it needs a grant on every namespace "
            f"({ALL_NAMESPACES})",
            authenticated=True,
        )
    return principal


def require(request: web.Request, action: Action, namespace: str) -> None:
    """Refusal unless the principal the middleware admitted may ``action`` in ``namespace``."""
    refusal = request[PRINCIPAL_KEY].refusal(action, namespace)
    if refusal is not None:
        raise Refusal(refusal, authenticated=True)


def refusal_response(refusal: Refusal) -> web.Response:
    """The JSON refusal of the admin APIs: 401 AuthenticationFailed or 403 NotAuthorized."""
    if refusal.authenticated:
        code, status = ErrorCode.NOT_AUTHORIZED, 403
    else:
        code, status = ErrorCode.AUTHENTICATION_FAILED, 401
    return web.json_response({"code": code.value, "message": str(refusal)}, status=status)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def authentication(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Admit every request its surface guards, or answer the refusal."""
    if guards(request):
        try:
            request[PRINCIPAL_KEY] = admit(request)
        except Refusal as refusal:
            return refusal_response(refusal)
    return await handler(request)
