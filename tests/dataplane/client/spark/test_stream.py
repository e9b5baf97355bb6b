"""Structured Streaming through the sluice source (each record once across restarts), and the writer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.dataplane.client.spark.conftest import Rec, produce, rows

pytestmark = pytest.mark.xdist_group("spark")


def stream(spark: Any, kafka: str, topic: str, **options: str) -> Any:
    reader = spark.readStream.format("sluice").option("kafka.bootstrap.servers", kafka).option("subscribe", topic)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def to_parquet(df: Any, out: Path, checkpoint: Path) -> Any:
    return (df.selectExpr("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")
            .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(checkpoint)))


def written(spark: Any, out: Path) -> list[tuple[Any, ...]]:
    return rows(spark.read.parquet(str(out)))


def test_available_now_reads_each_record_once_across_restarts(spark: Any, kafka: str, new_topic: Any,
                                                              tmp_path: Path) -> None:
    topic = new_topic(2)
    first = produce(kafka, topic, [(i % 2, b"k%d" % i, b"a%d" % i) for i in range(40)])
    source = stream(spark, kafka, topic, startingOffsets="earliest", maxOffsetsPerTrigger="15")
    query = to_parquet(source, tmp_path / "out", tmp_path / "cp").trigger(availableNow=True).start()
    query.awaitTermination()
    assert query.exception() is None
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [15, 15, 10]  # maxOffsetsPerTrigger is Spark's admission control
    assert written(spark, tmp_path / "out") == [r.row() for r in first]
    second = produce(kafka, topic, [(i % 2, b"k%d" % i, b"b%d" % i) for i in range(25)], ts0=1_800_000_000_000)
    again = to_parquet(stream(spark, kafka, topic, startingOffsets="earliest"), tmp_path / "out",
                       tmp_path / "cp").trigger(availableNow=True).start()
    again.awaitTermination()
    assert sum(p["numInputRows"] for p in again.recentProgress) == 25
    assert written(spark, tmp_path / "out") == sorted([r.row() for r in first + second],
                                                      key=lambda t: (t[3], t[4]))


def test_processing_time_trigger_restarts_from_its_checkpoint(spark: Any, kafka: str, new_topic: Any,
                                                              tmp_path: Path) -> None:
    topic = new_topic(3)
    before = produce(kafka, topic, [(i % 3, None, b"old%d" % i) for i in range(12)])  # before the query: skipped
    query = to_parquet(stream(spark, kafka, topic), tmp_path / "out", tmp_path / "cp") \
        .trigger(processingTime="200 milliseconds").start()
    try:
        query.processAllAvailable()  # the initial offsets (latest) are fixed
        first = produce(kafka, topic, [(i % 3, b"x", b"new%d" % i) for i in range(30)])
        query.processAllAvailable()
    finally:
        query.stop()
    assert written(spark, tmp_path / "out") == [r.row() for r in first]
    second = produce(kafka, topic, [(i % 3, b"y", b"more%d" % i) for i in range(21)], ts0=1_800_000_000_000)
    query = to_parquet(stream(spark, kafka, topic), tmp_path / "out", tmp_path / "cp") \
        .trigger(processingTime="200 milliseconds").start()
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    got = written(spark, tmp_path / "out")
    assert got == sorted([r.row() for r in first + second], key=lambda t: (t[3], t[4]))
    assert not {r.offset for r in before} & {t[4] for t in got if t[3] == 0 and t[1].startswith(b"old")}


def test_batch_writer_round_trips(spark: Any, kafka: str, new_topic: Any) -> None:
    topic = new_topic(3)
    data = [(f"k{i}", f"v{i}".encode(), i % 3, [("h", f"{i}".encode())] if i % 2 else None) for i in range(50)]
    df = spark.createDataFrame(data, "key string, value binary, partition int, "
                                     "headers array<struct<key:string,value:binary>>")
    # No .mode(): Spark's Kafka sink's default (ErrorIfExists) produces the rows, as Append does.
    df.write.format("sluice").option("kafka.bootstrap.servers", kafka).option("topic", topic).save()
    back = (spark.read.format("sluice").option("kafka.bootstrap.servers", kafka).option("subscribe", topic)
            .option("includeHeaders", "true").load())
    got = {(bytes(r["key"]).decode(), bytes(r["value"]), r["partition"],
            tuple((h["key"], bytes(h["value"])) for h in r["headers"]) if r["headers"] else None)
           for r in back.collect()}
    assert got == {(k, v, p, tuple(h) if h else None) for k, v, p, h in data} and back.count() == 50
    # The topic column, when no option overrides it; a value column is required.
    other = new_topic(1)
    spark.createDataFrame([(other, "only")], "topic string, value string").write.format("sluice").mode("append") \
        .option("kafka.bootstrap.servers", kafka).save()
    assert [bytes(r["value"]) for r in spark.read.format("sluice").option("kafka.bootstrap.servers", kafka)
            .option("subscribe", other).load().collect()] == [b"only"]
    # save(format=..., mode=...) and mode("errorifexists") as well; Overwrite and Ignore are refused, as Kafka's.
    spark.createDataFrame([(other, "two")], "topic string, value string").write.mode("errorifexists") \
        .option("kafka.bootstrap.servers", kafka).save(format="sluice")
    for refused in ("overwrite", "ignore"):
        with pytest.raises(Exception, match=f"Save mode {refused} not allowed for Kafka"):
            spark.createDataFrame([(other, "x")], "topic string, value string").write.format("sluice") \
                .mode(refused).option("kafka.bootstrap.servers", kafka).save()
    assert sorted(bytes(r["value"]) for r in spark.read.format("sluice").option("kafka.bootstrap.servers", kafka)
                  .option("subscribe", other).load().collect()) == [b"only", b"two"]
    with pytest.raises(Exception, match="needs a 'value' column"):
        spark.createDataFrame([("k",)], "key string").write.format("sluice").mode("append") \
            .option("kafka.bootstrap.servers", kafka).option("topic", topic).save()


def test_streaming_sink_round_trips(spark: Any, kafka: str, new_topic: Any, tmp_path: Path) -> None:
    source, sink = new_topic(2), new_topic(1)
    sent: list[Rec] = produce(kafka, source, [(i % 2, b"k%d" % i, b"%d" % i) for i in range(30)])
    query = (stream(spark, kafka, source, startingOffsets="earliest")
             .selectExpr("key", "CAST(CAST(CAST(value AS STRING) AS INT) * 2 AS STRING) AS value")
             .writeStream.format("sluice").option("kafka.bootstrap.servers", kafka).option("topic", sink)
             .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
    query.awaitTermination()
    assert query.exception() is None
    back = spark.read.format("sluice").option("kafka.bootstrap.servers", kafka).option("subscribe", sink).load()
    assert sorted((bytes(r["key"]), int(bytes(r["value"]))) for r in back.collect()) == \
        sorted((r.key, 2 * int(r.value or b"0")) for r in sent)


def test_a_topic_created_later_is_read_from_its_earliest_offset(spark: Any, kafka: str, new_topic: Any,
                                                                 tmp_path: Path) -> None:
    first = new_topic(1)  # t-<random hex>: the pattern matches this test's topics only
    a = produce(kafka, first, [(0, None, b"a%d" % i) for i in range(5)])

    def run() -> None:
        source = (spark.readStream.format("sluice").option("kafka.bootstrap.servers", kafka)
                  .option("subscribePattern", f"{first}|{first}-later").option("startingOffsets", "earliest").load())
        to_parquet(source, tmp_path / "out", tmp_path / "cp").trigger(availableNow=True).start().awaitTermination()

    run()
    later = f"{first}-later"
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka})
    admin.create_topics([NewTopic(later, 2, 1)])[later].result(30)
    b = produce(kafka, later, [(i % 2, None, b"b%d" % i) for i in range(6)])
    run()
    assert written(spark, tmp_path / "out") == sorted([r.row() for r in a + b],
                                                                 key=lambda t: (t[2], t[3], t[4]))
