"""The credentials of a standalone system, kept in its data directory.

    DIR/cluster.token   the control plane's token: the controller and every broker (0600)
    DIR/token.key       the private key that signs client tokens (0600)
    DIR/token.pub       its public half, with which the brokers verify client tokens
    DIR/admin.token     a client token granting admin on every namespace (0600)

(``stctl tokens keygen`` names a key pair the same way.)

The cluster token and the key are created on the first start and kept, so tokens issued with
``stctl tokens create --key DIR/token.key`` stay valid across restarts. The admin token is
issued again at every start, valid for ADMIN_TOKEN_DAYS, so a standalone in use never sees it
expire.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..kubeapi.kubeconfig import load_or_create_token
from ..private_files import replace_file
from ..tokens import generate_key, issue, load_private_key, public_pem

ADMIN_SUBJECT = "standalone-admin"
ADMIN_TOKEN_DAYS = 365


@dataclass(frozen=True, slots=True)
class StandaloneCredentials:
    cluster_token: str
    cluster_token_file: Path
    private_key_file: Path
    public_key_file: Path
    admin_token_file: Path


def prepare_credentials(data_dir: Path) -> StandaloneCredentials:
    """Create what is missing and issue the admin token; OSError or TokenKeyError (a
    ValueError) naming the file that cannot be written or read."""
    private_path = data_dir / "token.key"
    public_path = data_dir / "token.pub"
    if not private_path.exists():
        replace_file(private_path, generate_key()[0], 0o600)
    key = load_private_key(private_path)
    # Derived at every start: the public half always matches the private one.
    replace_file(public_path, public_pem(key), 0o644)
    cluster_path = data_dir / "cluster.token"
    cluster_token = load_or_create_token(cluster_path)
    admin_path = data_dir / "admin.token"
    admin = issue(key, ADMIN_SUBJECT, ["admin:*"], ADMIN_TOKEN_DAYS * 86400)
    replace_file(admin_path, (admin + "\n").encode(), 0o600)
    return StandaloneCredentials(cluster_token, cluster_path, private_path, public_path, admin_path)
