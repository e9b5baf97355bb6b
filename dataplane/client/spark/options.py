"""The options of Spark's Kafka source and sink, parsed into frozen values (pure: no I/O, no pyspark).

Names, formats and rules follow Spark's Kafka integration guide, so a job written for
``format("kafka")`` runs with ``format("sluice")``: one of ``subscribe``/``subscribePattern``/
``assign``; ``startingOffsets``/``endingOffsets`` as ``earliest``/``latest`` or per-partition JSON
(-2 earliest, -1 latest); ``startingTimestamp``/``startingOffsetsByTimestamp`` (and the ending
ones), which win over offsets; ``kafka.*`` passed to the client with the prefix removed.
Every problem is a ``SparkSourceError`` whose message names the option, so it reads well
after Spark has wrapped it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

EARLIEST = -2  # Spark's (and Kafka's ListOffsets) sentinels in offset JSON
LATEST = -1

TopicPartition = tuple[str, int]


class SparkSourceError(ValueError):
    """Bad options or a cluster that cannot serve them; the message is meant for the job's author."""


class DataLossError(SparkSourceError):
    """Records the query asked for are gone (deleted, truncated); raised only with ``failOnDataLoss``."""


@dataclass(frozen=True, slots=True)
class Subscribe:
    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SubscribePattern:
    pattern: str

    def matches(self, topic: str) -> bool:
        return re.fullmatch(self.pattern, topic) is not None


@dataclass(frozen=True, slots=True)
class Assign:
    partitions: tuple[TopicPartition, ...]


Selector = Subscribe | SubscribePattern | Assign


@dataclass(frozen=True, slots=True)
class Bound:
    """Where ranges start or end: ``earliest``, ``latest``, per-partition offsets, or by timestamp.

    ``offsets`` holds offsets (``kind == "offsets"``, with -2/-1 allowed) or timestamps in ms
    (``kind == "timestamps"``); ``timestamp`` is the one timestamp of ``kind == "timestamp"``.
    """

    kind: Literal["earliest", "latest", "offsets", "timestamp", "timestamps"]
    offsets: tuple[tuple[TopicPartition, int], ...] = ()
    timestamp: int = 0

    def as_dict(self) -> dict[TopicPartition, int]:
        return dict(self.offsets)


@dataclass(frozen=True, slots=True)
class SourceOptions:
    client: Mapping[str, str]  # librdkafka configuration (``kafka.*`` without the prefix)
    selector: Selector
    starting: Bound
    ending: Bound  # batch only; streaming queries run to whatever is latest
    strategy: Literal["error", "latest"] = "error"  # startingOffsetsByTimestampStrategy
    fail_on_data_loss: bool = True
    include_headers: bool = False
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    poll_timeout_ms: int = 30_000  # one fetch that returns nothing for this long fails the task
    engine: Literal["native", "librdkafka"] = "native"  # fetch.engine: how a task reads (see fetch.py)


@dataclass(frozen=True, slots=True)
class SinkOptions:
    client: Mapping[str, str]
    topic: str | None  # overrides the ``topic`` column when set, as in Spark


# librdkafka settings the source decides itself: offsets come from the query, never from a group.
_FORBIDDEN_CLIENT = {
    "auto.offset.reset": "use startingOffsets instead",
    "enable.auto.commit": "the source never commits offsets to a group",
    "key.deserializer": "key is always binary", "value.deserializer": "value is always binary",
    "key.serializer": "key is always binary", "value.serializer": "value is always binary",
}


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): str(v) for k, v in options.items()}


def client_config(options: Mapping[str, str]) -> dict[str, str]:
    """``kafka.*`` options without the prefix; ``bootstrap.servers`` may also be given bare."""
    opts = _lower(options)
    config = {k[len("kafka."):]: v for k, v in opts.items() if k.startswith("kafka.")}
    if "bootstrap.servers" not in config and opts.get("bootstrap.servers"):
        config["bootstrap.servers"] = opts["bootstrap.servers"]
    if not config.get("bootstrap.servers", "").strip():
        raise SparkSourceError("option 'kafka.bootstrap.servers' (or 'bootstrap.servers') is required")
    for key, why in _FORBIDDEN_CLIENT.items():
        if key in config:
            raise SparkSourceError(f"option 'kafka.{key}' is not supported: {why}")
    config.pop("group.id", None)  # no group is ever joined or committed to
    return config


def _json(name: str, text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SparkSourceError(f"option '{name}' is not valid JSON ({e.msg} at char {e.pos}): {text!r}") from None


def _int(name: str, value: object, *, minimum: int | None = None) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise SparkSourceError(f"option '{name}' must be an integer, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise SparkSourceError(f"option '{name}' must be at least {minimum}, got {number}")
    return number


def _bool(name: str, value: str) -> bool:
    if value.strip().lower() not in ("true", "false"):
        raise SparkSourceError(f"option '{name}' must be true or false, got {value!r}")
    return value.strip().lower() == "true"


def parse_partition_json(name: str, text: str) -> tuple[tuple[TopicPartition, int], ...]:
    """``{"topic": {"0": 23, "1": -2}}`` as sorted ((topic, partition), number) pairs."""
    data = _json(name, text)
    if not isinstance(data, dict):
        raise SparkSourceError(f"option '{name}' must be a JSON object like {{\"topic\": {{\"0\": 23}}}}, got {text!r}")
    pairs: list[tuple[TopicPartition, int]] = []
    for topic, partitions in data.items():
        if not isinstance(partitions, dict):
            raise SparkSourceError(f"option '{name}': topic {topic!r} must map partition numbers to offsets, "
                                   f"got {partitions!r}")
        for partition, number in partitions.items():
            if isinstance(number, bool) or not isinstance(number, int):
                raise SparkSourceError(f"option '{name}': {topic}-{partition} must be an integer, got {number!r}")
            pairs.append(((topic, _int(f"{name}: partition of {topic!r}", partition, minimum=0)), number))
    return tuple(sorted(pairs))


def parse_selector(options: Mapping[str, str]) -> Selector:
    opts = _lower(options)
    given = [name for name in ("assign", "subscribe", "subscribepattern") if opts.get(name, "").strip()]
    names = {"assign": "assign", "subscribe": "subscribe", "subscribepattern": "subscribePattern"}
    if len(given) != 1:
        got = ", ".join(f"'{names[g]}'" for g in given) or "none"
        raise SparkSourceError(f"exactly one of 'assign', 'subscribe', 'subscribePattern' must be given; got {got}")
    kind, text = given[0], opts[given[0]]
    if kind == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
        if not topics:
            raise SparkSourceError(f"option 'subscribe' names no topic: {text!r}")
        return Subscribe(topics)
    if kind == "subscribepattern":
        try:
            re.compile(text)
        except re.error as e:
            raise SparkSourceError(f"option 'subscribePattern' is not a valid regular expression ({e}): "
                                   f"{text!r}") from None
        return SubscribePattern(text)
    data = _json("assign", text)
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise SparkSourceError(f"option 'assign' must be a JSON object like {{\"topic\": [0, 1]}}, got {text!r}")
    assigned = sorted({(topic, _int(f"assign: partition of {topic!r}", p, minimum=0))
                       for topic, parts in data.items() for p in parts})
    if not assigned:
        raise SparkSourceError(f"option 'assign' names no partition: {text!r}")
    return Assign(tuple(assigned))


def _bound(opts: dict[str, str], which: Literal["starting", "ending"], default: Literal["earliest", "latest"],
           *, streaming: bool) -> Bound:
    """Spark's precedence: ``…OffsetsByTimestamp`` over ``…Timestamp`` over ``…Offsets``."""
    by_ts = opts.get(f"{which}offsetsbytimestamp", "").strip()
    if by_ts:
        name = f"{which}OffsetsByTimestamp"
        pairs = parse_partition_json(name, by_ts)
        if any(ts < 0 for _, ts in pairs):
            raise SparkSourceError(f"option '{name}': timestamps must not be negative")
        return Bound("timestamps", pairs)
    ts = opts.get(f"{which}timestamp", "").strip()
    if ts:
        return Bound("timestamp", timestamp=_int(f"{which}Timestamp", ts, minimum=0))
    name = f"{which}Offsets"
    text = opts.get(f"{which}offsets", "").strip() or default
    if text.lower() in ("earliest", "latest"):
        bound = Bound("earliest" if text.lower() == "earliest" else "latest")
    else:
        pairs = parse_partition_json(name, text)
        for (topic, partition), offset in pairs:
            if offset < EARLIEST:
                raise SparkSourceError(f"option '{name}': {topic}-{partition} has offset {offset}; "
                                       "use -2 (earliest), -1 (latest) or an offset >= 0")
        bound = Bound("offsets", pairs)
    if not streaming and which == "starting" and (
            bound.kind == "latest" or any(o == LATEST for _, o in bound.offsets)):
        raise SparkSourceError("option 'startingOffsets': latest (or -1) is not allowed for batch queries")
    if which == "ending" and (bound.kind == "earliest" or any(o == EARLIEST for _, o in bound.offsets)):
        raise SparkSourceError("option 'endingOffsets': earliest (or -2) is not allowed")
    return bound


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Everything the reader needs; raises SparkSourceError naming the first bad option."""
    opts = _lower(options)
    client = client_config(options)
    selector = parse_selector(options)
    if streaming:
        for name in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"):
            if opts.get(name, "").strip():
                raise SparkSourceError(f"option '{name}' is not valid for streaming queries")
    starting = _bound(opts, "starting", "latest" if streaming else "earliest", streaming=streaming)
    ending = Bound("latest") if streaming else _bound(opts, "ending", "latest", streaming=False)
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise SparkSourceError(f"option 'startingOffsetsByTimestampStrategy' must be error or latest, "
                               f"got {strategy!r}")
    limit = opts.get("maxoffsetspertrigger", "").strip()
    min_parts = opts.get("minpartitions", "").strip()
    max_records = opts.get("maxrecordsperpartition", "").strip()
    engine = opts.get("fetch.engine", "native").strip().lower()
    if engine not in ("native", "librdkafka"):
        raise SparkSourceError(f"option 'fetch.engine' must be native or librdkafka, got {engine!r}")
    return SourceOptions(
        client=client, selector=selector, starting=starting, ending=ending,
        strategy="latest" if strategy == "latest" else "error",
        fail_on_data_loss=_bool("failOnDataLoss", opts.get("failondataloss", "true")),
        include_headers=_bool("includeHeaders", opts.get("includeheaders", "false")),
        max_offsets_per_trigger=_int("maxOffsetsPerTrigger", limit, minimum=1) if limit else None,
        min_partitions=_int("minPartitions", min_parts, minimum=1) if min_parts else None,
        max_records_per_partition=_int("maxRecordsPerPartition", max_records, minimum=1) if max_records else None,
        poll_timeout_ms=_int("kafkaConsumer.pollTimeoutMs", opts.get("kafkaconsumer.polltimeoutms", "30000"),
                             minimum=1),
        engine="librdkafka" if engine == "librdkafka" else "native")


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    opts = _lower(options)
    topic = opts.get("topic", "").strip() or None
    return SinkOptions(client=client_config(options), topic=topic)
