"""Topic-config resolution: order, broker synonyms, sources, the storage defaults, refusals. No broker needed."""

from __future__ import annotations

import ast
import logging
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dataplane.config
from dataplane.config.resolver import (
    ConfigSource,
    Synonym,
    min_insync_replicas,
    resolve,
    resolve_all,
    resolved_value,
    resolved_values,
    unclean_leader_election_enable,
    validate_cluster_defaults,
)
from dataplane.config.topic import (
    BROKER_SYNONYMS,
    TOPIC_CONFIGS,
    TOPIC_NAME_FOR_SYNONYM,
    TOPIC_ONLY_CONFIGS,
    ConfigError,
    validate_topic_configs,
)
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.storage.config import LogConfig

DYNAMIC_TOPIC = ConfigSource.DYNAMIC_TOPIC_CONFIG
DYNAMIC_DEFAULT = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
DEFAULT = ConfigSource.DEFAULT_CONFIG


def test_override_then_cluster_default_then_static_default() -> None:
    assert resolve("retention.ms", {"retention.ms": "5"}, {"retention.ms": "7"}).value == "5"
    assert resolve("retention.ms", {}, {"retention.ms": "7"}).value == "7"
    assert resolve("retention.ms", {}, {}).value == "604800000"
    # Another config's override or default does not leak.
    assert resolve("retention.ms", {"segment.ms": "5"}, {"retention.bytes": "7"}).value == "604800000"


def test_sources_and_synonyms_as_describe_configs_lists_them() -> None:
    found = resolve("retention.ms", {"retention.ms": "60000"}, {"retention.ms": "1234"})
    assert (found.value, found.source) == ("60000", DYNAMIC_TOPIC)
    assert found.synonyms == (Synonym("retention.ms", "60000", DYNAMIC_TOPIC),
                              Synonym("log.retention.ms", "1234", DYNAMIC_DEFAULT),
                              Synonym("log.retention.ms", "604800000", DEFAULT))
    inherited = resolve("max.message.bytes", {}, {"max.message.bytes": "2500"})
    assert (inherited.value, inherited.source) == ("2500", DYNAMIC_DEFAULT)
    assert inherited.synonyms[0] == Synonym("message.max.bytes", "2500", DYNAMIC_DEFAULT)
    plain = resolve("retention.ms", {"retention.ms": "60000"})
    assert plain.synonyms == (Synonym("retention.ms", "60000", DYNAMIC_TOPIC),
                              Synonym("log.retention.ms", "604800000", DEFAULT))


@pytest.mark.parametrize(("broker_name", "raw", "topic_name", "value"), [
    ("log.retention.ms", "100", "retention.ms", "100"),
    ("log.retention.minutes", "2", "retention.ms", "120000"),
    ("log.retention.hours", "3", "retention.ms", "10800000"),
    ("log.retention.hours", "-1", "retention.ms", "-1"),  # any negative time is "forever", as in Kafka
    ("log.retention.bytes", "1000", "retention.bytes", "1000"),
    ("log.segment.bytes", "2048", "segment.bytes", "2048"),
    ("log.roll.hours", "1", "segment.ms", "3600000"),
    ("log.roll.jitter.hours", "1", "segment.jitter.ms", "3600000"),
    ("log.cleanup.policy", "compact, delete", "cleanup.policy", "compact,delete"),
    ("message.max.bytes", "2500", "max.message.bytes", "2500"),
    ("min.insync.replicas", "2", "min.insync.replicas", "2"),
    ("unclean.leader.election.enable", "TRUE", "unclean.leader.election.enable", "true"),
    ("log.message.timestamp.type", "LogAppendTime", "message.timestamp.type", "LogAppendTime"),
    ("log.flush.interval.messages", "10", "flush.messages", "10"),
    ("log.flush.scheduler.interval.ms", "10", "flush.ms", "10"),
    ("log.index.size.max.bytes", "4096", "segment.index.bytes", "4096"),
    ("log.cleaner.min.cleanable.ratio", "0.25", "min.cleanable.dirty.ratio", "0.25"),
    ("compression.type", "zstd", "compression.type", "zstd"),
])
def test_cluster_defaults_under_broker_synonyms(broker_name: str, raw: str, topic_name: str, value: str) -> None:
    assert TOPIC_NAME_FOR_SYNONYM[broker_name] == topic_name
    found = resolve(topic_name, {}, {broker_name: raw})
    assert (found.value, found.source) == (value, DYNAMIC_DEFAULT)
    assert found.synonyms[0].name == broker_name
    assert resolved_value(topic_name, {}, {broker_name: raw}) == value
    assert resolve(topic_name, {topic_name: TOPIC_CONFIGS[topic_name].default}, {broker_name: raw}).source \
        is DYNAMIC_TOPIC


def test_synonym_precedence_follows_kafka() -> None:
    defaults = {"log.retention.hours": "1", "log.retention.minutes": "1", "log.retention.ms": "1"}
    found = resolve("retention.ms", {}, defaults)
    assert found.value == "1"
    assert [s.name for s in found.synonyms] == ["log.retention.ms", "log.retention.minutes",
                                                "log.retention.hours", "log.retention.ms"]
    # A synonym counting hours is listed in its own unit, the value in force in milliseconds.
    assert resolve("retention.ms", {}, {"log.retention.hours": "2", "log.retention.minutes": "3"}).synonyms[:2] == (
        Synonym("log.retention.minutes", "3", DYNAMIC_DEFAULT), Synonym("log.retention.hours", "2", DYNAMIC_DEFAULT))
    # The topic config's own name (how the metadata store keeps defaults) ranks with the first synonym.
    assert resolved_value("retention.ms", {}, {"retention.ms": "5", "log.retention.hours": "1"}) == "5"
    assert resolved_value("flush.ms", {}, {"log.flush.scheduler.interval.ms": "9", "log.flush.interval.ms": "8"}) \
        == "8"


def test_broker_synonyms_match_kafka_first_synonyms() -> None:
    assert BROKER_SYNONYMS["retention.ms"] == "log.retention.ms"
    assert BROKER_SYNONYMS["segment.ms"] == "log.roll.ms"
    assert BROKER_SYNONYMS["max.message.bytes"] == "message.max.bytes"
    assert BROKER_SYNONYMS["cleanup.policy"] == "log.cleanup.policy"
    assert BROKER_SYNONYMS["delete.retention.ms"] == "log.cleaner.delete.retention.ms"
    assert all(d.synonyms and d.synonyms[0].name == BROKER_SYNONYMS[n] for n, d in TOPIC_CONFIGS.items()
               if n not in TOPIC_ONLY_CONFIGS)
    # Kafka has no broker-level default for remote.storage.enable: a topic tiers only when asked to.
    assert "remote.storage.enable" not in BROKER_SYNONYMS
    assert BROKER_SYNONYMS["local.retention.ms"] == "log.local.retention.ms"


def test_typed_accessors() -> None:
    assert min_insync_replicas({}) == 1
    assert min_insync_replicas({}, {"min.insync.replicas": "2"}) == 2
    assert min_insync_replicas({"min.insync.replicas": "3"}, {"min.insync.replicas": "2"}) == 3
    assert unclean_leader_election_enable({}) is False
    assert unclean_leader_election_enable({}, {"unclean.leader.election.enable": "true"}) is True
    # A topic's explicit "false" beats a cluster-wide "true".
    assert unclean_leader_election_enable({"unclean.leader.election.enable": "false"},
                                          {"unclean.leader.election.enable": "true"}) is False


def test_a_stored_value_that_no_longer_parses_is_skipped(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="dataplane.config.resolver"):
        assert min_insync_replicas({"min.insync.replicas": "zero"}, {"min.insync.replicas": "2"}) == 2
        assert min_insync_replicas({"min.insync.replicas": "0"}) == 1
        found = resolve("retention.ms", {}, {"log.retention.ms": "soon", "log.retention.hours": "1"})
    assert (found.value, found.synonyms[0].name) == ("3600000", "log.retention.hours")
    assert "min.insync.replicas='zero'" in caplog.text and "log.retention.ms='soon'" in caplog.text


def test_log_config_defaults_agree_with_the_table() -> None:
    table = resolved_values({})
    config = LogConfig()
    for field in fields(LogConfig):
        definition = TOPIC_CONFIGS[field.name.replace("_", ".")]
        assert str(getattr(config, field.name)) == definition.default == table[definition.name], field.name
    assert LogConfig.for_topic({}) == config
    assert LogConfig.from_resolved(table) == config


def test_log_config_for_a_topic_resolves_like_describe_configs() -> None:
    overrides = {"segment.bytes": "2048", "cleanup.policy": "compact,delete", "min.insync.replicas": "2"}
    defaults = {"retention.ms": "1000", "log.roll.hours": "2", "message.max.bytes": "3000",
                "log.message.timestamp.type": "LogAppendTime"}
    config = LogConfig.for_topic(overrides, defaults)
    assert (config.segment_bytes, config.retention_ms, config.segment_ms, config.max_message_bytes) == \
        (2048, 1000, 7_200_000, 3000)
    assert config.compact and config.delete and config.log_append_time
    described = {r.name: r.value for r in resolve_all(overrides, defaults)}
    assert all(str(getattr(config, f.name)) == described[f.name.replace("_", ".")] for f in fields(LogConfig))


@pytest.mark.parametrize(("call", "words"), [
    (lambda: validate_topic_configs({"retention.ms": "soon"}), "retention.ms: expected an integer (long), got 'soon'."),
    (lambda: validate_topic_configs({"segment.bytes": "1"}), "segment.bytes: 1 is below the minimum 14."),
    (lambda: validate_topic_configs({"cleanup.policy": "shred"}), "cleanup.policy: 'shred' is not one of compact"),
    (lambda: validate_topic_configs({"no.such": "1"}), "Unknown topic config 'no.such'."),
    (lambda: resolve("no.such", {}), "Unknown topic config 'no.such'."),
    (lambda: validate_cluster_defaults({"log.retention.hours": "x"}),
     "log.retention.hours: expected an integer (int), got 'x'."),
    (lambda: validate_cluster_defaults({"log.roll.hours": "0"}), "log.roll.hours: 0 is below the minimum 1."),
    (lambda: validate_cluster_defaults({"log.dirs": "/tmp"}), "Unknown topic config or broker synonym 'log.dirs'."),
    (lambda: LogConfig().with_overrides({"segment.bytes": str(2**31)}), "segment.bytes: 2147483648 does not fit"),
    (lambda: LogConfig().with_overrides({"preallocate": "true"}), "unknown log config preallocate"),
    (lambda: LogConfig.for_topic({"segment.index.bytes": "8"}), "segment.index.bytes: 8 is below the log's minimum"),
])
def test_bad_values_are_refused_with_invalid_config(call: Callable[[], object], words: str) -> None:
    with pytest.raises(KafkaError) as caught:
        call()
    assert caught.value.code == ErrorCode.INVALID_CONFIG
    assert words in str(caught.value)


def test_config_error_is_still_a_value_error_naming_the_config() -> None:
    with pytest.raises(ValueError) as caught:  # the control plane catches it as such
        validate_topic_configs({"retention.ms": "soon"})
    assert isinstance(caught.value, ConfigError) and caught.value.name == "retention.ms"


def test_cluster_defaults_validate_under_either_name() -> None:
    assert validate_cluster_defaults({"retention.ms": " 5 ", "log.retention.hours": "02", "log.cleanup.policy":
                                      "compact"}) == {"retention.ms": "5", "log.retention.hours": "2",
                                                      "log.cleanup.policy": "compact"}


_names = st.sampled_from(sorted(TOPIC_CONFIGS))


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(_names, st.sampled_from(["1", "2", "true", "compact", "x"]), max_size=6),
       st.dictionaries(st.sampled_from(sorted(TOPIC_NAME_FOR_SYNONYM) + sorted(TOPIC_CONFIGS)),
                       st.sampled_from(["1", "3", "false", "delete", "-1"]), max_size=6))
def test_the_fast_path_agrees_with_the_full_resolution(overrides: dict[str, str], defaults: dict[str, str]) -> None:
    for found in resolve_all(overrides, defaults):
        assert resolved_value(found.name, overrides, defaults) == found.value
        assert found.synonyms[-1].source is DEFAULT
        assert found.value == TOPIC_CONFIGS[found.name].parse(found.value)  # canonical and in range


def test_config_package_imports_only_protocol_from_the_dataplane() -> None:
    """Layering: protocol < config < storage < cluster < replication < coordinator < server."""
    root = Path(dataplane.config.__file__).parent
    imported = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
    inner = {m.split(".")[1] for m in imported if m.startswith("dataplane.")}
    assert inner <= {"protocol", "config"}, inner
