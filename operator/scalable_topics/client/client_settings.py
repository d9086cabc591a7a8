"""Where a client connects, with which token, in which namespace: resolved as kubectl resolves
its settings. A value given explicitly (stctl's ``--url``, ``--auth-token``, ``-n``) beats an
environment variable (``STCTL_URL``, ``STCTL_AUTH_TOKEN``), which beats the context of the client
configuration file, which beats the defaults.

The file is the one given (``--config``), else ``$STCTL_CONFIG``, else
``$XDG_CONFIG_HOME/stctl/config`` (``~/.config/stctl/config``) when it exists. A file given or
named by the variable must exist; the default one need not.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from .client_config import ClientConfigError, ClientConfigFile, NamedContext, load_client_config
from .topic_layout import DEFAULT_NAMESPACE, qualified_topic

DEFAULT_SERVICE_URL = "ws://127.0.0.1:6650"
CONFIG_VARIABLE, URL_VARIABLE, TOKEN_VARIABLE = "STCTL_CONFIG", "STCTL_URL", "STCTL_AUTH_TOKEN"
# Where each value came from, as ClientSettings' *_from fields say it.
FROM_DEFAULT = "default"
FROM_CONFIG_FLAG, FROM_CONTEXT_FLAG = "--config", "--context"
FROM_URL_FLAG, FROM_TOKEN_FLAG, FROM_NAMESPACE_FLAG = "--url", "--auth-token", "--namespace"
FROM_CURRENT_CONTEXT = "current-context"


def default_config_path(environ: Mapping[str, str]) -> Path:
    """``$XDG_CONFIG_HOME/stctl/config``, else ``~/.config/stctl/config`` (a relative
    XDG_CONFIG_HOME is ignored, as the XDG specification says)."""
    base = environ.get("XDG_CONFIG_HOME", "")
    if not os.path.isabs(base):
        home = environ.get("HOME")
        base = os.path.join(home if home else Path.home(), ".config")
    return Path(base) / "stctl" / "config"


def find_config(
    path: str | os.PathLike[str] | None, environ: Mapping[str, str]
) -> tuple[Path, str] | None:
    """The configuration file to read and where it was named, or None when there is none: the
    one given, else $STCTL_CONFIG's (each must exist), else the default one if it exists."""
    if path is not None:
        given = Path(path).expanduser()
        if not given.exists():
            raise ClientConfigError(f"the client config {given} does not exist")
        return given, FROM_CONFIG_FLAG
    named = environ.get(CONFIG_VARIABLE)
    if named:
        given = Path(named).expanduser()
        if not given.exists():
            raise ClientConfigError(f"${CONFIG_VARIABLE} names {given}, which does not exist")
        return given, f"${CONFIG_VARIABLE}"
    default = default_config_path(environ)
    return (default, FROM_DEFAULT) if default.exists() else None


@dataclass(frozen=True)
class ClientSettings:
    """The settings a client uses, and where each came from (for ``stctl config view``).

    ``auth_token`` is never shown by repr; ``auth_token_from`` is None when no token is set
    anywhere. ``config_path`` and ``context`` are None when no configuration file was read."""

    service_url: str
    auth_token: str | None = field(repr=False)
    namespace: str
    service_url_from: str
    auth_token_from: str | None
    namespace_from: str
    config_path: Path | None = None
    config_from: str | None = None
    context: str | None = None
    context_from: str | None = None

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str] | None = None,
        context: str | None = None,
        *,
        url: str | None = None,
        auth_token: str | None = None,
        namespace: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> ClientSettings:
        """Resolve the settings: the configuration file ``path`` (else $STCTL_CONFIG's, else
        the default one if it exists) and its ``context`` (else its current-context), under
        the environment (``environ``, by default the process's), under ``url``,
        ``auth_token`` and ``namespace`` when given (stctl's flags; an empty ``auth_token``
        means no token). The context's token file is read now. ClientConfigError naming the
        file and the field when the file cannot be used."""
        environ = os.environ if environ is None else environ
        found = find_config(path, environ)
        if found is None:
            if context is not None:
                raise ClientConfigError(
                    f"no client config file to take the context {context!r} from: give "
                    f"--config FILE, set ${CONFIG_VARIABLE}, or create "
                    f"{default_config_path(environ)}"
                )
            return resolve(url, auth_token, namespace, environ)
        loaded = load_client_config(found[0])
        chosen = loaded.context(context)
        return replace(
            resolve(url, auth_token, namespace, environ, loaded, chosen),
            config_path=found[0],
            config_from=found[1],
            context=chosen.name,
            context_from=FROM_CURRENT_CONTEXT if context is None else FROM_CONTEXT_FLAG,
        )

    def topic(self, topic: str) -> str:
        """``NAMESPACE/NAME`` of ``topic``: a bare NAME is in the settings' namespace."""
        if "/" not in topic:
            topic = f"{self.namespace}/{topic}"
        return qualified_topic(topic)


def resolve(
    url: str | None,
    auth_token: str | None,
    namespace: str | None,
    environ: Mapping[str, str],
    loaded: ClientConfigFile | None = None,
    chosen: NamedContext | None = None,
) -> ClientSettings:
    """The settings from the explicit values, the environment and the context ``chosen`` of
    the ``loaded`` file, in that order, then the defaults; an empty variable counts as unset."""
    user = None if chosen is None else chosen.context.user

    service_url, service_url_from = DEFAULT_SERVICE_URL, FROM_DEFAULT
    if url is not None:
        service_url, service_url_from = url, FROM_URL_FLAG
    elif environ.get(URL_VARIABLE):
        service_url, service_url_from = environ[URL_VARIABLE], f"${URL_VARIABLE}"
    elif loaded is not None and chosen is not None:
        service_url = loaded.cluster(chosen.context.cluster).service_url
        service_url_from = f"context {chosen.name} (cluster {chosen.context.cluster})"

    token: str | None = None
    token_from: str | None = None
    if auth_token is not None:
        token, token_from = auth_token or None, FROM_TOKEN_FLAG
    elif environ.get(TOKEN_VARIABLE):
        token, token_from = environ[TOKEN_VARIABLE], f"${TOKEN_VARIABLE}"
    elif loaded is not None and user is not None:
        token = loaded.token(user)  # read now: a rotated token is picked up
        token_file = loaded.token_file(user)
        token_from = (
            f"user {user} ({'token' if token_file is None else f'token-file {token_file}'})"
        )

    chosen_namespace, namespace_from = DEFAULT_NAMESPACE, FROM_DEFAULT
    if namespace is not None:
        chosen_namespace, namespace_from = namespace, FROM_NAMESPACE_FLAG
    elif chosen is not None and chosen.context.namespace is not None:
        chosen_namespace, namespace_from = chosen.context.namespace, f"context {chosen.name}"

    return ClientSettings(
        service_url=service_url,
        auth_token=token,
        namespace=chosen_namespace,
        service_url_from=service_url_from,
        auth_token_from=token_from,
        namespace_from=namespace_from,
    )
