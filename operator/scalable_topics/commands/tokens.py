"""``stctl tokens keygen|create``: the cluster's token key, and client tokens signed with it."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from .output import fail

KEYGEN, CREATE = "stctl tokens keygen", "stctl tokens create"
_DURATION = re.compile(r"(\d+)([smhd])")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(value: str) -> int:
    """``90s``, ``15m``, ``12h``, ``30d`` as seconds."""
    found = _DURATION.fullmatch(value)
    if found is None or int(found.group(1)) == 0:
        raise argparse.ArgumentTypeError(
            f"expected a positive duration such as 90s, 15m, 12h or 30d, not {value!r}"
        )
    return int(found.group(1)) * _SECONDS[found.group(2)]


def _write_private(path: Path, data: bytes) -> None:
    """Create ``path`` readable by its owner only; never overwrite a key."""
    import os

    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(data)


def _keygen(args: argparse.Namespace) -> int:
    from ..tokens import generate_key

    private_path: Path = args.out / "token.key"
    public_path: Path = args.out / "token.pub"
    private, public = generate_key()
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        _write_private(private_path, private)
        public_path.write_bytes(public)
    except FileExistsError:
        return fail(KEYGEN, f"{private_path} exists: a token key is never overwritten")
    except OSError as error:
        return fail(KEYGEN, f"cannot write the token key into {args.out}: {error}")
    print(f"{private_path} (keep it secret: it signs tokens)")
    print(f"{public_path} (give it to brokers and controllers: --token-public-key)")
    return 0


def _create(args: argparse.Namespace) -> int:
    from ..model.authorization import GrantError
    from ..tokens import TokenKeyError, issue, load_private_key

    if not args.grant:
        return fail(CREATE, "give at least one --grant ROLE:NAMESPACE", exit_code=2)
    try:
        key = load_private_key(args.key)
        token = issue(key, args.subject, args.grant, args.expires_in)
    except (TokenKeyError, GrantError, ValueError) as error:
        return fail(CREATE, str(error), exit_code=2)
    sys.stdout.write(token + "\n")
    return 0


def add_tokens(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tokens = commands.add_parser(
        "tokens",
        help="the token key, and client tokens signed with it",
        description="Client tokens are JWTs signed with the cluster's token key (Ed25519). "
        "They name a subject and grant roles (produce, consume, admin) on namespaces "
        "(or * for all); brokers and controllers verify them with the key's public half.",
    )
    actions = tokens.add_subparsers(title="actions", metavar="ACTION", required=True)
    keygen = actions.add_parser(
        "keygen",
        help="create a token key: DIR/token.key (private) and DIR/token.pub",
        description="Create a new Ed25519 token key in DIR: token.key (mode 0600: it signs "
        "tokens) and token.pub (for --token-public-key). An existing key is never overwritten.",
    )
    keygen.add_argument("--out", type=Path, required=True, metavar="DIR")
    keygen.set_defaults(run=_keygen)
    create = actions.add_parser(
        "create",
        help="print a signed token for a subject with its grants",
        description="Print a client token: a JWT naming SUBJECT with the --grant roles, signed "
        "with the token key, valid for --expires-in.",
    )
    create.add_argument("--key", type=Path, required=True, metavar="FILE", help="token.key")
    create.add_argument("--subject", required=True, help="who the token names, e.g. alice")
    create.add_argument(
        "--grant",
        action="append",
        default=[],
        metavar="ROLE:NAMESPACE",
        help="a role (produce, consume or admin) on a namespace or * (repeatable)",
    )
    create.add_argument(
        "--expires-in",
        type=duration,
        default=duration("30d"),
        metavar="DURATION",
        help="how long the token is valid: 90s, 15m, 12h, 30d (default 30d)",
    )
    create.set_defaults(run=_create)
