"""The client configuration file: what it holds, every way it is refused (one message naming the
file and the field), its token files, the writer ``stctl standalone`` uses and use-context."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from scalable_topics.client.client_config import (
    ClientConfigError,
    load_client_config,
    parse_client_config,
    use_context,
    write_client_config,
)
from scalable_topics.client.client_settings import ClientSettings

HEAD = "apiVersion: scalabletopics.dev/v1\nkind: ClientConfig\n"
EXAMPLE = (
    HEAD
    + """current-context: standalone
clusters:
- name: standalone
  cluster: {service-url: "ws://127.0.0.1:6650"}
- name: prod
  cluster: {service-url: "wss://a.example:6651,wss://b.example:6651"}
users:
- name: admin
  user: {token-file: admin.token}
- name: alice
  user: {token: alice-token}
contexts:
- name: standalone
  context: {cluster: standalone, user: admin, namespace: default}
- name: prod-team
  context: {cluster: prod, user: alice, namespace: team-a}
- name: anonymous
  context: {cluster: standalone}
"""
)


def written(directory: Path, text: str, name: str = "config") -> Path:
    path = directory / name
    path.write_text(text)
    return path


def test_the_example_reads_as_written() -> None:
    config = parse_client_config(EXAMPLE, Path("config"))
    assert config.current_context == "standalone"
    assert [(c.name, c.cluster.service_url) for c in config.clusters] == [
        ("standalone", "ws://127.0.0.1:6650"),
        ("prod", "wss://a.example:6651,wss://b.example:6651"),
    ]
    assert [(u.name, u.user.token, u.user.token_file) for u in config.users] == [
        ("admin", None, "admin.token"),
        ("alice", "alice-token", None),
    ]
    assert [
        (c.name, c.context.cluster, c.context.user, c.context.namespace) for c in config.contexts
    ] == [
        ("standalone", "standalone", "admin", "default"),
        ("prod-team", "prod", "alice", "team-a"),
        ("anonymous", "standalone", None, None),
    ]


def test_empty_lists_may_be_left_empty() -> None:
    config = parse_client_config(HEAD + "clusters:\nusers:\ncontexts: []\n", Path("c"))
    assert (config.clusters, config.users, config.contexts, config.current_context) == (
        (),
        (),
        (),
        None,
    )


def entries(clusters: str = "", users: str = "", contexts: str = "", extra: str = "") -> str:
    return (
        HEAD
        + extra
        + "clusters:\n"
        + (clusters or "- name: c\n  cluster: {service-url: 'ws://h:1'}\n")
        + "users:\n"
        + (users or "- name: u\n  user: {token: t}\n")
        + "contexts:\n"
        + (contexts or "- name: x\n  context: {cluster: c, user: u}\n")
    )


REFUSED = {
    "not YAML": (
        "clusters: [",
        "not valid YAML: expected the node content, but found '<stream end>' (line 1, column 12)",
    ),
    "empty": (
        "",
        "expected a mapping with apiVersion: scalabletopics.dev/v1 and kind: ClientConfig; "
        "the file is empty",
    ),
    "a list": ("- a\n", "expected a mapping with apiVersion"),
    "a key twice": (
        HEAD + "current-context: x\ncurrent-context: y\n",
        "not valid YAML: the key 'current-context' is given twice (line 4, column 1)",
    ),
    "no apiVersion": ("kind: ClientConfig\n", "apiVersion: required"),
    "another apiVersion": (
        "apiVersion: v1\nkind: ClientConfig\n",
        "apiVersion: expected 'scalabletopics.dev/v1', not 'v1'",
    ),
    "a kubeconfig": (
        "apiVersion: scalabletopics.dev/v1\nkind: Config\n",
        "kind: expected 'ClientConfig', not 'Config' (a kubeconfig is not a client config)",
    ),
    "unknown top-level field": (
        HEAD + "preferences: {}\n",
        "unknown field 'preferences' (a client config has apiVersion, kind, current-context, "
        "clusters, users, contexts)",
    ),
    "unknown cluster field": (
        entries(clusters="- name: c\n  cluster: {server: 'https://h'}\n"),
        "clusters.0.cluster: unknown field 'server' (a cluster has service-url)",
    ),
    "unknown user field": (
        entries(users="- name: u\n  user: {client-certificate: x}\n"),
        "users.0.user: unknown field 'client-certificate' (a user has token, token-file)",
    ),
    "unknown context field": (
        entries(contexts="- name: x\n  context: {cluster: c, extensions: []}\n"),
        "contexts.0.context: unknown field 'extensions' (a context has cluster, user, namespace)",
    ),
    "unknown entry field": (
        entries(users="- name: u\n  user: {}\n  note: x\n"),
        "users.0: unknown field 'note' (a users entry has name, user)",
    ),
    "clusters not a list": (HEAD + "clusters: {}\n", "clusters: expected a list, not {}"),
    "a cluster not a mapping": (
        entries(clusters="- name: c\n  cluster: ws://h:1\n"),
        "clusters.0.cluster: expected a mapping, not 'ws://h:1'",
    ),
    "a cluster without name": (
        entries(clusters="- cluster: {service-url: 'ws://h:1'}\n"),
        "clusters.0.name: required",
    ),
    "a user with an empty name": (
        entries(users="- name: ''\n  user: {token: t}\n"),
        "users.0.name: must not be empty",
    ),
    "a context name that is not a string": (
        entries(contexts="- name: 7\n  context: {cluster: c}\n"),
        "contexts.0.name: expected a string, not 7",
    ),
    "a cluster without service-url": (
        entries(clusters="- name: c\n  cluster: {}\n"),
        "clusters.0.cluster.service-url: required",
    ),
    "a malformed service-url": (
        entries(clusters="- name: c\n  cluster: {service-url: 'http://h:1'}\n"),
        "clusters.0.cluster.service-url: a broker URL looks like ws://HOST:PORT, not 'http://h:1'",
    ),
    "a duplicate cluster": (
        entries(
            clusters="- name: c\n  cluster: {service-url: 'ws://h:1'}\n"
            "- name: c\n  cluster: {service-url: 'ws://h:2'}\n"
        ),
        "clusters.1.name: 'c' is also the name of clusters.0",
    ),
    "a duplicate user": (
        entries(users="- name: u\n  user: {}\n- name: v\n  user: {}\n- name: u\n  user: {}\n"),
        "users.2.name: 'u' is also the name of users.0",
    ),
    "a duplicate context": (
        entries(
            contexts="- name: x\n  context: {cluster: c}\n- name: x\n  context: {cluster: c}\n"
        ),
        "contexts.1.name: 'x' is also the name of contexts.0",
    ),
    "an unknown cluster": (
        entries(contexts="- name: x\n  context: {cluster: d}\n"),
        "contexts.0.context.cluster: no cluster named 'd' (clusters: c)",
    ),
    "an unknown user": (
        entries(
            contexts="- name: x\n  context: {cluster: c}\n- name: y\n  context: {cluster: c, user: w}\n"
        ),
        "contexts.1.context.user: no user named 'w' (users: u)",
    ),
    "a context without cluster": (
        entries(contexts="- name: x\n  context: {user: u}\n"),
        "contexts.0.context.cluster: required",
    ),
    "both token and token-file": (
        entries(users="- name: u\n  user: {token: t, token-file: f}\n"),
        "users.0.user: give token or token-file, not both",
    ),
    "a token with a space": (
        entries(users="- name: u\n  user: {token: 'two words'}\n"),
        "users.0.user.token: a token must be one word (a token), without spaces or line breaks",
    ),
    "an empty token-file": (
        entries(users="- name: u\n  user: {token-file: ''}\n"),
        "users.0.user.token-file: must not be empty",
    ),
    "a namespace that is not a DNS label": (
        entries(contexts="- name: x\n  context: {cluster: c, namespace: Team_A}\n"),
        "contexts.0.context.namespace: namespace 'Team_A' is not a DNS label: at most 63 "
        "lower-case letters, digits and '-', starting and ending with a letter or digit",
    ),
    "an unknown current-context": (
        entries(extra="current-context: y\n"),
        "current-context: no context named 'y' (contexts: x)",
    ),
    "a current-context without contexts": (
        HEAD + "current-context: y\n",
        "current-context: no context named 'y' (the file has no contexts)",
    ),
}


@pytest.mark.parametrize(("text", "message"), REFUSED.values(), ids=REFUSED.keys())
def test_a_file_that_is_not_a_client_config_is_refused_naming_the_file_and_the_field(
    tmp_path: Path, text: str, message: str
) -> None:
    path = written(tmp_path, text)
    with pytest.raises(ClientConfigError) as refused:
        load_client_config(path)
    assert str(refused.value).startswith(f"{path}: {message}"), str(refused.value)
    assert "\n" not in str(refused.value)


def test_an_unreadable_file_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ClientConfigError) as refused:
        load_client_config(tmp_path)
    assert str(refused.value) == f"{tmp_path}: cannot read it: Is a directory"


# -- token files --------------------------------------------------------------------------------


def token_config(token_file: str) -> str:
    return entries(
        users=f"- name: u\n  user: {{token-file: '{token_file}'}}\n",
        extra="current-context: x\n",
    )


def test_a_relative_token_file_is_relative_to_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "conf").mkdir()
    path = written(tmp_path / "conf", token_config("tokens/u.token"))
    (tmp_path / "conf" / "tokens").mkdir()
    (tmp_path / "conf" / "tokens" / "u.token").write_text("s3cret\n")
    monkeypatch.chdir(tmp_path)  # elsewhere than the config file
    assert ClientSettings.load(path, environ={}).auth_token == "s3cret"
    absolute = written(tmp_path, token_config(str(tmp_path / "conf" / "tokens" / "u.token")))
    assert ClientSettings.load(absolute, environ={}).auth_token == "s3cret"


def test_the_token_file_is_read_at_each_resolution(tmp_path: Path) -> None:
    path = written(tmp_path, token_config("u.token"))
    (tmp_path / "u.token").write_text("first\n")
    assert ClientSettings.load(path, environ={}).auth_token == "first"
    (tmp_path / "u.token").write_text("rotated")
    assert ClientSettings.load(path, environ={}).auth_token == "rotated"


TOKEN_FILES = {
    "missing": (None, "cannot read {file}: No such file or directory"),
    "a directory": ("<dir>", "cannot read {file}: Is a directory"),
    "empty": ("", "{file} is empty"),
    "blank": (" \n\n", "{file} is empty"),
    "two lines": ("one\ntwo\n", "the token in {file} must be one word"),
    "not text": ("\xff".encode("latin-1"), "{file} is not UTF-8 text"),
}


@pytest.mark.parametrize(("content", "message"), TOKEN_FILES.values(), ids=TOKEN_FILES.keys())
def test_a_token_file_that_holds_no_token_is_refused_naming_the_field(
    tmp_path: Path, content: str | bytes | None, message: str
) -> None:
    path = written(tmp_path, token_config("u.token"))
    token_file = tmp_path / "u.token"
    if content == "<dir>":
        token_file.mkdir()
    elif isinstance(content, bytes):
        token_file.write_bytes(content)
    elif content is not None:
        token_file.write_text(content)
    load_client_config(path)  # the file itself is valid: the token is read when resolving
    with pytest.raises(ClientConfigError) as refused:
        ClientSettings.load(path, environ={})
    expected = f"{path}: users.0.user.token-file: " + message.format(file=token_file)
    assert str(refused.value).startswith(expected), str(refused.value)


# -- the writer ---------------------------------------------------------------------------------

context_names = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1)
hosts = st.from_regex(r"[a-z][a-z0-9.-]{0,20}", fullmatch=True)
service_urls = st.lists(
    st.builds("{}://{}:{}".format, st.sampled_from(["ws", "wss"]), hosts, st.integers(1, 65535)),
    min_size=1,
    max_size=3,
).map(",".join)
namespaces = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True)
tokens = st.from_regex(r"[A-Za-z0-9._~+/=-]{1,200}", fullmatch=True)


@given(
    context=context_names,
    service_url=service_urls,
    token=st.none() | tokens,
    relative=st.booleans(),
    namespace=st.none() | namespaces,
)
# NEL, LS and PS are line breaks to YAML: PyYAML folded a name holding one into a space.
@example(context="\x85", service_url="ws://a:1", token=None, relative=False, namespace=None)
@example(context="a\u2028b", service_url="ws://a:1", token=None, relative=False, namespace=None)
def test_what_the_writer_writes_loads_back_to_the_same_settings(
    context: str, service_url: str, token: str | None, relative: bool, namespace: str | None
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "sub" / "config"
        token_file: Path | str | None = None
        if token is not None:
            (Path(directory) / "sub").mkdir()
            (Path(directory) / "sub" / "user.token").write_text(token + "\n")
            token_file = "user.token" if relative else Path(directory) / "sub" / "user.token"
        write_client_config(
            path,
            context=context,
            service_url=service_url,
            token_file=token_file,
            namespace=namespace,
        )
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert sorted(os.listdir(path.parent)) == sorted(
            ["config", *(["user.token"] if token else [])]
        )  # no temporary file left
        settings = ClientSettings.load(path, environ={})
    assert (settings.context, settings.context_from) == (context, "current-context")
    assert settings.service_url == service_url
    assert settings.auth_token == token
    assert settings.namespace == (namespace or "default")


def test_the_writer_replaces_a_file_and_makes_it_private(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text("old")
    path.chmod(0o644)
    write_client_config(path, context="standalone", service_url="ws://127.0.0.1:7650")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert yaml.safe_load(path.read_text()) == {
        "apiVersion": "scalabletopics.dev/v1",
        "kind": "ClientConfig",
        "current-context": "standalone",
        "clusters": [{"name": "standalone", "cluster": {"service-url": "ws://127.0.0.1:7650"}}],
        "users": [],
        "contexts": [{"name": "standalone", "context": {"cluster": "standalone"}}],
    }


def test_the_writer_follows_a_symbolic_link(tmp_path: Path) -> None:
    (tmp_path / "real").write_text("old")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    write_client_config(tmp_path / "link", context="a", service_url="ws://h:1")
    assert (tmp_path / "link").is_symlink()
    assert load_client_config(tmp_path / "real").config.current_context == "a"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"context": ""}, "context: must not be empty"),
        ({"service_url": "localhost:6650"}, "service_url: a broker URL looks like ws://HOST:PORT"),
        ({"service_url": " , "}, "service_url: the service URL names no broker"),
        ({"token_file": ""}, "token_file: must not be empty"),
        ({"namespace": "Team"}, "namespace: namespace 'Team' is not a DNS label"),
    ],
)
def test_the_writer_refuses_what_the_file_could_not_hold(
    tmp_path: Path, arguments: dict[str, str], message: str
) -> None:
    path = tmp_path / "config"
    given = {"context": "a", "service_url": "ws://h:1", **arguments}
    with pytest.raises(ValueError, match=r"^cannot write the client config ") as refused:
        write_client_config(path, **given)
    assert str(refused.value).startswith(f"cannot write the client config {path}: {message}")
    assert not path.exists()


# -- use-context --------------------------------------------------------------------------------


def test_use_context_changes_the_current_context_only_and_keeps_the_mode(tmp_path: Path) -> None:
    path = written(tmp_path, EXAMPLE)
    path.chmod(0o640)
    (tmp_path / "admin.token").write_text("t")
    before = load_client_config(path).config
    changed = use_context(path, "prod-team")
    after = load_client_config(path).config
    assert changed.config == after
    assert after.current_context == "prod-team"
    assert after.model_copy(update={"current_context": "standalone"}) == before
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert sorted(os.listdir(tmp_path)) == ["admin.token", "config"]  # no temporary file left


@pytest.mark.parametrize(
    ("text", "name", "message"),
    [
        (EXAMPLE, "nope", "no context named 'nope' (contexts: standalone, prod-team, anonymous)"),
        (HEAD + "clusters: 1\n", "x", "clusters: expected a list"),
    ],
    ids=["unknown context", "invalid file"],
)
def test_use_context_refuses_and_leaves_the_file_as_it_was(
    tmp_path: Path, text: str, name: str, message: str
) -> None:
    path = written(tmp_path, text)
    with pytest.raises(ClientConfigError) as refused:
        use_context(path, name)
    assert str(refused.value).startswith(f"{path}: {message}")
    assert path.read_text() == text
