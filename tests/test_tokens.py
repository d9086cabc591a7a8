"""Client tokens and the authorization decision: grants parse and print back, roles permit the
actions they should on their namespaces only, and the authenticator accepts the cluster token
and tokens signed by the token key, and refuses everything else with a reason."""

from __future__ import annotations

import time
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st

from scalable_topics.model.authorization import (
    ALL_NAMESPACES,
    Action,
    Grant,
    GrantError,
    Principal,
    Role,
)
from scalable_topics.tokens import (
    MAX_TOKEN_BYTES,
    Authenticator,
    TokenKeyError,
    TokenRefused,
    generate_key,
    issue,
    load_private_key,
    load_public_key,
)

namespaces = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True)
grants = st.builds(Grant, st.sampled_from(Role), namespaces | st.just(ALL_NAMESPACES))


@given(grants)
def test_a_grant_prints_as_it_parses(grant: Grant) -> None:
    assert Grant.parse(str(grant)) == grant


@pytest.mark.parametrize("text", ["produce", "produce:", "write:team-a", ":team-a", "Admin:x"])
def test_a_malformed_grant_is_refused_naming_it(text: str) -> None:
    with pytest.raises(GrantError, match=repr(text)):
        Grant.parse(text)


@given(st.sampled_from(Role), namespaces, namespaces, st.sampled_from(Action))
def test_a_role_permits_its_actions_in_its_namespace_only(
    role: Role, granted: str, asked: str, action: Action
) -> None:
    principal = Principal.of("alice", [Grant(role, granted)])
    permitted = {
        Role.PRODUCE: {Action.READ, Action.PRODUCE},
        Role.CONSUME: {Action.READ, Action.CONSUME},
        Role.ADMIN: set(Action),
    }[role]
    assert principal.may(action, asked) == (action in permitted and asked == granted)
    everywhere = Principal.of("alice", [Grant(role, ALL_NAMESPACES)])
    assert everywhere.may(action, asked) == (action in permitted)
    if not principal.may(action, asked):
        reason = principal.refusal(action, asked)
        assert reason is not None and "alice" in reason and repr(asked) in reason


@pytest.fixture(scope="module")
def key_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    directory = tmp_path_factory.mktemp("keys")
    private, public = generate_key()
    (directory / "token.key").write_bytes(private)
    (directory / "token.pub").write_bytes(public)
    return directory / "token.key", directory / "token.pub"


def test_a_signed_token_names_its_subject_and_grants(key_files: tuple[Path, Path]) -> None:
    private, public = key_files
    token = issue(load_private_key(private), "alice", ["produce:team-a", "consume:*"], 3600)
    authenticated = Authenticator(token_key=load_public_key(public)).authenticate(token)
    assert authenticated.principal == Principal.of("alice", ["produce:team-a", "consume:*"])
    assert not authenticated.principal.control_plane
    assert authenticated.expires_at is not None and authenticated.expires_at > time.time()
    # The private key file serves as the public one too (its public half is derived).
    assert Authenticator(token_key=load_public_key(private)).authenticate(token).principal


def test_the_cluster_token_is_the_control_plane() -> None:
    authenticator = Authenticator(cluster_token="s3cret")
    authenticated = authenticator.authenticate("s3cret")
    assert authenticated.principal.control_plane and authenticated.expires_at is None
    assert authenticator.control_plane("s3cret")
    assert not authenticator.control_plane("s3cre")
    assert not authenticator.control_plane(None)


def test_without_credentials_configured_anyone_may_do_anything() -> None:
    authenticator = Authenticator()
    assert authenticator.open
    assert authenticator.authenticate(None).principal.may(Action.ADMIN, "any")
    assert authenticator.control_plane(None)


def other_key_token() -> str:
    return issue(Ed25519PrivateKey.generate(), "mallory", ["admin:*"], 3600)


def test_everything_else_is_refused_with_a_reason(key_files: tuple[Path, Path]) -> None:
    private, public = key_files
    key = load_private_key(private)
    authenticator = Authenticator(cluster_token="s3cret", token_key=load_public_key(public))
    good = issue(key, "alice", ["produce:team-a"], 3600)
    header, payload, signature = good.split(".")
    tampered = jwt.encode(
        {**jwt.decode(good, options={"verify_signature": False}), "grants": ["admin:*"]},
        "not-the-key-but-long-enough-for-hmac-sha256",
        algorithm="HS256",
    )
    cases = {
        None: "credentials are required",
        "": "credentials are required",
        "s3cret-not": "not valid",
        "caf\u00e9\udcff": "not valid",  # non-ASCII, a lone surrogate
        "x" * (MAX_TOKEN_BYTES + 1): "longer than",
        issue(key, "alice", ["produce:team-a"], 60, now=time.time() - 3600): "expired",
        other_key_token(): "not valid",
        f"{header}.{payload}.{signature[::-1]}": "not valid",
        tampered: "not valid",  # another algorithm than EdDSA is never accepted
        jwt.encode({"sub": "alice"}, key, algorithm="EdDSA"): "not valid",  # no exp, aud...
    }
    for offered, reason in cases.items():
        with pytest.raises(TokenRefused, match=reason):
            authenticator.authenticate(offered)
    assert not authenticator.control_plane(good)


def test_bad_key_files_and_bad_tokens_to_issue_are_refused_naming_them(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a key")
    with pytest.raises(TokenKeyError, match=str(garbage)):
        load_private_key(garbage)
    with pytest.raises(TokenKeyError, match=str(garbage)):
        load_public_key(garbage)
    with pytest.raises(TokenKeyError, match="missing"):
        load_public_key(tmp_path / "missing.pem")
    private, _ = generate_key()
    (tmp_path / "k").write_bytes(private)
    key = load_private_key(tmp_path / "k")
    with pytest.raises(GrantError):
        issue(key, "alice", ["write:team-a"], 60)
    with pytest.raises(ValueError, match="subject"):
        issue(key, "", ["produce:a"], 60)
    with pytest.raises(ValueError, match="lifetime"):
        issue(key, "alice", ["produce:a"], 0)


def test_stctl_makes_a_key_and_tokens_the_authenticator_accepts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scalable_topics.cli import main

    assert main(["tokens", "keygen", "--out", str(tmp_path / "keys")]) == 0
    private, public = tmp_path / "keys" / "token.key", tmp_path / "keys" / "token.pub"
    assert private.stat().st_mode & 0o777 == 0o600
    capsys.readouterr()
    arguments = ["tokens", "create", "--key", str(private), "--subject", "bob"]
    assert main([*arguments, "--grant", "consume:team-b", "--expires-in", "15m"]) == 0
    token = capsys.readouterr().out.strip()
    authenticated = Authenticator(token_key=load_public_key(public)).authenticate(token)
    assert authenticated.principal == Principal.of("bob", ["consume:team-b"])
    assert authenticated.expires_at is not None
    assert authenticated.expires_at - time.time() < 15 * 60 + 60

    # A second keygen never overwrites the key; bad grants and durations are refused.
    assert main(["tokens", "keygen", "--out", str(tmp_path / "keys")]) == 1
    assert "never overwritten" in capsys.readouterr().err
    assert main([*arguments, "--grant", "write:team-b"]) == 2
    assert "'write:team-b'" in capsys.readouterr().err
    assert main([*arguments]) == 2
    with pytest.raises(SystemExit):
        main([*arguments, "--grant", "consume:x", "--expires-in", "0d"])
