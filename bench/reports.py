"""Reports benchmark: the sandboxed runner's start-up, its first report, and warm small reports, against a
plain confluent-kafka consumer loop over the same records, in the same run.

    python bench/reports.py              # 200,000 records, 5 warm runs
    python bench/reports.py --records 50000 --runs 3

Starts a `sluice broker` (metadata in an embedded Postgres unless DATABASE_URL is set), produces the records
(100 B values, 1,000 keys, 4 partitions), then:

* the baseline: one Consumer assigned every partition from offset 0, counting values per key;
* the runner: ``Sandbox`` exactly as a reports worker starts it (namespaces, read-only filesystem, no
  capabilities), timed from ``start()`` to its "ready"; then the first report (a count by key through the
  ``sluice`` source, as a ``sql`` report runs it: pinning, views, the runner's SQL check, Parquet result),
  then ``--runs`` more of it, warm. Each run's time is what a worker waits for ``Sandbox.run``.

Goals (issue 26): first run after start-up <= 15 s, a warm small report (200,000 records) <= 3 s. Every process
started here is stopped by its pid on exit.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, Broker, Procs, metadata_database, ok, ratio
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

sys.path.insert(0, str(ROOT))

KEYS = 1000
PARTITIONS = 4
FIRST_GOAL = 15.0
WARM_GOAL = 3.0


def produce(bootstrap: str, topic: str, n: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 1_000_000})
    keys = [b"key-%04d" % i for i in range(KEYS)]
    for i in range(n):
        while True:
            try:
                producer.produce(topic, value=b"v" * 100, key=keys[i % KEYS], partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(120) == 0


def consumer_loop(bootstrap: str, topic: str, n: int) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex}",
                         "enable.auto.commit": False})
    started = time.perf_counter()
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    counts: dict[bytes | None, int] = {}
    seen = 0
    while seen < n:
        for message in consumer.consume(10_000, timeout=1.0):
            if message.error():
                continue
            counts[message.key()] = counts.get(message.key(), 0) + 1
            seen += 1
    elapsed = time.perf_counter() - started
    consumer.close()
    assert sum(counts.values()) == n
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    from controlplane.reports.sandbox.launcher import Sandbox

    root = Path(tempfile.mkdtemp(prefix="sluice-bench-reports-"))
    procs = Procs()
    with contextlib.ExitStack() as stack:
        stack.callback(procs.stop_all)
        metadata_url = stack.enter_context(metadata_database(root))
        broker = Broker(procs, root / "data", metadata_url, f"bench-{uuid.uuid4().hex[:12]}", 1, [])
        failed = broker.start()
        if failed:
            print(failed)
            return 1
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        produce(broker.bootstrap, topic, args.records)
        baseline = consumer_loop(broker.bootstrap, topic, args.records)

        hidden = root / "var"
        hidden.mkdir()
        box = Sandbox([str(hidden)])
        stack.callback(box.stop)
        started = time.perf_counter()
        box.start()
        startup = time.perf_counter() - started
        view = topic.replace("-", "_")
        request = {"definition": {"kind": "sql", "params": {
            "topics": [topic], "sql": f"SELECT key_str, count(*) AS n FROM {view} GROUP BY key_str"}},
            "connection": {"kafka.bootstrap.servers": broker.bootstrap}, "time_range": [None, None],
            "limits": {"run_seconds": 600, "rows": 1_000_000, "bytes": 1 << 30}}

        def run() -> float:
            run_id = uuid.uuid4().hex
            began = time.perf_counter()
            reply = box.run({**request, "run": run_id}, out=root / "results" / run_id, cancelled=lambda: False,
                            on_progress=lambda _: None)
            took = time.perf_counter() - began
            assert reply.ok and reply.scanned == args.records, reply
            return took

        first = run()
        warm = [run() for _ in range(args.runs)]
    median = statistics.median(warm)
    print(f"records {args.records:,}, {PARTITIONS} partitions; consumer loop {baseline:.2f} s "
          f"({args.records / baseline:,.0f} r/s)")
    print(f"{'measure':<40}{'seconds':>10}  goal")
    print(f"{'runner start-up (JVM, session, warm-up)':<40}{startup:>10.2f}")
    print(f"{'first report after start-up':<40}{first:>10.2f}  <= {FIRST_GOAL:g} {ok(first <= FIRST_GOAL)}")
    print(f"{'warm report, median of ' + str(args.runs):<40}{median:>10.2f}  <= {WARM_GOAL:g} "
          f"{ok(median <= WARM_GOAL)}   (runs: {', '.join(f'{w:.2f}' for w in warm)})")
    print(f"{'warm report / consumer loop':<40}{ratio(median, baseline):>10.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
