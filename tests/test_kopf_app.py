"""The kopf operator's pure parts: kopf's credentials from the store adapter's configuration,
the store URL of ``stctl operator``'s flags, and its refusal of flags that cannot apply."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes_asyncio.client import Configuration

from scalable_topics.cli import main
from scalable_topics.commands.operator import IN_CLUSTER_VARIABLE, store_url
from scalable_topics.kopf_app import connection_info
from scalable_topics.store.kubernetes import ClusterSource, parse_url


def test_a_bearer_token_and_the_cluster_ca_become_kopfs_credentials() -> None:
    configuration = Configuration(host="https://10.0.0.1:6443")
    configuration.api_key["BearerToken"] = "Bearer s3cret"
    configuration.ssl_ca_cert = "/etc/ca.crt"
    info = connection_info(configuration)
    assert (info.server, info.scheme, info.token) == ("https://10.0.0.1:6443", "Bearer", "s3cret")
    assert info.ca_path == "/etc/ca.crt"
    assert info.insecure is False
    assert (info.certificate_path, info.private_key_path) == (None, None)


def test_a_client_certificate_and_an_insecure_cluster_become_kopfs_credentials() -> None:
    configuration = Configuration(host="https://kind:6443")
    configuration.cert_file, configuration.key_file = "/tmp/c.crt", "/tmp/c.key"
    configuration.verify_ssl = False
    info = connection_info(configuration)
    assert (info.certificate_path, info.private_key_path) == ("/tmp/c.crt", "/tmp/c.key")
    assert info.insecure is True
    assert (info.scheme, info.token) == (None, None)


def test_a_token_without_its_scheme_is_a_bearer_token() -> None:
    configuration = Configuration(host="https://h")
    configuration.api_key["authorization"] = "t0ken"
    info = connection_info(configuration)
    assert (info.scheme, info.token) == ("Bearer", "t0ken")


def test_the_flags_name_the_cluster_as_the_store_adapter_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(IN_CLUSTER_VARIABLE, raising=False)
    config = tmp_path / "my config"
    assert parse_url(store_url(config, None)) == ClusterSource(path=str(config.resolve()))
    assert parse_url(store_url(config, "kind-a")) == ClusterSource(
        path=str(config.resolve()), context="kind-a"
    )
    assert parse_url(store_url(None, None)) == ClusterSource()
    assert parse_url(store_url(None, "prod")) == ClusterSource(context="prod")
    monkeypatch.setenv(IN_CLUSTER_VARIABLE, "10.96.0.1")
    assert parse_url(store_url(None, None)) == ClusterSource(in_cluster=True)
    # A kubeconfig named explicitly wins over the pod's service account.
    assert parse_url(store_url(config, None)) == ClusterSource(path=str(config.resolve()))


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--listen", "0.0.0.0:0"], "give the --endpoint brokers reach"),
        (["--listen", "127.0.0.1:0", "--auth-token-file", "/nonexistent/token"], "cannot read"),
        (["--listen", "127.0.0.1:0", "--shards", "0"], "shard count must be"),
    ],
)
def test_flags_that_cannot_apply_are_refused_before_anything_starts(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["operator", "--kubeconfig", "/nonexistent/kubeconfig", *flags]) == 2
    error = capsys.readouterr().err
    assert error.startswith("stctl operator: ")
    assert message in error
