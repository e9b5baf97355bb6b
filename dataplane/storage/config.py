"""Per-log configuration, named after Kafka's topic-level configs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

from dataplane.protocol.errors import ErrorCode, KafkaError

LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    max_message_bytes: int = 1024 * 1024 + 12
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    retention_ms: int = 7 * 24 * 3600 * 1000  # -1: unlimited
    retention_bytes: int = -1
    cleanup_policy: str = "delete"  # "delete", "compact" or "compact,delete"
    delete_retention_ms: int = 24 * 3600 * 1000
    min_cleanable_dirty_ratio: float = 0.5
    message_timestamp_type: str = "CreateTime"  # or "LogAppendTime"

    def __post_init__(self) -> None:
        # Positions in the offset index are int32, as in Kafka (segment.bytes is an int there).
        if not 14 <= self.segment_bytes <= 2**31 - 1:
            raise KafkaError(f"segment.bytes {self.segment_bytes} out of range",
                             code=ErrorCode.INVALID_CONFIG)
        if self.index_interval_bytes < 0 or self.segment_index_bytes < 12:
            raise KafkaError("bad index settings", code=ErrorCode.INVALID_CONFIG)
        if self.message_timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise KafkaError(f"bad message.timestamp.type {self.message_timestamp_type}",
                             code=ErrorCode.INVALID_CONFIG)

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    def with_overrides(self, props: Mapping[str, str]) -> LogConfig:
        """Apply Kafka-named properties (``segment.bytes`` …) on top of this config."""
        names = {f.name for f in fields(self)}
        changes: dict[str, object] = {}
        for key, raw in props.items():
            name = key.replace(".", "_")
            if name not in names:
                raise KafkaError(f"unknown log config {key}", code=ErrorCode.INVALID_CONFIG)
            current = getattr(self, name)
            try:
                value: object = type(current)(raw) if not isinstance(current, str) else raw
            except ValueError as exc:
                raise KafkaError(f"bad value for {key}: {raw}", code=ErrorCode.INVALID_CONFIG) from exc
            changes[name] = value
        policy = str(changes.get("cleanup_policy", self.cleanup_policy))
        if not set(policy.replace(" ", "").split(",")) <= {"delete", "compact"}:
            raise KafkaError(f"bad cleanup.policy {policy}", code=ErrorCode.INVALID_CONFIG)
        return replace(self, **changes)  # type: ignore[arg-type]
