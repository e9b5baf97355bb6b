"""Batch reads through real Spark from a real broker: exactly the produced records, for every option."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from dataplane.client.spark.fetch import fetch_range
from dataplane.client.spark.options import DataLossError
from dataplane.client.spark.plan import OffsetRange
from tests.dataplane.client.spark.conftest import TS0, Rec, produce, rows

pytestmark = pytest.mark.xdist_group("spark")


def read(spark: Any, kafka: str, **options: Any) -> Any:
    reader = spark.read.format("sluice").option("kafka.bootstrap.servers", kafka)
    for name, value in options.items():
        reader = reader.option(name, value if isinstance(value, str) else json.dumps(value))
    return reader.load()


@pytest.fixture
def three(kafka: str, new_topic: Any) -> tuple[str, list[Rec]]:
    """30 records over 3 partitions: keys (some null), values, headers (some absent, one null value)."""
    topic = new_topic(3)
    records = [(i % 3, None if i % 7 == 0 else b"k%d" % (i % 5), b"value-%d" % i) for i in range(30)]
    headers = [[("h", b"%d" % i), ("n", None)] if i % 4 == 0 else [] for i in range(30)]
    return topic, produce(kafka, topic, records, headers=headers)


def test_every_column_of_every_record_across_partitions(spark: Any, kafka: str,
                                                        three: tuple[str, list[Rec]]) -> None:
    topic, written = three
    df = read(spark, kafka, subscribe=topic, includeHeaders="true")
    assert [f.name for f in df.schema.fields] == ["key", "value", "topic", "partition", "offset", "timestamp",
                                                  "timestampType", "headers"]
    assert [f.dataType.simpleString() for f in df.schema.fields] == [
        "binary", "binary", "string", "int", "bigint", "timestamp", "int", "array<struct<key:string,value:binary>>"]
    assert rows(df, headers=True) == [r.row(headers=True) for r in written]
    plain = read(spark, kafka, subscribe=topic)  # includeHeaders defaults to false: Spark's 7 columns
    assert len(plain.columns) == 7 and rows(plain) == [r.row() for r in written]


def test_subscribe_pattern_and_assign_select_partitions(spark: Any, kafka: str, new_topic: Any,
                                                        three: tuple[str, list[Rec]]) -> None:
    topic, written = three
    other = new_topic(1)
    more = produce(kafka, other, [(0, b"x", b"y")])
    both = read(spark, kafka, subscribePattern=f"({topic}|{other})")
    assert rows(both) == sorted([r.row() for r in written + more], key=lambda t: (t[2], t[3], t[4]))
    assert rows(read(spark, kafka, subscribe=f"{topic},{other}")) == rows(both)
    assigned = read(spark, kafka, assign={topic: [0, 2]})
    assert rows(assigned) == [r.row() for r in written if r.partition in (0, 2)]
    assert read(spark, kafka, subscribePattern="no-such-topic-.*").count() == 0


def test_starting_and_ending_offsets(spark: Any, kafka: str, three: tuple[str, list[Rec]]) -> None:
    topic, written = three
    start, end = {topic: {"0": 3, "1": -2, "2": 9}}, {topic: {"0": 7, "1": 4, "2": -1}}
    df = read(spark, kafka, subscribe=topic, startingOffsets=start, endingOffsets=end)
    want = [r for r in written if (r.partition == 0 and 3 <= r.offset < 7) or (r.partition == 1 and r.offset < 4)
            or (r.partition == 2 and r.offset >= 9)]
    assert rows(df) == [r.row() for r in want] and len(want) == 4 + 4 + 1
    assert rows(read(spark, kafka, subscribe=topic, startingOffsets="earliest", endingOffsets="latest")) == \
        [r.row() for r in written]
    assert read(spark, kafka, subscribe=topic, endingOffsets={topic: {"0": 0, "1": 0, "2": 0}}).count() == 0


def test_timestamps_choose_offsets(spark: Any, kafka: str, three: tuple[str, list[Rec]]) -> None:
    topic, written = three
    ts = TS0 + 12_000  # records 12.. (timestamps are TS0 + i s)
    df = read(spark, kafka, subscribe=topic, startingTimestamp=str(ts), endingTimestamp=str(TS0 + 21_000))
    assert rows(df) == [r.row() for r in written if ts <= r.timestamp < TS0 + 21_000]
    by_partition = read(spark, kafka, subscribe=topic, startingOffsetsByTimestamp={topic: {"1": TS0 + 25_000}},
                        startingOffsets="earliest")
    assert rows(by_partition) == [r.row() for r in written if r.partition != 1 or r.timestamp >= TS0 + 25_000]
    # Spark's precedence: the timestamp wins over startingOffsets.
    both = read(spark, kafka, subscribe=topic, startingTimestamp=str(ts), startingOffsets={topic: {"0": 0}})
    assert both.count() == sum(r.timestamp >= ts for r in written)
    late = TS0 + 10**9
    assert read(spark, kafka, subscribe=topic, startingTimestamp=str(late),
                startingOffsetsByTimestampStrategy="latest").count() == 0
    with pytest.raises(Exception, match="has a timestamp at or after"):
        read(spark, kafka, subscribe=topic, startingTimestamp=str(late)).count()


def test_min_partitions_split_ranges_and_still_read_each_record_once(spark: Any, kafka: str,
                                                                      new_topic: Any) -> None:
    topic = new_topic(2)
    written = produce(kafka, topic, [(0 if i < 900 else 1, b"k", b"%d" % i) for i in range(1000)])
    df = read(spark, kafka, subscribe=topic, minPartitions="8")
    assert df.rdd.getNumPartitions() == 8  # 900 -> 7.2 -> 7 parts, 100 -> 0.8 -> 1 (rounded half up), as Spark
    assert rows(df) == [r.row() for r in written]
    capped = read(spark, kafka, subscribe=topic, maxRecordsPerPartition="100")
    assert capped.rdd.getNumPartitions() == 10 and capped.count() == 1000
    per_task = capped.rdd.glom().map(len).collect()
    assert sorted(per_task) == [100] * 10


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches(spark: Any, kafka: str, new_topic: Any, codec: str) -> None:
    topic = new_topic(1)
    written = produce(kafka, topic, [(0, b"k%d" % (i % 3), b"v" * (i % 50) + b"%d" % i) for i in range(500)],
                      **{"compression.type": codec, "linger.ms": 50, "batch.num.messages": 64})
    # Splits start and end inside compressed batches: each task skips what precedes its start.
    df = read(spark, kafka, subscribe=topic, minPartitions="7")
    assert df.rdd.getNumPartitions() == 7
    assert rows(df) == [r.row() for r in written]


def _compacted(kafka: str, topic: str) -> list[Rec]:
    """What a plain consumer sees of ``topic`` once the cleaner has removed superseded keys."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    admin = AdminClient({"bootstrap.servers": kafka})
    resource = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("min.cleanable.dirty.ratio", "0.01", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)  # a config change wakes the cleaner
    deadline = time.monotonic() + 60
    previous: list[Rec] = []
    while True:
        consumer = Consumer({"bootstrap.servers": kafka, "group.id": "check", "enable.partition.eof": True})
        consumer.assign([TopicPartition(topic, 0, 0)])
        seen: list[Rec] = []
        while True:
            m = consumer.poll(10)
            assert m is not None
            if m.error():
                break
            seen.append(Rec(topic, 0, m.offset(), m.key(), m.value(), m.timestamp()[1], ()))
        consumer.close()
        # Compacted, and settled: the cleaner may swap segment groups one at a time, so the same view twice.
        if len(seen) < seen[-1].offset + 1 and seen == previous:
            return seen
        previous = seen
        assert time.monotonic() < deadline, "the cleaner never compacted the topic"
        time.sleep(0.2)  # polling for the cleaner's pass (a condition), not a fixed wait


def test_compacted_topic_gaps_and_an_end_inside_a_gap(spark: Any, kafka: str, new_topic: Any) -> None:
    # No cleaning while the records go in (a pass then, and another after, made the view move under the test):
    # one pass once _compacted lowers the ratio.
    topic = new_topic(1, **{"cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.99"})
    produce(kafka, topic, [(0, b"k%d" % (i % 10), b"v%03d" % i) for i in range(300)], **{"batch.num.messages": 5})
    seen = _compacted(kafka, topic)
    assert rows(read(spark, kafka, subscribe=topic, minPartitions="11")) == [r.row() for r in seen]
    present = {r.offset for r in seen}
    gap = next(o for o in range(seen[-1].offset) if o not in present and o - 1 not in present)
    df = read(spark, kafka, subscribe=topic, endingOffsets={topic: {"0": gap}}, minPartitions="3")
    assert rows(df) == [r.row() for r in seen if r.offset < gap]


def test_deleted_records_start(spark: Any, kafka: str, new_topic: Any) -> None:
    topic = new_topic(1)
    written = produce(kafka, topic, [(0, None, b"%d" % i) for i in range(100)])
    _delete(kafka, topic, 40)
    kept = [r.row() for r in written if r.offset >= 40]
    assert rows(read(spark, kafka, subscribe=topic)) == kept  # earliest is the new log start
    start = {topic: {"0": 10}}
    with pytest.raises(Exception, match=r"offset 10 of .* was deleted"):
        read(spark, kafka, subscribe=topic, startingOffsets=start).count()
    assert rows(read(spark, kafka, subscribe=topic, startingOffsets=start, failOnDataLoss="false")) == kept
    # The same, decided in the task: a range planned before the records went.
    planned = OffsetRange(topic, 0, 10, 60)
    with pytest.raises(DataLossError, match="no longer available"):
        list(fetch_range({"bootstrap.servers": kafka}, planned))
    batches = list(fetch_range({"bootstrap.servers": kafka}, planned, fail_on_data_loss=False))
    assert [o for b in batches for o in b.column("offset").to_pylist()] == list(range(40, 60))


def _delete(kafka: str, topic: str, before: int) -> None:
    from dataplane.client.admin import ClusterAdmin

    with ClusterAdmin(kafka) as admin:
        assert admin.delete_records({(topic, 0): before}) == {(topic, 0): before}


def test_a_job_written_for_sparks_kafka_source_runs_unchanged(spark: Any, kafka: str,
                                                              three: tuple[str, list[Rec]]) -> None:
    topic, written = three
    df = (spark.read.format("sluice").option("kafka.bootstrap.servers", kafka).option("subscribe", topic)
          .option("startingOffsets", "earliest").load())
    values = df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)").collect()
    assert sorted(v["value"] for v in values) == sorted(r.value.decode() for r in written if r.value)
    counts = {r["key"]: r["count"] for r in df.selectExpr("CAST(key AS STRING) AS key").groupBy("key").count()
              .collect()}
    want: dict[str | None, int] = {}
    for r in written:
        k = r.key.decode() if r.key else None
        want[k] = want.get(k, 0) + 1
    assert counts == want
    df.createOrReplaceTempView("events")
    latest = spark.sql("SELECT partition, max(offset) AS last, count(*) AS n FROM events GROUP BY partition "
                       "ORDER BY partition").collect()
    assert [(r["partition"], r["last"], r["n"]) for r in latest] == [(0, 9, 10), (1, 9, 10), (2, 9, 10)]


@pytest.mark.parametrize(("options", "message"), [
    ({"subscribe": "no-such-topic"}, "unknown topic 'no-such-topic'"),
    ({"assign": "{\"t\": [0"}, "option 'assign' is not valid JSON"),
    ({"subscribe": "x", "startingOffsets": "{\"x\": {\"0\": }}"}, "option 'startingOffsets' is not valid JSON"),
    ({"subscribe": "x", "assign": "{\"x\": [0]}"}, "exactly one of 'assign', 'subscribe', 'subscribePattern'"),
    ({"subscribe": "x", "startingOffsets": "latest"}, r"latest .* not allowed for batch"),
    ({"subscribe": "x", "kafka.bootstrap.servers": ""}, r"'kafka.bootstrap.servers' .* is required"),
])
def test_bad_input_is_one_clear_error(spark: Any, kafka: str, options: dict[str, str], message: str) -> None:
    reader = spark.read.format("sluice").option("kafka.bootstrap.servers", kafka)
    for name, value in options.items():
        reader = reader.option(name, value)
    with pytest.raises(Exception, match=message) as caught:
        reader.load().count()
    assert "SparkSourceError" in str(caught.value)


def test_internal_topics_are_read_when_named_and_skipped_by_patterns(spark: Any, kafka: str, new_topic: Any) -> None:
    """``__consumer_offsets`` named by ``assign`` is read (as Kafka's consumer reads it) and its commits decode
    with ``offset_commit``; a pattern that matches it skips it (exclude.internal.topics)."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient
    from pyspark.sql.functions import udf

    from dataplane.client.spark.records import OFFSET_COMMIT, offset_commit
    from dataplane.coordinator.records import partition_for_group

    topic = new_topic(1)
    group = f"g-{topic}"
    consumer = Consumer({"bootstrap.servers": kafka, "group.id": group})
    consumer.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)
    consumer.close()
    admin = AdminClient({"bootstrap.servers": kafka})
    count = len(admin.list_topics(timeout=30).topics["__consumer_offsets"].partitions)
    log = read(spark, kafka, assign={"__consumer_offsets": [partition_for_group(group, count)]})
    decode = udf(offset_commit, OFFSET_COMMIT, useArrow=False)
    decoded = log.select(decode("key", "value").alias("c")).where("c IS NOT NULL") \
        .where(f"c.`group` = '{group}'").select("c.topic", "c.partition", "c.offset").collect()
    assert [tuple(r) for r in decoded] == [(topic, 0, 7)]
    assert read(spark, kafka, subscribePattern="__consumer_off.*").count() == 0


def test_read_committed_by_default_skips_aborted_transactions(spark: Any, kafka: str, new_topic: Any) -> None:
    """The source's default isolation, read_committed (librdkafka's), really skips aborted data; read_uncommitted
    reads it; neither shows the transaction markers."""
    from confluent_kafka import Producer

    topic = new_topic(2)
    producer = Producer({"bootstrap.servers": kafka, "transactional.id": f"spark-{topic}", "linger.ms": 1})
    producer.init_transactions(30)
    for n, commit in enumerate([True, False, True, False, True]):
        producer.begin_transaction()
        for i in range(6):
            producer.produce(topic, key=b"t%d" % n, value=b"%d-%d" % (n, i), partition=i % 2)
        producer.flush(30)  # in the log, aborted or not
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)

    def values(df: Any) -> list[bytes]:
        return sorted(bytes(r["value"]) for r in df.select("value").collect())

    committed = sorted(b"%d-%d" % (n, i) for n in (0, 2, 4) for i in range(6))
    assert values(read(spark, kafka, subscribe=topic, minPartitions="3")) == committed
    everything = sorted(b"%d-%d" % (n, i) for n in range(5) for i in range(6))
    assert values(read(spark, kafka, subscribe=topic, **{"kafka.isolation.level": "read_uncommitted"})) == everything
