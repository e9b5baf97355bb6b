"""Topic-level configs: the Kafka names, types, defaults, valid ranges and broker synonyms.

One table, used by the broker (DescribeConfigs, CreateTopics, AlterConfigs, the
storage layer's ``LogConfig``) and by the control plane (REST validation), so all
refuse the same values with the same words and fall back to the same defaults.
Values travel as strings, as on the wire. Which value is in force for a topic is
``dataplane.config.resolver``'s business.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import Enum

from dataplane.protocol.errors import ErrorCode, KafkaError

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


class ConfigError(KafkaError, ValueError):
    """An unknown name or a bad value, naming the config.

    A KafkaError with INVALID_CONFIG, so handlers answer it as Kafka does without
    translating; still a ValueError for callers outside the broker (the control plane).
    """

    code = ErrorCode.INVALID_CONFIG

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name
        self.message = message


MINUTE_MS = 60 * 1000
HOUR_MS = 60 * MINUTE_MS


@dataclass(frozen=True, slots=True)
class BrokerSynonym:
    """A broker-level config that sets a topic config's cluster-wide default (Kafka's ``ConfigSynonym``).

    ``unit_ms`` > 1: the broker config counts minutes or hours where the topic config counts milliseconds.
    """

    name: str
    unit_ms: int = 1

    def to_topic_value(self, definition: ConfigDef, raw: object) -> str:
        """``raw``, set under this broker name, as the topic config's canonical value."""
        named = replace(definition, name=self.name)  # errors name the config that was actually set
        if self.unit_ms == 1:
            return named.parse(raw)
        count = int(replace(named, type=ConfigType.INT, minimum=None, maximum=None).parse(raw))
        return named.parse(-1 if count < 0 else count * self.unit_ms)  # Kafka: any negative time is -1


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: str
    doc: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    # Kafka's ``ServerTopicConfigSynonyms``, highest precedence first; the first is the one a
    # BROKER resource shows and alters (Kafka's dynamic broker configs are the first synonyms only).
    synonyms: tuple[BrokerSynonym, ...] = ()

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
            for item in items:  # an empty list is a value (Kafka: what SUBTRACT of the last item leaves)
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

def _syn(*names: str | tuple[str, int]) -> tuple[BrokerSynonym, ...]:
    return tuple(BrokerSynonym(n) if isinstance(n, str) else BrokerSynonym(*n) for n in names)


TOPIC_CONFIGS: dict[str, ConfigDef] = {c.name: c for c in (
    ConfigDef("cleanup.policy", _LIST, "delete", "delete old segments, compact by key, or both",
              choices=("compact", "delete"), synonyms=_syn("log.cleanup.policy")),
    ConfigDef("compression.type", _S, "producer", "codec the broker stores batches in",
              choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
              synonyms=_syn("compression.type")),
    ConfigDef("delete.retention.ms", _L, "86400000", "how long tombstones are kept when compacting", minimum=0,
              synonyms=_syn("log.cleaner.delete.retention.ms")),
    ConfigDef("file.delete.delay.ms", _L, "60000", "delay before a deleted segment's files go", minimum=0,
              synonyms=_syn("log.segment.delete.delay.ms")),
    ConfigDef("flush.messages", _L, str(LONG_MAX), "fsync after this many messages", minimum=1,
              synonyms=_syn("log.flush.interval.messages")),
    ConfigDef("flush.ms", _L, str(LONG_MAX), "fsync after this many milliseconds", minimum=0,
              synonyms=_syn("log.flush.interval.ms", "log.flush.scheduler.interval.ms")),
    ConfigDef("index.interval.bytes", _I, "4096", "bytes between offset-index entries", minimum=0,
              synonyms=_syn("log.index.interval.bytes")),
    ConfigDef("local.retention.bytes", _L, "-2",
              "bytes of a tiered partition kept on local disk (-2: retention.bytes; uploaded segments only)",
              minimum=-2, synonyms=_syn("log.local.retention.bytes")),
    ConfigDef("local.retention.ms", _L, "-2",
              "age after which a tiered partition's uploaded segments leave local disk (-2: retention.ms)",
              minimum=-2, synonyms=_syn("log.local.retention.ms")),
    ConfigDef("max.compaction.lag.ms", _L, str(LONG_MAX), "longest a record stays uncompacted", minimum=1,
              synonyms=_syn("log.cleaner.max.compaction.lag.ms")),
    ConfigDef("max.message.bytes", _I, "1048588", "largest record batch accepted", minimum=0,
              synonyms=_syn("message.max.bytes")),
    ConfigDef("message.timestamp.type", _S, "CreateTime", "which timestamp records carry",
              choices=("CreateTime", "LogAppendTime"), synonyms=_syn("log.message.timestamp.type")),
    ConfigDef("message.timestamp.difference.max.ms", _L, str(LONG_MAX),
              "largest allowed gap between record and broker time (deprecated)", minimum=0,
              synonyms=_syn("log.message.timestamp.difference.max.ms")),
    ConfigDef("message.timestamp.before.max.ms", _L, str(LONG_MAX),
              "how far in the past a record's timestamp may be", minimum=0,
              synonyms=_syn("log.message.timestamp.before.max.ms")),
    ConfigDef("message.timestamp.after.max.ms", _L, str(LONG_MAX),
              "how far in the future a record's timestamp may be", minimum=0,
              synonyms=_syn("log.message.timestamp.after.max.ms")),
    ConfigDef("min.cleanable.dirty.ratio", _D, "0.5", "dirty share of the log that triggers compaction",
              minimum=0, maximum=1, synonyms=_syn("log.cleaner.min.cleanable.ratio")),
    ConfigDef("min.compaction.lag.ms", _L, "0", "shortest time a record stays uncompacted", minimum=0,
              synonyms=_syn("log.cleaner.min.compaction.lag.ms")),
    ConfigDef("min.insync.replicas", _I, "1", "replicas that must acknowledge an acks=all write", minimum=1,
              synonyms=_syn("min.insync.replicas")),
    ConfigDef("preallocate", _B, "false", "preallocate segment files", synonyms=_syn("log.preallocate")),
    ConfigDef("remote.storage.enable", _B, "false",
              "keep closed segments in the remote tier (object storage); cannot be turned off again"),
    ConfigDef("retention.bytes", _L, "-1", "size a partition may grow to before old segments go (-1: none)",
              synonyms=_syn("log.retention.bytes")),
    ConfigDef("retention.ms", _L, "604800000", "age after which segments go (-1: forever)", minimum=-1,
              synonyms=_syn("log.retention.ms", ("log.retention.minutes", MINUTE_MS),
                            ("log.retention.hours", HOUR_MS))),
    ConfigDef("segment.bytes", _I, "1073741824", "segment size before rolling", minimum=14,
              synonyms=_syn("log.segment.bytes")),
    ConfigDef("segment.index.bytes", _I, "10485760", "largest offset index per segment", minimum=4,
              synonyms=_syn("log.index.size.max.bytes")),
    ConfigDef("segment.jitter.ms", _L, "0", "random jitter subtracted from segment.ms", minimum=0,
              synonyms=_syn("log.roll.jitter.ms", ("log.roll.jitter.hours", HOUR_MS))),
    ConfigDef("segment.ms", _L, "604800000", "age of the active segment before rolling", minimum=1,
              synonyms=_syn("log.roll.ms", ("log.roll.hours", HOUR_MS))),
    ConfigDef("unclean.leader.election.enable", _B, "false", "allow an out-of-sync replica to lead",
              synonyms=_syn("unclean.leader.election.enable")),
    ConfigDef("message.downconversion.enable", _B, "true", "down-convert for old fetch versions",
              synonyms=_syn("log.message.downconversion.enable")),
)}
# Topic-only configs: Kafka has no broker-level default for them (tiering is chosen topic by topic).
TOPIC_ONLY_CONFIGS = frozenset({"remote.storage.enable"})
if not all(d.synonyms for d in TOPIC_CONFIGS.values() if d.name not in TOPIC_ONLY_CONFIGS):
    raise RuntimeError("every topic config needs its broker synonym")

# The broker-level name a BROKER resource shows and alters each topic config's default under.
BROKER_SYNONYMS: dict[str, str] = {name: d.synonyms[0].name for name, d in TOPIC_CONFIGS.items()
                                   if d.synonyms}
TOPIC_NAME_FOR_BROKER_CONFIG: dict[str, str] = {broker: topic for topic, broker in BROKER_SYNONYMS.items()}
# Every broker synonym (``log.retention.hours`` too), for reading cluster defaults kept under any of them.
TOPIC_NAME_FOR_SYNONYM: dict[str, str] = {s.name: d.name for d in TOPIC_CONFIGS.values() for s in d.synonyms}


def parse_topic_config(name: str, value: object) -> str:
    definition = TOPIC_CONFIGS.get(name)
    if definition is None:
        raise ConfigError(name, f"Unknown topic config '{name}'.")
    return definition.parse(value)


def validate_topic_configs(configs: Mapping[str, object]) -> dict[str, str]:
    """Canonical string values for ``configs``; raises ConfigError on the first bad entry."""
    return {name: parse_topic_config(name, value) for name, value in configs.items()}
