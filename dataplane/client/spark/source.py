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
    DataLossError,
    SourceOptions,
    TopicPartition,
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


def _read(options: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition.value, OffsetRange):  # no ranges: Spark runs one task with an empty partition
        return
    yield from fetch_range(options.client, partition.value, include_headers=options.include_headers,
                           fail_on_data_loss=options.fail_on_data_loss, poll_timeout_ms=options.poll_timeout_ms,
                           engine=options.engine)


def _tasks(options: SourceOptions, ranges: Sequence[OffsetRange]) -> list[InputPartition]:
    split = split_ranges(ranges, min_partitions=options.min_partitions,
                         max_records=options.max_records_per_partition)
    return [RangePartition(r) for r in split]


class SluiceReader(DataSourceReader):
    """A batch query: ranges fixed at planning (``startingOffsets`` to ``endingOffsets``), split into tasks."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        lookup = OffsetLookup(self.options)
        try:
            return _tasks(self.options, lookup.batch_ranges())
        finally:
            lookup.close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)


class SluiceStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A streaming query: offsets are Spark's Kafka checkpoint JSON ``{"topic": {"0": 42}}``.

    Partitions that appear later (new topics matching ``subscribePattern``, added partitions) are read
    from their earliest offset. ``maxOffsetsPerTrigger`` is Spark's ``ReadMaxRows`` admission control.
    """

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
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
        return _read(self.options, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: offsets live in Spark's checkpoint, never in a consumer group."""

    def stop(self) -> None:
        if self._lookup is not None:
            self._lookup.close()
            self._lookup = None


def _sink_columns(schema: StructType) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in schema.fields}


class SluiceWriter(DataSourceArrowWriter):
    """``df.write.format("sluice")``: each task produces its rows and reports how many were acknowledged."""

    def __init__(self, options: dict[str, str]) -> None:
        self.sink = parse_sink_options(options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return Produced(produce_batches(self.sink.client, iterator, topic=self.sink.topic))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Every task flushed before reporting: the records are written, nothing is left to make visible."""


class SluiceStreamWriter(DataSourceStreamArrowWriter):
    """The streaming sink: at least once, as Spark's Kafka sink (a retried micro-batch is produced again)."""

    def __init__(self, options: dict[str, str]) -> None:
        self.sink = parse_sink_options(options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return Produced(produce_batches(self.sink.client, iterator, topic=self.sink.topic))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """As ``SluiceWriter.commit``."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records already acknowledged stay written (Kafka's sink cannot take them back either)."""


class SluiceDataSource(DataSource):
    """``format("sluice")``: read and write topics with the columns and options of Spark's Kafka source."""

    @classmethod
    def name(cls) -> str:
        return "sluice"

    def _source(self, *, streaming: bool) -> SourceOptions:
        return parse_source_options(dict(self.options), streaming=streaming)

    def schema(self) -> StructType:
        headers = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        return SCHEMA_WITH_HEADERS if headers else SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return SluiceReader(self._source(streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return SluiceStreamReader(self._source(streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        if overwrite:  # reached when savemode.install() did not run (a session without register())
            check_mode("overwrite")
        sink = parse_sink_options(dict(self.options))
        check_sink_columns(_sink_columns(schema), topic_option=sink.topic)
        return SluiceWriter(dict(self.options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        sink = parse_sink_options(dict(self.options))
        check_sink_columns(_sink_columns(schema), topic_option=sink.topic)
        return SluiceStreamWriter(dict(self.options))
