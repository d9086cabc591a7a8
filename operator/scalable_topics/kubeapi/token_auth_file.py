"""kube-apiserver's ``--token-auth-file``: a CSV file, one user per line,

    token,user,uid[,"group1,group2"]

Blank lines and lines starting with ``#`` are skipped. Unlike kube-apiserver, which skips or
overrides them with a warning, an empty token, a missing user name and a token listed twice are
errors: a file that does not say what its author meant is refused at startup, naming its line.
An error never quotes a token.
"""

from __future__ import annotations

import csv
from pathlib import Path

from .users import TokenUsers, User, authenticated

FORMAT = 'token,user,uid[,"group1,group2"]'


class TokenFileError(ValueError):
    """A token file that cannot be used; the message names the file and line."""


def load_token_auth_file(path: Path) -> TokenUsers:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TokenFileError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    return parse_token_auth_file(text, str(path))


def parse_token_auth_file(text: str, source: str) -> TokenUsers:
    """The users ``text`` lists; ``source`` names it in errors."""
    entries: list[tuple[str, User]] = []
    first_line: dict[str, int] = {}  # startup only: not a lookup a client can time
    for number, line in enumerate(text.split("\n"), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        token, user = _parse_line(stripped, source, number)
        if token in first_line:
            raise _error(source, number, f"the token of line {first_line[token]} again")
        first_line[token] = number
        entries.append((token, user))
    if not entries:
        raise TokenFileError(f"{source}: no tokens (each line is {FORMAT})")
    return TokenUsers(entries)


def _parse_line(line: str, source: str, number: int) -> tuple[str, User]:
    try:
        fields = next(csv.reader([line], skipinitialspace=True, strict=True))
    except csv.Error as exc:
        raise _error(source, number, f"not CSV ({exc})") from exc
    fields = [field.strip() for field in fields]
    if not 3 <= len(fields) <= 4:
        raise _error(source, number, f"{len(fields)} fields, expected {FORMAT}")
    token, name, uid = fields[:3]
    if not token:
        raise _error(source, number, "an empty token")
    if not name:
        raise _error(source, number, "an empty user name")
    groups = fields[3].split(",") if len(fields) == 4 else []
    return token, authenticated(name, uid, (g.strip() for g in groups if g.strip()))


def _error(source: str, number: int, problem: str) -> TokenFileError:
    return TokenFileError(f"{source}, line {number}: {problem}")
