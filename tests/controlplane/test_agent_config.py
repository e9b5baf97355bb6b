"""The broker config an agent writes for a managed node: authenticated, the internal password in a 0600 file only."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from controlplane.agent.processes import BrokerProcesses, NodeSpec
from controlplane.clusters.credentials import INTERNAL_PRINCIPAL, internal_password
from dataplane.server.config import BrokerConfig, settings_from_file


def _spec(secure: bool) -> NodeSpec:
    return NodeSpec(cluster="skc-test", node_id=1, host="h1", listen_host="127.0.0.1",
                    advertised_host="127.0.0.1", port=19092, metadata_url="postgresql://x@127.0.0.1/x", secure=secure)


def test_a_secure_node_gets_sasl_the_authorizer_and_the_internal_super_user(tmp_path: Path) -> None:
    password = internal_password("skc-test")
    path = tmp_path / "broker.toml"
    path.write_text(_spec(True).config_toml(tmp_path / "data", password))
    fields = {name: value for name, (_, value) in settings_from_file(path).items()}
    config = BrokerConfig(**fields)
    assert config.security_protocol == "SASL_PLAINTEXT" and config.sasl
    assert set(config.sasl_mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
    assert config.authorizer_enabled and config.inter_broker_principal == INTERNAL_PRINCIPAL
    assert config.inter_broker_password == password and INTERNAL_PRINCIPAL in config.super_users


def test_the_internal_password_is_derived_per_cluster_and_never_in_the_spec(tmp_path: Path) -> None:
    assert internal_password("skc-a") != internal_password("skc-b")
    assert internal_password("skc-a") == internal_password("skc-a")
    with pytest.raises(ValueError, match="no internal password"):
        _spec(True).config_toml(tmp_path)
    assert "sasl" not in _spec(False).config_toml(tmp_path)
    # The agent writes the config 0600 and keeps the password out of node.json.
    # `true` stands in for the interpreter: the config is written before the process starts, which exits at once.
    true = shutil.which("true")
    assert true is not None
    processes = BrokerProcesses(tmp_path, "h1", python=true, internal_password=internal_password)
    processes.ensure(_spec(True))
    processes.stop_all()
    directory = processes.node_dir("skc-test", 1)
    config = directory / "broker.toml"
    assert oct(config.stat().st_mode & 0o777) == "0o600"
    assert internal_password("skc-test") in config.read_text()
    assert internal_password("skc-test") not in (directory / "node.json").read_text()
    assert json.loads((directory / "node.json").read_text())["secure"] is True
