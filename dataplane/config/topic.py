"""Topic-level configs: the Kafka names, types, defaults and valid ranges.

One table, used by the broker (DescribeConfigs, CreateTopics, AlterConfigs) and
by the control plane (REST validation), so both refuse the same values with
the same words. Values travel as strings, as on the wire.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)


class ConfigType(Enum):
    BOOLEAN = "boolean"
    STRING = "string"
    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    LIST = "list"


class ConfigError(ValueError):
    """An unknown name or a bad value (Kafka: INVALID_CONFIG), naming the config."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name
        self.message = message


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: str
    doc: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()

    def parse(self, raw: object) -> str:
        """Validate one value and return its canonical string form."""
        if isinstance(raw, bool):
            text = "true" if raw else "false"
        elif isinstance(raw, (int, float, str)):
            text = str(raw).strip()
        else:
            raise ConfigError(self.name, f"{self.name}: expected a {self.type.value}, got {type(raw).__name__}.")
        if self.type is ConfigType.BOOLEAN:
            lowered = text.lower()
            if lowered not in {"true", "false"}:
                raise ConfigError(self.name, f"{self.name}: expected true or false, got '{text}'.")
            return lowered
        if self.type in (ConfigType.INT, ConfigType.LONG):
            try:
                number: float = int(text)
            except ValueError:
                raise ConfigError(self.name, f"{self.name}: expected an integer ({self.type.value}), "
                                             f"got '{text}'.") from None
            lo, hi = (INT_MIN, INT_MAX) if self.type is ConfigType.INT else (LONG_MIN, LONG_MAX)
            if not lo <= number <= hi:
                raise ConfigError(self.name, f"{self.name}: {text} does not fit in a {self.type.value}.")
            self._check_range(number, text)
            return str(int(number))
        if self.type is ConfigType.DOUBLE:
            try:
                number = float(text)
            except ValueError:
                raise ConfigError(self.name, f"{self.name}: expected a number, got '{text}'.") from None
            if number != number:  # NaN
                raise ConfigError(self.name, f"{self.name}: expected a number, got '{text}'.")
            self._check_range(number, text)
            return repr(number)
        if self.type is ConfigType.LIST:
            items = [item.strip() for item in text.split(",") if item.strip()]
            if not items:
                raise ConfigError(self.name, f"{self.name}: expected a comma-separated list, got '{text}'.")
            for item in items:
                if self.choices and item not in self.choices:
                    raise ConfigError(self.name, f"{self.name}: '{item}' is not one of {', '.join(self.choices)}.")
            return ",".join(dict.fromkeys(items))
        if self.choices and text not in self.choices:
            raise ConfigError(self.name, f"{self.name}: '{text}' is not one of {', '.join(self.choices)}.")
        return text

    def _check_range(self, number: float, text: str) -> None:
        if self.minimum is not None and number < self.minimum:
            raise ConfigError(self.name, f"{self.name}: {text} is below the minimum {self.minimum:g}.")
        if self.maximum is not None and number > self.maximum:
            raise ConfigError(self.name, f"{self.name}: {text} is above the maximum {self.maximum:g}.")


_B, _S, _I, _L, _D, _LIST = (ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.LONG,
                             ConfigType.DOUBLE, ConfigType.LIST)

TOPIC_CONFIGS: dict[str, ConfigDef] = {c.name: c for c in (
    ConfigDef("cleanup.policy", _LIST, "delete", "delete old segments, compact by key, or both",
              choices=("compact", "delete")),
    ConfigDef("compression.type", _S, "producer", "codec the broker stores batches in",
              choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    ConfigDef("delete.retention.ms", _L, "86400000", "how long tombstones are kept when compacting", minimum=0),
    ConfigDef("file.delete.delay.ms", _L, "60000", "delay before a deleted segment's files go", minimum=0),
    ConfigDef("flush.messages", _L, str(LONG_MAX), "fsync after this many messages", minimum=1),
    ConfigDef("flush.ms", _L, str(LONG_MAX), "fsync after this many milliseconds", minimum=0),
    ConfigDef("index.interval.bytes", _I, "4096", "bytes between offset-index entries", minimum=0),
    ConfigDef("max.compaction.lag.ms", _L, str(LONG_MAX), "longest a record stays uncompacted", minimum=1),
    ConfigDef("max.message.bytes", _I, "1048588", "largest record batch accepted", minimum=0),
    ConfigDef("message.timestamp.type", _S, "CreateTime", "which timestamp records carry",
              choices=("CreateTime", "LogAppendTime")),
    ConfigDef("message.timestamp.difference.max.ms", _L, str(LONG_MAX),
              "largest allowed gap between record and broker time (deprecated)", minimum=0),
    ConfigDef("message.timestamp.before.max.ms", _L, str(LONG_MAX),
              "how far in the past a record's timestamp may be", minimum=0),
    ConfigDef("message.timestamp.after.max.ms", _L, str(LONG_MAX),
              "how far in the future a record's timestamp may be", minimum=0),
    ConfigDef("min.cleanable.dirty.ratio", _D, "0.5", "dirty share of the log that triggers compaction",
              minimum=0, maximum=1),
    ConfigDef("min.compaction.lag.ms", _L, "0", "shortest time a record stays uncompacted", minimum=0),
    ConfigDef("min.insync.replicas", _I, "1", "replicas that must acknowledge an acks=all write", minimum=1),
    ConfigDef("preallocate", _B, "false", "preallocate segment files"),
    ConfigDef("retention.bytes", _L, "-1", "size a partition may grow to before old segments go (-1: none)"),
    ConfigDef("retention.ms", _L, "604800000", "age after which segments go (-1: forever)", minimum=-1),
    ConfigDef("segment.bytes", _I, "1073741824", "segment size before rolling", minimum=14),
    ConfigDef("segment.index.bytes", _I, "10485760", "largest offset index per segment", minimum=4),
    ConfigDef("segment.jitter.ms", _L, "0", "random jitter subtracted from segment.ms", minimum=0),
    ConfigDef("segment.ms", _L, "604800000", "age of the active segment before rolling", minimum=1),
    ConfigDef("unclean.leader.election.enable", _B, "false", "allow an out-of-sync replica to lead"),
    ConfigDef("message.downconversion.enable", _B, "true", "down-convert for old fetch versions"),
)}


def parse_topic_config(name: str, value: object) -> str:
    definition = TOPIC_CONFIGS.get(name)
    if definition is None:
        raise ConfigError(name, f"Unknown topic config '{name}'.")
    return definition.parse(value)


def validate_topic_configs(configs: Mapping[str, object]) -> dict[str, str]:
    """Canonical string values for ``configs``; raises ConfigError on the first bad entry."""
    return {name: parse_topic_config(name, value) for name, value in configs.items()}


def effective_topic_configs(overrides: Mapping[str, str],
                            cluster_defaults: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every topic config's value: override, else cluster default, else Kafka's default."""
    values = {name: d.default for name, d in TOPIC_CONFIGS.items()}
    values.update(cluster_defaults or {})
    values.update(overrides)
    return values


# Each topic config's broker-level default in Kafka (``LogConfig.TopicConfigSynonyms``,
# first synonym only): the name a BROKER resource shows and alters it under.
BROKER_SYNONYMS: dict[str, str] = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": "compression.type",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "message.timestamp.difference.max.ms": "log.message.timestamp.difference.max.ms",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "min.insync.replicas": "min.insync.replicas",
    "preallocate": "log.preallocate",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
    "segment.index.bytes": "log.index.size.max.bytes",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.ms": "log.roll.ms",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "message.downconversion.enable": "log.message.downconversion.enable",
}
TOPIC_NAME_FOR_BROKER_CONFIG: dict[str, str] = {broker: topic for topic, broker in BROKER_SYNONYMS.items()}
if BROKER_SYNONYMS.keys() != TOPIC_CONFIGS.keys():
    raise RuntimeError("every topic config needs its broker synonym")
