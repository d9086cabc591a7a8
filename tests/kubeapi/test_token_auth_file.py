"""Users by bearer token: kube-apiserver's token file format, what it refuses (naming the line),
and the lookup of a token among them."""

from __future__ import annotations

from pathlib import Path

import pytest

from scalable_topics.kubeapi.token_auth_file import (
    TokenFileError,
    load_token_auth_file,
    parse_token_auth_file,
)
from scalable_topics.kubeapi.users import ADMIN, AUTHENTICATED, TokenUsers, User

GOOD = """\
# operator and broker, as the RBAC manifests name them
token-one,system:serviceaccount:scalable-topics:operator,uid-1,"system:serviceaccounts,system:serviceaccounts:scalable-topics"

  token-two , broker , uid-2
token-three,viewer,uid-3,readers
"""


def test_users_with_their_uids_and_groups() -> None:
    users = parse_token_auth_file(GOOD, "tokens.csv")
    assert len(users) == 3
    assert users.authenticate("token-one") == User(
        "system:serviceaccount:scalable-topics:operator",
        "uid-1",
        ("system:serviceaccounts", "system:serviceaccounts:scalable-topics", AUTHENTICATED),
    )
    assert users.authenticate("token-two") == User("broker", "uid-2", (AUTHENTICATED,))
    assert users.authenticate("token-three") == User("viewer", "uid-3", ("readers", AUTHENTICATED))
    assert users.first_token == "token-one"


# A Greek omicron for the o: a non-ASCII token is refused like any other wrong one.
@pytest.mark.parametrize("offered", ["", "token", "token-one ", "TOKEN-ONE", "token-tw\u03bf", "#"])
def test_other_tokens_are_nobody(offered: str) -> None:
    assert parse_token_auth_file(GOOD, "tokens.csv").authenticate(offered) is None


def test_the_single_token_is_the_admin() -> None:
    users = TokenUsers.single("secret")
    assert users.authenticate("secret") == User("admin", "", ("system:masters", AUTHENTICATED))
    assert users.authenticate("secret2") is None


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ("a,alice,1\nb,bob\n", 2, "2 fields, expected token,user,uid"),
        ("a\n", 1, "1 fields"),
        ('# users\n\na,alice,1,"g1,g2",extra\n', 3, "5 fields"),
        ("a,alice,1\n,bob,2\n", 2, "an empty token"),
        ("a, ,1\n", 1, "an empty user name"),
        ('a,alice,1,"g1\n', 1, "not CSV"),
        ("a,alice,1\nb,bob,2\na,carol,3\n", 3, "the token of line 1 again"),
    ],
)
def test_a_malformed_line_is_refused_naming_it(text: str, line: int, problem: str) -> None:
    with pytest.raises(TokenFileError) as caught:
        parse_token_auth_file(text, "tokens.csv")
    assert str(caught.value).startswith(f"tokens.csv, line {line}: {problem}")


def test_an_error_never_quotes_a_token() -> None:
    with pytest.raises(TokenFileError) as caught:
        parse_token_auth_file("s3cr3t-token,alice,1\ns3cr3t-token,bob,2\n", "tokens.csv")
    assert "s3cr3t" not in str(caught.value)


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n"])
def test_a_file_without_tokens_is_refused(text: str) -> None:
    with pytest.raises(TokenFileError, match=r"^tokens\.csv: no tokens"):
        parse_token_auth_file(text, "tokens.csv")


def test_loading_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens.csv"
    path.write_text("a,alice,1\nb\n")
    with pytest.raises(TokenFileError, match=f"^{path}, line 2: 1 fields"):
        load_token_auth_file(path)
    path.write_bytes(b"a,al\xffce,1\n")
    with pytest.raises(TokenFileError, match=f"^{path}: not UTF-8"):
        load_token_auth_file(path)
    path.write_text("a,alice,1\r\nb,bob,2\r\n")  # written on Windows
    assert load_token_auth_file(path).authenticate("b") == User("bob", "2", (AUTHENTICATED,))


def test_the_table_itself_refuses_empty_and_repeated_tokens() -> None:
    with pytest.raises(ValueError, match="empty token"):
        TokenUsers([("", ADMIN)])
    with pytest.raises(ValueError, match="twice"):
        TokenUsers([("a", ADMIN), ("a", ADMIN)])
    with pytest.raises(ValueError, match="no tokens"):
        TokenUsers([])
