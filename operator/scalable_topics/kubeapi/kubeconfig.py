"""The kubeconfig file that points kubectl (and any Kubernetes client) at this API server, and
the bearer token it carries, kept beside it so a restarted server accepts the same file."""

from __future__ import annotations

import base64
import secrets
from pathlib import Path

import yaml

from ..private_files import replace_file

CONTEXT = "scalable-topics"


def load_or_create_token(path: Path) -> str:
    """The token stored at ``path``, or a new one written there (mode 0600)."""
    try:
        token = path.read_text().strip()
    except FileNotFoundError:
        token = ""
    if token:
        return token
    token = secrets.token_urlsafe(32)
    _write_private(path, token + "\n")
    return token


def render(
    server_url: str, token: str, authority_pem: bytes | None = None, namespace: str = "default"
) -> str:
    cluster: dict[str, str] = {"server": server_url}
    if authority_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(authority_pem).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": cluster}],
        "users": [{"name": CONTEXT, "user": {"token": token}}],
        "contexts": [
            {
                "name": CONTEXT,
                "context": {"cluster": CONTEXT, "user": CONTEXT, "namespace": namespace},
            }
        ],
        "current-context": CONTEXT,
        "preferences": {},
    }
    return yaml.safe_dump(config, sort_keys=False)


def write_kubeconfig(
    path: Path, server_url: str, token: str, authority_pem: bytes | None = None
) -> None:
    """Write the kubeconfig atomically (mode 0600: it holds the token)."""
    _write_private(path, render(server_url, token, authority_pem))


def _write_private(path: Path, text: str) -> None:
    replace_file(path, text.encode(), 0o600)
