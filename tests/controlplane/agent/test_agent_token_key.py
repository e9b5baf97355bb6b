"""The agent gives each secure broker its cluster's OAUTHBEARER token key: in the 0600 config, never in the spec."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

from controlplane.agent.processes import BrokerProcesses, BrokerSecrets, NodeSpec
from dataplane.server.config import BrokerConfig, settings_from_file

KEY = bytes(range(32))


def _secrets(cluster: str, version: int) -> BrokerSecrets:
    return BrokerSecrets(version, f"password-of-{cluster}", KEY.hex())


def _spec(secure: bool = True) -> NodeSpec:
    return NodeSpec(cluster="skc-tok", node_id=1, host="h1", listen_host="127.0.0.1", advertised_host="127.0.0.1",
                    port=19093, metadata_url="postgresql://x@127.0.0.1/x", secure=secure)


def test_a_secure_brokers_config_carries_the_token_key_and_offers_oauthbearer(tmp_path: Path) -> None:
    path = tmp_path / "broker.toml"
    path.write_text(_spec().config_toml(tmp_path / "data", _secrets("skc-tok", 1)))
    config = BrokerConfig(**{name: value for name, (_, value) in settings_from_file(path).items()})
    assert config.oauthbearer_token_key == KEY and "OAUTHBEARER" in config.offered_mechanisms
    assert "oauthbearer" not in _spec(False).config_toml(tmp_path, _secrets("skc-tok", 1))  # PLAINTEXT: no SASL


def test_the_agent_writes_it_0600_and_keeps_it_out_of_node_json(tmp_path: Path) -> None:
    true = shutil.which("true")  # stands in for the interpreter: the config is written before the process starts
    assert true is not None
    processes = BrokerProcesses(tmp_path, "h1", python=true, secrets=_secrets)
    processes.ensure(_spec())
    processes.stop_all()
    directory = processes.node_dir("skc-tok", 1)
    config = directory / "broker.toml"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600 and KEY.hex() in config.read_text()
    assert KEY.hex() not in (directory / "node.json").read_text()
