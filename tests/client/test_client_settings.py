"""Resolving a client's settings as kubectl does: an explicit value (stctl's flag) beats an
environment variable, which beats the configuration file's context, which beats the default;
which file is read; and the Client and Admin made from it."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalable_topics.client import Client, SyncClient
from scalable_topics.client.admin import Admin
from scalable_topics.client.client_config import ClientConfigError
from scalable_topics.client.client_settings import (
    ClientSettings,
    default_config_path,
    find_config,
)

CONFIG = """apiVersion: scalabletopics.dev/v1
kind: ClientConfig
current-context: {current}
clusters:
- name: file-cluster
  cluster: {{service-url: "ws://file:1"}}
- name: other-cluster
  cluster: {{service-url: "ws://other:2"}}
users:
- name: file-user
  user: {{token-file: file.token}}
- name: broken-user
  user: {{token-file: missing.token}}
contexts:
- name: full
  context: {{cluster: file-cluster, user: file-user, namespace: file-ns}}
- name: bare
  context: {{cluster: file-cluster}}
- name: other
  context: {{cluster: other-cluster, user: file-user}}
- name: broken
  context: {{cluster: other-cluster, user: broken-user}}
"""


def config_in(directory: Path, current: str = "full", name: str = "config") -> Path:
    path = directory / name
    path.write_text(CONFIG.format(current=current))
    (directory / "file.token").write_text("file-token\n")
    return path


@given(
    file_via=st.sampled_from([None, "argument", "variable", "default"]),
    file_context=st.sampled_from(["full", "bare"]),
    url_flag=st.booleans(),
    url_variable=st.booleans(),
    token_flag=st.booleans(),
    token_variable=st.booleans(),
    namespace_flag=st.booleans(),
)
def test_a_flag_beats_the_environment_which_beats_the_file_which_beats_the_default(
    file_via: str | None,
    file_context: str,
    url_flag: bool,
    url_variable: bool,
    token_flag: bool,
    token_variable: bool,
    namespace_flag: bool,
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        home = Path(directory)
        environ = {"XDG_CONFIG_HOME": str(home / "xdg"), "HOME": str(home / "home")}
        path = None
        if file_via is not None:
            where = home / "xdg" / "stctl" if file_via == "default" else home
            where.mkdir(parents=True, exist_ok=True)
            written = config_in(where, current=file_context)
            if file_via == "argument":
                path = written
            elif file_via == "variable":
                environ["STCTL_CONFIG"] = str(written)
        if url_variable:
            environ["STCTL_URL"] = "ws://variable:3"
        if token_variable:
            environ["STCTL_AUTH_TOKEN"] = "variable-token"
        settings = ClientSettings.load(
            path,
            url="ws://flag:4" if url_flag else None,
            auth_token="flag-token" if token_flag else None,
            namespace="flag-ns" if namespace_flag else None,
            environ=environ,
        )
    in_file = file_via is not None
    full = in_file and file_context == "full"
    expected_url = next(
        value
        for given_here, value in (
            (url_flag, ("ws://flag:4", "--url")),
            (url_variable, ("ws://variable:3", "$STCTL_URL")),
            (in_file, ("ws://file:1", f"context {file_context} (cluster file-cluster)")),
            (True, ("ws://127.0.0.1:6650", "default")),
        )
        if given_here
    )
    expected_token = next(
        value
        for given_here, value in (
            (token_flag, ("flag-token", "--auth-token")),
            (token_variable, ("variable-token", "$STCTL_AUTH_TOKEN")),
            (full, ("file-token", "user file-user (token-file ")),
            (True, (None, None)),
        )
        if given_here
    )
    expected_namespace = next(
        value
        for given_here, value in (
            (namespace_flag, ("flag-ns", "--namespace")),
            (full, ("file-ns", "context full")),
            (True, ("default", "default")),
        )
        if given_here
    )
    assert (settings.service_url, settings.service_url_from) == expected_url
    assert settings.auth_token == expected_token[0]
    if expected_token[1] is None:
        assert settings.auth_token_from is None
    else:
        assert (settings.auth_token_from or "").startswith(expected_token[1])
    assert (settings.namespace, settings.namespace_from) == expected_namespace
    assert settings.context == (file_context if in_file else None)
    assert (
        settings.config_from
        == {
            None: None,
            "argument": "--config",
            "variable": "$STCTL_CONFIG",
            "default": "default",
        }[file_via]
    )


def test_context_picks_another_context_than_the_current_one(tmp_path: Path) -> None:
    path = config_in(tmp_path)
    settings = ClientSettings.load(path, "other", environ={})
    assert (settings.context, settings.context_from) == ("other", "--context")
    assert (settings.service_url, settings.auth_token, settings.namespace) == (
        "ws://other:2",
        "file-token",
        "default",
    )


def test_an_empty_token_flag_means_no_token_and_an_empty_variable_is_unset(
    tmp_path: Path,
) -> None:
    path = config_in(tmp_path)
    settings = ClientSettings.load(path, auth_token="", environ={"STCTL_AUTH_TOKEN": "v"})
    assert (settings.auth_token, settings.auth_token_from) == (None, "--auth-token")
    empty = {"STCTL_AUTH_TOKEN": "", "STCTL_URL": "", "STCTL_CONFIG": ""}
    settings = ClientSettings.load(path, environ=empty)
    assert (settings.auth_token, settings.service_url) == ("file-token", "ws://file:1")


def test_a_token_that_is_not_used_is_not_read(tmp_path: Path) -> None:
    path = config_in(tmp_path, current="broken")
    with pytest.raises(ClientConfigError, match=r"users\.1\.user\.token-file: cannot read"):
        ClientSettings.load(path, environ={})
    # A flag or the variable gives the token: the broken file is never opened.
    assert ClientSettings.load(path, auth_token="t", environ={}).auth_token == "t"
    assert ClientSettings.load(path, environ={"STCTL_AUTH_TOKEN": "v"}).auth_token == "v"
    # Another context's user's file is not read either.
    assert ClientSettings.load(path, "full", environ={}).auth_token == "file-token"


def test_the_token_never_shows_in_the_settings_repr(tmp_path: Path) -> None:
    settings = ClientSettings.load(config_in(tmp_path), environ={})
    assert settings.auth_token == "file-token"
    assert "file-token" not in repr(settings)


def test_a_bare_topic_name_is_in_the_settings_namespace(tmp_path: Path) -> None:
    settings = ClientSettings.load(config_in(tmp_path), environ={})
    assert settings.topic("orders") == "file-ns/orders"
    assert settings.topic("team/orders") == "team/orders"
    with pytest.raises(ValueError, match="NAME or NAMESPACE/NAME"):
        settings.topic("a/b/c")


# -- which file ---------------------------------------------------------------------------------


def test_a_file_given_or_named_by_the_variable_must_exist(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    with pytest.raises(ClientConfigError) as refused:
        find_config(missing, {})
    assert str(refused.value) == f"the client config {missing} does not exist"
    with pytest.raises(ClientConfigError) as refused:
        find_config(None, {"STCTL_CONFIG": str(missing)})
    assert str(refused.value) == f"$STCTL_CONFIG names {missing}, which does not exist"


def test_the_default_file_need_not_exist(tmp_path: Path) -> None:
    environ = {"XDG_CONFIG_HOME": str(tmp_path)}
    assert find_config(None, environ) is None
    settings = ClientSettings.load(environ=environ)
    assert (settings.service_url, settings.auth_token, settings.namespace) == (
        "ws://127.0.0.1:6650",
        None,
        "default",
    )
    assert (settings.config_path, settings.context) == (None, None)


def test_a_context_without_a_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ClientConfigError, match="no client config file to take the context 'x'"):
        ClientSettings.load(context="x", environ={"XDG_CONFIG_HOME": str(tmp_path)})


def test_an_unknown_context_or_none_current_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = config_in(tmp_path)
    with pytest.raises(ClientConfigError) as refused:
        ClientSettings.load(path, "nope", environ={})
    assert str(refused.value) == (
        f"{path}: no context named 'nope' (contexts: full, bare, other, broken)"
    )
    path.write_text("apiVersion: scalabletopics.dev/v1\nkind: ClientConfig\n")
    with pytest.raises(ClientConfigError, match=r"config: current-context: not set"):
        ClientSettings.load(path, environ={})


def test_the_default_path_follows_xdg_config_home_when_it_is_absolute(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    assert default_config_path({"XDG_CONFIG_HOME": "/x", "HOME": home}) == Path("/x/stctl/config")
    for unset in ({"HOME": home}, {"XDG_CONFIG_HOME": "", "HOME": home}):
        assert default_config_path(unset) == Path(home) / ".config" / "stctl" / "config"
    assert default_config_path({"XDG_CONFIG_HOME": "relative", "HOME": home}) == (
        Path(home) / ".config" / "stctl" / "config"
    )
    (tmp_path / "x" / "stctl").mkdir(parents=True)
    config_in(tmp_path / "x" / "stctl")
    assert find_config(None, {"XDG_CONFIG_HOME": str(tmp_path / "x")}) == (
        tmp_path / "x" / "stctl" / "config",
        "default",
    )


# -- the Client and Admin of a file -------------------------------------------------------------


async def test_client_and_admin_from_config_take_its_url_and_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = config_in(tmp_path)
    client = Client.from_config(path, "other", client_name="c", connect_timeout=2)
    assert (client.service_urls, client.auth_token, client.client_name) == (
        ("ws://other:2",),
        "file-token",
        "c",
    )
    assert client.connect_timeout == 2
    await client.close()
    async with Admin.from_config(path) as admin:
        assert admin.urls == ("http://file:1",)
        assert admin._headers == {"Authorization": "Bearer file-token"}
    monkeypatch.setenv("STCTL_CONFIG", str(path))
    monkeypatch.setenv("STCTL_URL", "ws://variable:3")
    with SyncClient.from_config(context="bare") as sync:
        assert (sync._target.service_urls, sync._target.auth_token) == (("ws://variable:3",), None)
