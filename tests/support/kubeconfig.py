"""Kubeconfig files for tests that reach an API server (ours, or one the test plays)."""

from __future__ import annotations

from pathlib import Path

import yaml


def write_kubeconfig(
    path: Path,
    server: str,
    token: str,
    *,
    context: str = "test",
    extra_contexts: dict[str, str] | None = None,
) -> Path:
    """A kubeconfig at ``path`` whose current ``context`` reaches ``server`` with a bearer
    ``token``; ``extra_contexts`` (name -> server) add further contexts with the same token."""
    servers = {context: server, **(extra_contexts or {})}
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": context,
        "clusters": [{"name": name, "cluster": {"server": url}} for name, url in servers.items()],
        "users": [{"name": "tester", "user": {"token": token}}],
        "contexts": [
            {"name": name, "context": {"cluster": name, "user": "tester"}} for name in servers
        ],
    }
    path.write_text(yaml.safe_dump(document))
    return path
