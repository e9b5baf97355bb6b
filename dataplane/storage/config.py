"""Per-log configuration, named after Kafka's topic-level configs.

The defaults are ``dataplane.config.topic``'s table, and ``for_topic`` resolves a
topic's values as DescribeConfigs does (``dataplane.config.resolver``), so the
log enforces what the broker describes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

from dataplane.config.resolver import NO_CONFIGS, resolved_values
from dataplane.config.topic import TOPIC_CONFIGS, ConfigDef, ConfigType, parse_topic_config
from dataplane.protocol.errors import ErrorCode, KafkaError


def _typed(definition: ConfigDef, value: str) -> int | float | str:
    if definition.type in (ConfigType.INT, ConfigType.LONG):
        return int(value)
    if definition.type is ConfigType.DOUBLE:
        return float(value)
    return value


def _default(name: str) -> int | float | str:
    definition = TOPIC_CONFIGS[name]
    return _typed(definition, definition.default)


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The topic configs a partition log enforces; each field is the Kafka name with ``_`` for ``.``."""

    segment_bytes: int = int(_default("segment.bytes"))
    segment_ms: int = int(_default("segment.ms"))
    segment_index_bytes: int = int(_default("segment.index.bytes"))
    index_interval_bytes: int = int(_default("index.interval.bytes"))
    max_message_bytes: int = int(_default("max.message.bytes"))
    flush_messages: int = int(_default("flush.messages"))
    flush_ms: int = int(_default("flush.ms"))
    retention_ms: int = int(_default("retention.ms"))  # -1: unlimited
    retention_bytes: int = int(_default("retention.bytes"))
    cleanup_policy: str = str(_default("cleanup.policy"))  # "delete", "compact" or "compact,delete"
    delete_retention_ms: int = int(_default("delete.retention.ms"))
    min_cleanable_dirty_ratio: float = float(_default("min.cleanable.dirty.ratio"))
    message_timestamp_type: str = str(_default("message.timestamp.type"))  # or "LogAppendTime"
    remote_storage_enable: str = str(_default("remote.storage.enable"))  # "true": closed segments are tiered
    local_retention_ms: int = int(_default("local.retention.ms"))  # -2: retention.ms
    local_retention_bytes: int = int(_default("local.retention.bytes"))  # -2: retention.bytes

    def __post_init__(self) -> None:
        # The table's ranges were checked when the values were written; these are the log's own limits.
        # Positions in the offset index are int32, as in Kafka (segment.bytes is an int there).
        if not 14 <= self.segment_bytes <= 2**31 - 1:
            raise KafkaError(f"segment.bytes: {self.segment_bytes} is outside 14..{2**31 - 1}.",
                             code=ErrorCode.INVALID_CONFIG)
        if self.index_interval_bytes < 0:
            raise KafkaError(f"index.interval.bytes: {self.index_interval_bytes} is below the minimum 0.",
                             code=ErrorCode.INVALID_CONFIG)
        if self.segment_index_bytes < 12:  # room for one time-index entry
            raise KafkaError(f"segment.index.bytes: {self.segment_index_bytes} is below the log's minimum 12 "
                             f"(one time-index entry).", code=ErrorCode.INVALID_CONFIG)
        if self.message_timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise KafkaError(f"message.timestamp.type: '{self.message_timestamp_type}' is not one of "
                             f"CreateTime, LogAppendTime.", code=ErrorCode.INVALID_CONFIG)

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def remote_storage(self) -> bool:
        """Tiered: closed segments go to the remote tier and leave local disk by the local retention."""
        return self.remote_storage_enable == "true"

    @property
    def local_retention_ms_in_force(self) -> int:
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    @property
    def local_retention_bytes_in_force(self) -> int:
        return self.retention_bytes if self.local_retention_bytes == -2 else self.local_retention_bytes

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @classmethod
    def from_resolved(cls, values: Mapping[str, str]) -> LogConfig:
        """The log config for topic-config values already resolved (``resolver.resolved_values``).

        Names without a field here (``min.insync.replicas``…) are not the log's business and are ignored.
        """
        return cls(**{name: _typed(TOPIC_CONFIGS[key], values[key])  # type: ignore[arg-type]
                      for name, key in _FIELD_CONFIGS.items() if key in values})

    @classmethod
    def for_topic(cls, overrides: Mapping[str, str], cluster_defaults: Mapping[str, str] = NO_CONFIGS) -> LogConfig:
        """The log config for a topic: its overrides, else the cluster defaults, else the table's defaults."""
        return cls.from_resolved(resolved_values(overrides, cluster_defaults))

    def with_overrides(self, props: Mapping[str, str]) -> LogConfig:
        """Apply Kafka-named properties (``segment.bytes`` …) on top of this config, validated by the table."""
        changes: dict[str, object] = {}
        for key, raw in props.items():
            name = _CONFIG_FIELDS.get(key)
            if name is None:
                raise KafkaError(f"unknown log config {key}", code=ErrorCode.INVALID_CONFIG)
            changes[name] = _typed(TOPIC_CONFIGS[key], parse_topic_config(key, raw))  # ConfigError: INVALID_CONFIG
        return replace(self, **changes)  # type: ignore[arg-type]


# Each field's topic config name, and back.
_FIELD_CONFIGS: dict[str, str] = {f.name: f.name.replace("_", ".") for f in fields(LogConfig)}
_CONFIG_FIELDS: dict[str, str] = {key: name for name, key in _FIELD_CONFIGS.items()}
if not set(_FIELD_CONFIGS.values()) <= TOPIC_CONFIGS.keys():
    raise RuntimeError("every LogConfig field needs its topic config in the table")
