"""The broker config an agent writes for a managed node: authenticated, the internal password in a 0600 file only,
in directories only the broker's user can enter, whatever the umask and however often it is rewritten."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest
import trustme

from controlplane.agent.processes import (
    BrokerProcesses,
    BrokerSecrets,
    NodeSpec,
    RemoteStorage,
    TlsFiles,
    _broker_env,
)
from controlplane.clusters.credentials import INTERNAL_PRINCIPAL
from dataplane.server.config import BrokerConfig, settings_from_file

SECRETS = BrokerSecrets(1, "p" * 43, "ab" * 32)


def _secrets(cluster: str, version: int) -> BrokerSecrets:
    return dataclasses.replace(SECRETS, version=version, password=f"{cluster}-v{version}-" + "p" * 32)


def _spec(secure: bool) -> NodeSpec:
    return NodeSpec(cluster="skc-test", node_id=1, host="h1", listen_host="127.0.0.1",
                    advertised_host="127.0.0.1", port=19092, metadata_url="postgresql://x@127.0.0.1/x", secure=secure)


def test_a_secure_node_gets_sasl_the_authorizer_and_the_internal_super_user(tmp_path: Path) -> None:
    password = SECRETS.password
    path = tmp_path / "broker.toml"
    path.write_text(_spec(True).config_toml(tmp_path / "data", SECRETS))
    fields = {name: value for name, (_, value) in settings_from_file(path).items()}
    config = BrokerConfig(**fields)
    assert config.security_protocol == "SASL_PLAINTEXT" and config.sasl
    assert set(config.sasl_mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
    assert config.authorizer_enabled and config.inter_broker_principal == INTERNAL_PRINCIPAL
    assert config.inter_broker_password == password and INTERNAL_PRINCIPAL in config.super_users


def test_a_node_caps_each_api_keys_connections_as_its_plan_says(tmp_path: Path) -> None:
    spec = dataclasses.replace(_spec(True), max_connections_per_key=200)
    path = tmp_path / "broker.toml"
    path.write_text(spec.config_toml(tmp_path / "data", SECRETS))
    fields = {name: value for name, (_, value) in settings_from_file(path).items()}
    assert BrokerConfig(**fields).max_connections_per_credential == 200
    assert "max.connections.per.credential" not in _spec(True).config_toml(tmp_path, SECRETS)


def test_the_internal_password_is_never_in_the_spec(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no internal password"):
        _spec(True).config_toml(tmp_path)
    assert "sasl" not in _spec(False).config_toml(tmp_path)
    # The agent writes the config 0600 and keeps the password out of node.json.
    # `true` stands in for the interpreter: the config is written before the process starts, which exits at once.
    true = shutil.which("true")
    assert true is not None
    processes = BrokerProcesses(tmp_path, "h1", python=true, secrets=_secrets)
    processes.ensure(_spec(True))
    processes.stop_all()
    directory = processes.node_dir("skc-test", 1)
    config = directory / "broker.toml"
    assert oct(config.stat().st_mode & 0o777) == "0o600"
    assert _secrets("skc-test", 1).password in config.read_text()
    assert _secrets("skc-test", 1).password not in (directory / "node.json").read_text()
    assert json.loads((directory / "node.json").read_text())["secure"] is True


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_files_and_directories_under_the_root_are_the_brokers_users_only(tmp_path: Path) -> None:
    """0700 directories from the root down, 0600 config and spec, on the first write and on a rewrite (a new
    secrets version), with a permissive umask and a tree an older agent left with loose modes."""
    true = shutil.which("true")
    assert true is not None
    root = tmp_path / "clusters"
    (root / "skc-test" / "1" / "data").mkdir(parents=True, mode=0o755)
    for loose in (root, root / "skc-test", root / "skc-test" / "1", root / "skc-test" / "1" / "data"):
        loose.chmod(0o755)
    previous = os.umask(0o000)
    try:
        processes = BrokerProcesses(root, "h1", python=true, secrets=_secrets)
        processes.ensure(_spec(True))
        directory = processes.node_dir("skc-test", 1)
        (directory / "broker.toml").chmod(0o644)  # loosened by hand: a rewrite puts it back
        processes.ensure(dataclasses.replace(_spec(True), secrets_version=2))
        processes.stop_all()
    finally:
        os.umask(previous)
    config = directory / "broker.toml"
    assert 'inter.broker.sasl.username = "__sluice-2"' in config.read_text()
    assert _secrets("skc-test", 2).password in config.read_text()
    assert _mode(config) == 0o600 and _mode(directory / "node.json") == 0o600
    for level in (root, root / "skc-test", directory, directory / "data"):
        assert _mode(level) == 0o700, level
    assert not list(directory.glob("*.tmp"))


def _tls_files(tmp_path: Path) -> TlsFiles:
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1")
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    server.cert_chain_pems[0].write_to_path(str(tmp_path / "broker.pem"))
    server.private_key_pem.write_to_path(str(tmp_path / "broker.key"))
    return TlsFiles(str(tmp_path / "broker.pem"), str(tmp_path / "broker.key"), str(tmp_path / "ca.pem"))


def test_a_tls_node_listens_with_sasl_ssl_and_the_hosts_certificate(tmp_path: Path) -> None:
    files = _tls_files(tmp_path)
    spec = dataclasses.replace(_spec(True), tls=True)
    path = tmp_path / "broker.toml"
    path.write_text(spec.config_toml(tmp_path / "data", SECRETS, tls=files))
    config = BrokerConfig(**{name: value for name, (_, value) in settings_from_file(path).items()})
    assert config.security_protocol == "SASL_SSL" and config.sasl and config.tls
    assert (config.ssl_certificate, config.ssl_key, config.ssl_ca) == (
        Path(files.certificate), Path(files.key), Path(str(files.ca)))
    with pytest.raises(ValueError, match="no certificate"):  # the spec wants TLS, this host has no certificate
        spec.config_toml(tmp_path / "data", SECRETS)
    assert "ssl." not in _spec(True).config_toml(tmp_path / "data", SECRETS, tls=files)


@pytest.mark.django_db
def test_client_settings_and_status_name_tls_and_its_ca(settings: Any, tmp_path: Path) -> None:
    from controlplane.clusters.credentials import client_config, security_status, tls_enabled
    from controlplane.clusters.principals import spark_options
    from tests.controlplane.factories import ClusterFactory

    cluster = ClusterFactory(kafka_cluster_id="skc-tls")
    assert not tls_enabled() and "ssl.ca.location" not in client_config(cluster, bootstrap="b:1")
    assert security_status()["security_protocol"] == "SASL_PLAINTEXT" and "ssl_ca_pem" not in security_status()
    files = _tls_files(tmp_path)
    settings.SLUICE_TLS_CERT, settings.SLUICE_TLS_KEY, settings.SLUICE_TLS_CA = files.certificate, files.key, files.ca
    config = client_config(cluster, bootstrap="b:1")
    assert config["security.protocol"] == "SASL_SSL" and config["ssl.ca.location"] == files.ca
    status = security_status()
    assert status["security_protocol"] == "SASL_SSL"
    assert status["ssl_ca_pem"] == Path(str(files.ca)).read_text()
    options = spark_options(config, kafka_cluster_id="skc-tls", principal="User:u-1")
    assert options["kafka.security.protocol"] == "SASL_SSL" and options["kafka.ssl.ca.location"] == files.ca
    settings.SLUICE_TLS_CA = None  # a self-signed certificate is its own CA
    assert client_config(cluster, bootstrap="b:1")["ssl.ca.location"] == files.certificate


REMOTE = RemoteStorage(endpoint="http://127.0.0.1:9000", bucket="tier", prefix="prod", region="eu-west-1",
                       access_key="AK", secret_key="SK", task_interval_ms=500)


def test_a_node_whose_plan_may_tier_gets_the_hosts_object_store(tmp_path: Path) -> None:
    spec = dataclasses.replace(_spec(True), tiered_storage=True)
    path = tmp_path / "broker.toml"
    path.write_text(spec.config_toml(tmp_path / "data", SECRETS, remote=REMOTE))
    config = BrokerConfig(**{name: value for name, (_, value) in settings_from_file(path).items()})
    assert (config.remote_storage_endpoint, config.remote_storage_bucket, config.remote_storage_prefix,
            config.remote_storage_region) == ("http://127.0.0.1:9000", "tier", "prod", "eu-west-1")
    assert (config.remote_storage_access_key, config.remote_storage_secret_key) == ("AK", "SK")
    assert config.remote_log_manager_interval_ms == 500
    assert "SK" not in repr(REMOTE) and "SK" not in repr(config)
    # A plan without tiering, or a host without a store: no remote settings at all.
    assert "remote.storage" not in _spec(True).config_toml(tmp_path, SECRETS, remote=REMOTE)
    assert "remote.storage" not in spec.config_toml(tmp_path, SECRETS, remote=None)


def test_a_broker_never_inherits_the_agents_object_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLUICE_REMOTE_STORAGE_ENDPOINT", "http://127.0.0.1:9000")
    monkeypatch.setenv("SLUICE_REMOTE_STORAGE_SECRET_KEY", "SK")
    env = _broker_env()
    assert not [name for name in env if name.startswith("SLUICE_REMOTE_STORAGE_")]
    assert env["PYTHONUNBUFFERED"] == "1"
