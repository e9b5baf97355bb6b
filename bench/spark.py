"""Spark benchmark: a count-by-key over 100 B records through the ``sluice`` data source, against a plain
confluent-kafka consumer loop counting the same records by key, in the same run.

    python bench/spark.py              # 5,000,000 records per topic, topics of 1, 4 and 8 partitions
    python bench/spark.py --quick      # 500,000 records per topic
    python bench/spark.py --records 2000000 --partitions 4

Starts a `sluice broker` (metadata in an embedded Postgres unless DATABASE_URL is set), produces the
records (100 B values, 1,000 distinct keys) into one topic per partition count, then for each topic:

* the baseline: one confluent-kafka Consumer assigned every partition from offset 0, ``consume()`` in
  batches, counting values per key in a dict until it has seen every record;
* Spark: ``spark.read.format("sluice")…load().groupBy("key").count().collect()`` on ``local[*]``
  (the machine's cores), default planning (one task per partition); for the 1-partition topic also
  ``minPartitions`` = cores, which splits the one offset range.

Both read from the page cache (the records were just written, and the baseline reads first) and both
are checked to have counted every record. Spark's start-up (JVM, session, first query) is reported
separately and not counted in the scan. Every process started here is killed by its pid on exit.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path
from types import FrameType

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, Broker, Procs, metadata_database, ok, ratio
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from dataplane.client.spark.fetch import consumer_config

KEYS = 1000
VALUE = 100
GOAL = 1.0  # Spark scan >= this x the plain consumer loop


def produce(bootstrap: str, topic: str, partitions: int, n: int) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 1_000_000, "acks": 1})
    keys = [b"key-%04d" % i for i in range(KEYS)]
    value = os.urandom(VALUE // 2).hex().encode()
    started = time.perf_counter()
    for i in range(n):
        while True:
            try:
                producer.produce(topic, value=value, key=keys[i % KEYS], partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0
    return n / (time.perf_counter() - started)


def consumer_loop(bootstrap: str, topic: str, partitions: int, n: int) -> tuple[float, dict[bytes, int]]:
    # The data source's own client settings (dataplane.client.spark.fetch), so both read alike.
    consumer = Consumer(consumer_config({"bootstrap.servers": bootstrap}))
    counts: dict[bytes, int] = {}
    seen = 0
    started = time.perf_counter()
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    while seen < n:
        # No more than what is left: consume() waits for a full batch (or its timeout) before returning.
        for m in consumer.consume(num_messages=min(10_000, n - seen), timeout=1.0):
            if m.error() is None:
                key = m.key()
                counts[key] = counts.get(key, 0) + 1
                seen += 1
    seconds = time.perf_counter() - started
    consumer.close()
    return seconds, counts


def spark_scan(spark: object, bootstrap: str, topic: str, min_partitions: int | None,
               engine: str = "native") -> tuple[float, dict[bytes, int]]:
    reader = spark.read.format("sluice").option("kafka.bootstrap.servers", bootstrap)  # type: ignore[attr-defined]
    reader = reader.option("subscribe", topic).option("startingOffsets", "earliest").option("fetch.engine", engine)
    if min_partitions:
        reader = reader.option("minPartitions", str(min_partitions))
    started = time.perf_counter()
    found = reader.load().groupBy("key").count().collect()
    seconds = time.perf_counter() - started
    return seconds, {bytes(r["key"]): r["count"] for r in found}


def ceiling_source() -> type:
    """A data source whose tasks yield the same Arrow batches built in memory (no broker, no client): what
    Spark itself costs for the query, the most any data source could reach here. Defined in a function so
    cloudpickle ships it by value to the Python workers."""
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from dataplane.client.spark.fetch import ARROW_SCHEMA
    from dataplane.client.spark.source import SCHEMA

    class Reader(DataSourceReader):
        def __init__(self, n: int, tasks: int) -> None:
            self.n, self.tasks = n, tasks

        def partitions(self) -> list[InputPartition]:
            return [InputPartition(i) for i in range(self.tasks)]

        def read(self, partition: InputPartition):  # type: ignore[no-untyped-def]
            rows = 10_000
            batch = pa.RecordBatch.from_arrays([
                pa.array([b"key-%04d" % (i % KEYS) for i in range(rows)], pa.binary()),
                pa.array([b"x" * VALUE] * rows, pa.binary()), pa.array(["t"] * rows, pa.string()),
                pa.array([partition.value] * rows, pa.int32()), pa.array(range(rows), pa.int64()),
                pa.array([1_700_000_000_000_000] * rows, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
                pa.array([0] * rows, pa.int32())], schema=ARROW_SCHEMA)
            for _ in range(self.n // self.tasks // rows):
                yield batch

    class Ceiling(DataSource):
        @classmethod
        def name(cls) -> str:
            return "sluice_bench_ceiling"

        def schema(self) -> object:
            return SCHEMA

        def reader(self, schema: object) -> Reader:
            return Reader(int(self.options["n"]), int(self.options["tasks"]))

    return Ceiling


def timed_collect(df: object) -> float:
    started = time.perf_counter()
    df.groupBy("key").count().collect()  # type: ignore[attr-defined]
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=None, help="records per topic (default 5,000,000; quick 500,000)")
    ap.add_argument("--partitions", type=int, nargs="*", default=[1, 4, 8], help="topics' partition counts")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=None, help="rounds per case, best kept (default 2; quick 1)")
    args = ap.parse_args()
    n = args.records or (500_000 if args.quick else 5_000_000)
    rounds = args.rounds or (1 if args.quick else 2)
    cores = os.cpu_count() or 1

    root = Path(tempfile.mkdtemp(prefix="sluice-bench-spark-"))
    procs = Procs()
    stack = contextlib.ExitStack()

    def on_term(_sig: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    try:
        metadata_url = stack.enter_context(metadata_database(root))
        broker = Broker(procs, root / "data", metadata_url, f"bench-{uuid.uuid4().hex[:12]}", 1, [])
        failed = broker.start()
        if failed is not None:
            raise SystemExit(f"broker did not start:\n{failed}")
        print(f"broker pid {broker.pid} at {broker.bootstrap}; {n:,} records of {VALUE} B per topic, {KEYS} keys; "
              f"{cores} cores")
        topics = {}
        for parts in args.partitions:
            topic = f"bench-{parts}p"
            rate = produce(broker.bootstrap, topic, parts, n)
            topics[parts] = topic
            print(f"produced {topic}: {rate:,.0f} records/s")

        started = time.perf_counter()
        from dataplane.client.spark.session import spark_session, stop_spark

        spark = spark_session(master=f"local[{cores}]")
        session_s = time.perf_counter() - started
        first = time.perf_counter()
        spark.range(1).count()  # the first job starts the executor's Python side
        print(f"spark start-up: session {session_s:.1f} s, first job {time.perf_counter() - first:.1f} s "
              f"({spark.version}, local[{cores}])")
        warm = time.perf_counter()  # Python workers start and import pyarrow/confluent-kafka on the first scan
        spark_scan(spark, broker.bootstrap, topics[max(args.partitions)], cores)
        print(f"first scan (warm-up, not counted): {time.perf_counter() - warm:.1f} s")

        spark.dataSource.register(ceiling_source())
        ceiling = spark.read.format("sluice_bench_ceiling").option("n", str(n)).option("tasks", str(cores)).load()
        ceiling.groupBy("key").count().collect()  # warm-up
        best = min(timed_collect(ceiling) for _ in range(rounds))
        print(f"spark ceiling (same query over in-memory Arrow batches, {cores} tasks): {n / best:,.0f} records/s")

        spark_scan(spark, broker.bootstrap, topics[max(args.partitions)], cores, "librdkafka")  # its warm-up too
        print("\nspark scan: the native engine (default); librdkafka: the same query with fetch.engine=librdkafka")
        print(f"{'case':<34}{'consumer loop':>16}{'spark scan':>16}{'ratio':>8}  goal{'librdkafka':>16}{'ratio':>8}")
        results = []
        for parts in args.partitions:
            cases: list[tuple[str, int | None]] = [(f"{parts} partition(s)", None)]
            if parts < cores:
                cases.append((f"{parts} partition(s), minPartitions={cores}", cores))
            for label, min_parts in cases:
                best_loop = best_spark = best_old = float("inf")
                for _ in range(rounds):
                    loop_s, loop_counts = consumer_loop(broker.bootstrap, topics[parts], parts, n)
                    spark_s, spark_counts = spark_scan(spark, broker.bootstrap, topics[parts], min_parts)
                    old_s, old_counts = spark_scan(spark, broker.bootstrap, topics[parts], min_parts, "librdkafka")
                    assert sum(loop_counts.values()) == n and loop_counts == spark_counts == old_counts, "counts differ"
                    best_loop, best_spark = min(best_loop, loop_s), min(best_spark, spark_s)
                    best_old = min(best_old, old_s)
                r = ratio(n / best_spark, n / best_loop)
                results.append(r)
                old = ratio(n / best_old, n / best_loop)
                print(f"{label:<34}{n / best_loop:>12,.0f} r/s{n / best_spark:>12,.0f} r/s{r:>8.2f}  "
                      f">={GOAL:.0f} {ok(r >= GOAL)}{n / best_old:>12,.0f} r/s{old:>8.2f}")
        stop_spark()
    finally:
        procs.stop_all()
        stack.close()
        import shutil

        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    main()
