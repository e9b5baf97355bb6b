"""The agent gives each broker its cluster's OAUTHBEARER token key, in files only their owner can read."""

from __future__ import annotations

import stat
import tomllib
from pathlib import Path

from controlplane.agent.processes import NodeSpec, _write_private
from controlplane.clusters.principals import cluster_token_key
from dataplane.server.config import settings_from_table


def spec(token_key: str = "") -> NodeSpec:
    return NodeSpec("skc-abc", 1, "h1", "127.0.0.1", "127.0.0.1", 9092, "postgresql://x/y", token_key=token_key)


def test_the_broker_config_carries_the_clusters_token_key(tmp_path: Path) -> None:
    key = cluster_token_key("skc-abc")
    parsed = settings_from_table(tomllib.loads(spec(key.hex()).config_toml(tmp_path)))
    assert parsed["oauthbearer_token_key"][1] == key
    assert "sasl.oauthbearer.token.key" not in spec().config_toml(tmp_path)
    assert key.hex() not in repr(spec(key.hex()))  # never in a log line


def test_config_files_are_private_even_when_they_existed(tmp_path: Path) -> None:
    path = tmp_path / "broker.toml"
    path.write_text("old")
    path.chmod(0o644)
    _write_private(path, "new")
    assert path.read_text() == "new" and stat.S_IMODE(path.stat().st_mode) == 0o600
    _write_private(tmp_path / "fresh", "x")
    assert stat.S_IMODE((tmp_path / "fresh").stat().st_mode) == 0o600
