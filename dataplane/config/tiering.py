"""Kafka's rules for tiered topics' configs (``LogConfig.validate`` with remote storage, KIP-405).

Checked wherever a topic's configs change (CreateTopics, AlterConfigs, IncrementalAlterConfigs), on the values
in force (overrides over cluster defaults), with Kafka's messages:

* tiering needs the broker's remote storage configured;
* compacted topics cannot tier;
* ``local.retention.ms``/``.bytes`` may not exceed ``retention.ms``/``.bytes`` (nor be -1 when those are set);
* once on, ``remote.storage.enable`` cannot be turned off (Kafka 3.x: the remote data would be orphaned).
"""

from __future__ import annotations

from collections.abc import Mapping

from dataplane.config.resolver import NO_CONFIGS, resolved_value
from dataplane.config.topic import ConfigError

REMOTE_STORAGE_ENABLE = "remote.storage.enable"
TIERING_DISABLED_IN_BROKER = ("Tiered Storage functionality is disabled in the broker. Topic cannot be configured "
                              "with remote log storage.")
COMPACTED_TOPIC = "Remote log storage is unsupported for the compacted topics"
TURNING_OFF = "Disabling remote storage feature on the topic level is not supported."


def check_tiering(overrides: Mapping[str, str], cluster_defaults: Mapping[str, str] = NO_CONFIGS, *,
                  previous: Mapping[str, str] | None = None, remote_storage_configured: bool) -> None:
    """Raise ConfigError (INVALID_CONFIG) if ``overrides`` break a tiering rule; ``previous``: the topic's
    overrides before this change (None for a new topic)."""
    def value(name: str) -> str:
        return resolved_value(name, overrides, cluster_defaults)

    enabled = value(REMOTE_STORAGE_ENABLE) == "true"
    if previous is not None and not enabled \
            and resolved_value(REMOTE_STORAGE_ENABLE, previous, cluster_defaults) == "true":
        raise ConfigError(REMOTE_STORAGE_ENABLE, TURNING_OFF)
    if not enabled:
        return
    if not remote_storage_configured:
        raise ConfigError(REMOTE_STORAGE_ENABLE, TIERING_DISABLED_IN_BROKER)
    if "compact" in value("cleanup.policy").split(","):
        raise ConfigError(REMOTE_STORAGE_ENABLE, COMPACTED_TOPIC)
    for local_name, total_name in (("local.retention.ms", "retention.ms"),
                                   ("local.retention.bytes", "retention.bytes")):
        local, total = int(value(local_name)), int(value(total_name))
        if total > -1 and local != -2:
            if local == -1:
                raise ConfigError(local_name, f"Invalid value {local} for configuration {local_name}: Value must "
                                              f"not be -1 as {total_name} value is set as {total}.")
            if local > total:
                raise ConfigError(local_name, f"Invalid value {local} for configuration {local_name}: Value must "
                                              f"not be more than {total_name} property value: {total}")
