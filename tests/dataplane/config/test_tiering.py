"""Kafka's rules for tiered topics' configs, and the broker's remote storage settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from dataplane.config.resolver import validate_cluster_defaults
from dataplane.config.tiering import COMPACTED_TOPIC, TIERING_DISABLED_IN_BROKER, TURNING_OFF, check_tiering
from dataplane.config.topic import ConfigError
from dataplane.protocol.errors import ErrorCode
from dataplane.server.config import BrokerConfig
from dataplane.server.config import ConfigError as BrokerConfigError

ON = {"remote.storage.enable": "true"}


def _refused(overrides: dict[str, str], **kwargs: object) -> str:
    with pytest.raises(ConfigError) as raised:
        check_tiering(overrides, **{"remote_storage_configured": True, **kwargs})  # type: ignore[arg-type]
    assert raised.value.code == ErrorCode.INVALID_CONFIG
    return raised.value.message


def test_tiering_rules() -> None:
    check_tiering(ON, remote_storage_configured=True)
    check_tiering({"cleanup.policy": "compact"}, remote_storage_configured=False)  # not tiered: no rule applies
    assert _refused(ON, remote_storage_configured=False) == TIERING_DISABLED_IN_BROKER
    assert _refused({**ON, "cleanup.policy": "delete,compact"}) == COMPACTED_TOPIC
    assert _refused(ON, cluster_defaults={"cleanup.policy": "compact"}) == COMPACTED_TOPIC  # the value in force
    assert "must not be more than retention.ms" in _refused({**ON, "retention.ms": "10", "local.retention.ms": "11"})
    assert "must not be -1" in _refused({**ON, "retention.bytes": "10", "local.retention.bytes": "-1"})
    check_tiering({**ON, "retention.ms": "-1", "local.retention.ms": "5"}, remote_storage_configured=True)
    check_tiering({**ON, "retention.bytes": "10", "local.retention.bytes": "-2"}, remote_storage_configured=True)
    assert _refused({}, previous=ON) == TURNING_OFF
    assert _refused({"remote.storage.enable": "false"}, previous=ON) == TURNING_OFF


def test_remote_storage_enable_has_no_cluster_default() -> None:
    with pytest.raises(ConfigError):
        validate_cluster_defaults({"remote.storage.enable": "true"})
    assert validate_cluster_defaults({"log.local.retention.ms": "5"}) == {"log.local.retention.ms": "5"}


def test_broker_remote_storage_settings(tmp_path: Path) -> None:
    base = {"node_id": 1, "host": "127.0.0.1", "port": 9092, "data_dir": tmp_path, "metadata_url": ""}
    assert not BrokerConfig(**base).remote_storage  # type: ignore[arg-type]
    config = BrokerConfig(**base, remote_storage_endpoint="http://127.0.0.1:1", remote_storage_bucket="b",  # type: ignore[arg-type]
                          remote_storage_secret_key="hidden")
    assert config.remote_storage and "hidden" not in repr(config)
    with pytest.raises(BrokerConfigError, match=r"both remote\.storage\.endpoint and remote\.storage\.bucket"):
        BrokerConfig(**base, remote_storage_endpoint="http://127.0.0.1:1")  # type: ignore[arg-type]
    with pytest.raises(BrokerConfigError, match="http"):
        BrokerConfig(**base, remote_storage_endpoint="127.0.0.1:1", remote_storage_bucket="b")  # type: ignore[arg-type]
