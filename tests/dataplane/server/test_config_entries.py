"""DescribeConfigs entries and IncrementalAlterConfigs' starting values come from the resolver (no broker)."""

from __future__ import annotations

from typing import Any, cast

from dataplane.config.resolver import ConfigSource, resolved_value
from dataplane.server.handlers.configs import (
    AlterOp,
    _describe_entry,
    broker_entries,
    incremental_change,
    topic_entries,
)


def test_topic_entries_carry_value_source_and_synonyms() -> None:
    entries = {e.name: e for e in topic_entries({"retention.ms": "60000"}, {"log.retention.hours": "1",
                                                                          "message.max.bytes": "2500"})}
    described = _describe_entry(entries["retention.ms"], synonyms=True, documentation=False)
    assert (described["value"], described["config_source"]) == ("60000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert [(s["name"], s["value"], s["source"]) for s in described["synonyms"]] == [
        ("retention.ms", "60000", 1), ("log.retention.hours", "1", 3), ("log.retention.ms", "604800000", 5)]
    inherited = _describe_entry(entries["max.message.bytes"], synonyms=False, documentation=False)
    assert (inherited["value"], inherited["config_source"], inherited["synonyms"]) == ("2500", 3, ())


def test_broker_cluster_default_entries_show_only_what_is_set() -> None:
    entries = broker_entries(cast(Any, None), {"retention.ms": "1234"}, only_dynamic=True,
                             dynamic={-1: {"follower.replication.throttled.rate": "1000"}, 2: {"x": "y"}})
    assert [(e.name, e.value, e.source) for e in entries] == [
        ("log.retention.ms", "1234", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("follower.replication.throttled.rate", "1000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)]


def test_append_starts_from_the_cluster_default_under_a_synonym() -> None:
    defaults = {"log.cleanup.policy": "compact"}
    change = incremental_change([("cleanup.policy", AlterOp.APPEND, "delete")],
                                lambda key: resolved_value(key, {}, defaults))  # as _alter passes it
    assert change({}) == {"cleanup.policy": "compact,delete"}
