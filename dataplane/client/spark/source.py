"""The ``sluice`` PySpark data source: Spark's Kafka source and sink, over Sluice (or any Kafka) topics.

``DataSource`` subclasses are what Spark pickles and instantiates: the readers' planning methods run
on the driver (in Spark's Python planner worker; the stream reader lives there for the whole query),
``read``/``write`` run in executor Python workers, each call on its own. Readers hold only frozen
options; a stream reader also holds an ``OffsetLookup`` (its driver-side admin client), created on
first use and closed by ``stop``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from dataplane.client.spark.fetch import fetch_range
from dataplane.client.spark.offsets import OffsetLookup
from dataplane.client.spark.options import (
    Assign,
    DataLossError,
    Selector,
    SinkOptions,
    SourceOptions,
    Subscribe,
    TopicPartition,
    parse_selector,
    parse_sink_options,
    parse_source_options,
)
from dataplane.client.spark.plan import (
    OffsetRange,
    limit_ends,
    offsets_from_json,
    offsets_to_json,
    split_ranges,
    stream_ranges,
)
from dataplane.client.spark.produce import check_sink_columns, produce_batches
from dataplane.client.spark.savemode import check_mode
from dataplane.client.spark.schema_codec import (
    BatchDecoder,
    BatchEncoder,
    TypedRead,
    TypedWrite,
    resolve_read,
    resolve_write,
)
from dataplane.client.spark.schema_options import SchemaOptions, parse_schema_options

HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
SCHEMA = StructType([
    StructField("key", BinaryType()), StructField("value", BinaryType()), StructField("topic", StringType()),
    StructField("partition", IntegerType()), StructField("offset", LongType()),
    StructField("timestamp", TimestampType()), StructField("timestampType", IntegerType()),
])
SCHEMA_WITH_HEADERS = StructType([*SCHEMA.fields, StructField("headers", HEADERS)])


class RangePartition(InputPartition):
    """One Spark task's offset range (``value`` is the ``OffsetRange``)."""

    def __init__(self, r: OffsetRange) -> None:
        super().__init__(r)


@dataclass(frozen=True, slots=True)
class Produced(WriterCommitMessage):
    records: int


def _read(options: SourceOptions, partition: InputPartition,
          typed: TypedRead | None = None) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition.value, OffsetRange):  # no ranges: Spark runs one task with an empty partition
        return
    batches = fetch_range(options.client, partition.value, include_headers=options.include_headers,
                          fail_on_data_loss=options.fail_on_data_loss, poll_timeout_ms=options.poll_timeout_ms,
                          engine=options.engine)
    if typed is None:
        yield from batches
        return
    decoder = BatchDecoder(typed, SCHEMA_WITH_HEADERS if options.include_headers else SCHEMA)
    for batch in batches:
        yield decoder.decode(batch)


def _one_topic(selector: Selector) -> str | None:
    """The topic a query names when it names exactly one (the default subjects are ``<topic>-key/-value``)."""
    if isinstance(selector, Subscribe):
        return selector.topics[0] if len(selector.topics) == 1 else None
    if isinstance(selector, Assign):
        topics = {t for t, _ in selector.partitions}
        return topics.pop() if len(topics) == 1 else None
    return None


def _schema_options(options: dict[str, str]) -> SchemaOptions | None:
    """The typed sides' options; only the topic selector matters here (``schema()`` runs for batch and stream)."""
    return parse_schema_options(options, topic=_one_topic(parse_selector(options)), sink=False)


def _tasks(options: SourceOptions, ranges: Sequence[OffsetRange]) -> list[InputPartition]:
    split = split_ranges(ranges, min_partitions=options.min_partitions,
                         max_records=options.max_records_per_partition)
    return [RangePartition(r) for r in split]


class SluiceReader(DataSourceReader):
    """A batch query: ranges fixed at planning (``startingOffsets`` to ``endingOffsets``), split into tasks."""

    def __init__(self, options: SourceOptions, typed: TypedRead | None = None) -> None:
        self.options = options
        self.typed = typed

    def partitions(self) -> Sequence[InputPartition]:
        lookup = OffsetLookup(self.options)
        try:
            return _tasks(self.options, lookup.batch_ranges())
        finally:
            lookup.close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition, self.typed)


class SluiceStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A streaming query: offsets are Spark's Kafka checkpoint JSON ``{"topic": {"0": 42}}``.

    Partitions that appear later (new topics matching ``subscribePattern``, added partitions) are read
    from their earliest offset. ``maxOffsetsPerTrigger`` is Spark's ``ReadMaxRows`` admission control.
    """

    def __init__(self, options: SourceOptions, typed: TypedRead | None = None) -> None:
        self.options = options
        self.typed = typed
        self._lookup: OffsetLookup | None = None
        self._available_now: dict[TopicPartition, int] | None = None

    @property
    def lookup(self) -> OffsetLookup:
        if self._lookup is None:
            self._lookup = OffsetLookup(self.options)
        return self._lookup

    def initialOffset(self) -> dict[str, Any]:
        lookup = self.lookup
        tps = lookup.partitions()
        earliest, latest = lookup.offsets(tps, "earliest"), lookup.offsets(tps, "latest")
        return offsets_to_json(lookup.bound(self.options.starting, tps, starting=True, earliest=earliest,
                                            latest=latest))

    def _latest(self, start: dict[TopicPartition, int]) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
        """Each partition's start (new partitions: their earliest offset) and latest offset."""
        lookup = self.lookup
        tps = sorted(set(lookup.partitions()) | set(start))
        latest = lookup.offsets(tps, "latest")
        new = [tp for tp in tps if tp not in start]
        starts = {**lookup.offsets(new, "earliest"), **start}
        ends = {}
        for tp in tps:
            if latest[tp] < starts[tp]:
                if self.options.fail_on_data_loss:
                    raise DataLossError(f"{tp[0]}-{tp[1]} now ends at {latest[tp]}, before offset {starts[tp]} "
                                        "already read (the log was truncated); set failOnDataLoss=false to go on")
                ends[tp] = starts[tp]
            else:
                ends[tp] = latest[tp]
        return starts, ends

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin, ends = self._latest(offsets_from_json(start))
        if self._available_now is not None:  # availableNow: never past what existed when the query started
            ends = {tp: min(e, self._available_now.get(tp, begin.get(tp, e))) for tp, e in ends.items()}
            ends = {tp: max(e, begin.get(tp, e)) for tp, e in ends.items()}
        if isinstance(limit, ReadMaxRows):
            ends = limit_ends(begin, ends, limit.max_rows)
        return offsets_to_json(ends)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_offsets_per_trigger
        return ReadMaxRows(n) if n is not None else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = self._latest({})[1]

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin, stop = offsets_from_json(start), offsets_from_json(end)
        new = [tp for tp in stop if tp not in begin]
        earliest = self.lookup.offsets(new, "earliest") if new else {}
        return _tasks(self.options, stream_ranges(begin, stop, earliest))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition, self.typed)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: offsets live in Spark's checkpoint, never in a consumer group."""

    def stop(self) -> None:
        if self._lookup is not None:
            self._lookup.close()
            self._lookup = None


def _sink_columns(schema: StructType) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in schema.fields}


def _produce(sink: SinkOptions, typed: TypedWrite | None, iterator: Iterator[pa.RecordBatch]) -> Produced:
    encode = BatchEncoder(typed).encode if typed is not None else None
    return Produced(produce_batches(sink.client, iterator, topic=sink.topic, encode=encode))


class SluiceWriter(DataSourceArrowWriter):
    """``df.write.format("sluice")``: each task produces its rows and reports how many were acknowledged."""

    def __init__(self, options: dict[str, str], typed: TypedWrite | None = None) -> None:
        self.sink = parse_sink_options(options)
        self.typed = typed

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return _produce(self.sink, self.typed, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Every task flushed before reporting: the records are written, nothing is left to make visible."""


class SluiceStreamWriter(DataSourceStreamArrowWriter):
    """The streaming sink: at least once, as Spark's Kafka sink (a retried micro-batch is produced again)."""

    def __init__(self, options: dict[str, str], typed: TypedWrite | None = None) -> None:
        self.sink = parse_sink_options(options)
        self.typed = typed

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return _produce(self.sink, self.typed, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """As ``SluiceWriter.commit``."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records already acknowledged stay written (Kafka's sink cannot take them back either)."""


class SluiceDataSource(DataSource):
    """``format("sluice")``: read and write topics with the columns and options of Spark's Kafka source.

    With ``value.format``/``key.format`` (see ``schema_options``) those columns are typed through the
    cluster's Schema Registry: the reader schema is looked up when the DataFrame is planned.
    """

    @classmethod
    def name(cls) -> str:
        return "sluice"

    def _source(self, *, streaming: bool) -> SourceOptions:
        return parse_source_options(dict(self.options), streaming=streaming)

    def _typed_read(self) -> TypedRead | None:
        found: TypedRead | None = getattr(self, "_typed", None)
        if found is None:
            schema_options = _schema_options(dict(self.options))
            if schema_options is None:
                return None
            found = resolve_read(schema_options)
            self._typed = found
        return found

    def schema(self) -> StructType:
        headers = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        base = SCHEMA_WITH_HEADERS if headers else SCHEMA
        if not any(str(k).lower() in ("value.format", "key.format") for k in self.options):
            return base
        typed = self._typed_read()
        return base if typed is None else typed.spark_schema(base)

    def reader(self, schema: StructType) -> DataSourceReader:
        return SluiceReader(self._source(streaming=False), self._typed_read())

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return SluiceStreamReader(self._source(streaming=True), self._typed_read())

    def _typed_write(self, schema: StructType) -> TypedWrite | None:
        sink = parse_sink_options(dict(self.options))
        schema_options = parse_schema_options(dict(self.options), topic=sink.topic, sink=True)
        typed = frozenset() if schema_options is None else frozenset(
            s.side for s in (schema_options.key, schema_options.value) if s is not None)
        check_sink_columns(_sink_columns(schema), topic_option=sink.topic, typed=typed)
        if schema_options is None:
            return None
        return resolve_write(schema_options, {f.name: f.dataType for f in schema.fields})

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        if overwrite:  # reached when savemode.install() did not run (a session without register())
            check_mode("overwrite")
        return SluiceWriter(dict(self.options), self._typed_write(schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        return SluiceStreamWriter(dict(self.options), self._typed_write(schema))
