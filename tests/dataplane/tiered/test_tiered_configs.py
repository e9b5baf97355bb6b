"""Bad tiering settings are refused with INVALID_CONFIG and Kafka's message, on create and on alter."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from dataplane.config.tiering import COMPACTED_TOPIC, TIERING_DISABLED_IN_BROKER, TURNING_OFF
from tests.support.broker import BrokerProcess


def _create_error(bootstrap: str, configs: dict[str, str]) -> KafkaError:
    name = f"bad-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    with pytest.raises(KafkaException) as raised:
        admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(30)
    error: KafkaError = raised.value.args[0]
    assert admin.list_topics(timeout=10).topics.get(name) is None  # nothing was created
    return error


def _alter(bootstrap: str, topic: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry(name.replace("_", "."), value, incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()])
    admin.incremental_alter_configs([resource])[resource].result(30)


def test_bad_tiering_settings_are_refused(tiered_broker: BrokerProcess) -> None:
    bootstrap = tiered_broker.bootstrap
    error = _create_error(bootstrap, {"remote.storage.enable": "true", "cleanup.policy": "compact"})
    assert error.code() == KafkaError.INVALID_CONFIG and COMPACTED_TOPIC in error.str()

    error = _create_error(bootstrap, {"remote.storage.enable": "true", "retention.bytes": "1000",
                                      "local.retention.bytes": "2000"})
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "local.retention.bytes" in error.str() and "must not be more than retention.bytes" in error.str()

    error = _create_error(bootstrap, {"remote.storage.enable": "true", "retention.ms": "60000",
                                      "local.retention.ms": "-1"})
    assert error.code() == KafkaError.INVALID_CONFIG and "must not be -1" in error.str()

    error = _create_error(bootstrap, {"remote.storage.enable": "maybe"})
    assert error.code() == KafkaError.INVALID_CONFIG and "remote.storage.enable" in error.str()

    # Enabled once, it stays enabled; a compaction policy cannot be added to a tiered topic either.
    topic = f"tiered-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"remote.storage.enable": "true"})])[topic].result(30)
    with pytest.raises(KafkaException) as raised:
        _alter(bootstrap, topic, remote_storage_enable="false")
    assert raised.value.args[0].code() == KafkaError.INVALID_CONFIG and TURNING_OFF in raised.value.args[0].str()
    with pytest.raises(KafkaException) as raised:
        _alter(bootstrap, topic, cleanup_policy="compact")
    assert raised.value.args[0].code() == KafkaError.INVALID_CONFIG
    _alter(bootstrap, topic, local_retention_ms="1000")  # a good change still goes through


def test_tiering_needs_remote_storage_on_the_broker(plain_broker: BrokerProcess) -> None:
    error = _create_error(plain_broker.bootstrap, {"remote.storage.enable": "true"})
    assert error.code() == KafkaError.INVALID_CONFIG and TIERING_DISABLED_IN_BROKER in error.str()
    topic = f"plain-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": plain_broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    with pytest.raises(KafkaException) as raised:
        _alter(plain_broker.bootstrap, topic, remote_storage_enable="true")
    assert TIERING_DISABLED_IN_BROKER in raised.value.args[0].str()
