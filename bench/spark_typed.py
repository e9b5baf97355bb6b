"""Spark benchmark: reading Avro-typed values (``value.format=avro``) against the plain binary read, same run.

    python bench/spark_typed.py              # 1,000,000 records, 2 partitions
    python bench/spark_typed.py --records 200000

Starts a `sluice broker` (metadata in an embedded Postgres unless DATABASE_URL is set) and, in this process,
a stand-in registry: a stdlib HTTP server answering the two reads the Spark client makes
(``/subjects/<s>/versions/latest`` and ``/schemas/ids/<id>``). The client calls it once per schema id and
Python worker, so its speed does not enter the figures; the full registry needs ``sluice up`` (tests do that).
Produces framed Avro records (a 6-field ``Order``: long, string, double, array<string>, enum,
timestamp-millis; ~60 B) and times, best of ``--rounds``:

* binary: ``load().agg(sum(length(value)))`` (the untyped source);
* avro: ``load().agg(sum(value.amount), count(value.sku))`` with ``value.format=avro`` (every record decoded).

Spark's start-up and a warm-up scan of each kind are not counted. Every process started here is killed by pid.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, Broker, Procs, metadata_database
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from dataplane.schemas import parse_avro
from dataplane.schemas.native import avro_encode_native
from dataplane.schemas.wire import frame

ORDER = {"type": "record", "name": "Order", "namespace": "bench", "fields": [
    {"name": "id", "type": "long"}, {"name": "sku", "type": "string"}, {"name": "amount", "type": "double"},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID", "SHIPPED"]}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}
SCHEMA_ID = 1


def registry(topic: str) -> tuple[ThreadingHTTPServer, str]:
    text = json.dumps(ORDER)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == f"/schemas/ids/{SCHEMA_ID}":
                body: dict[str, Any] = {"schema": text}
            elif self.path == f"/subjects/{topic}-value/versions/latest":
                body = {"subject": f"{topic}-value", "version": 1, "id": SCHEMA_ID, "schema": text}
            else:
                self.send_response(404)
                self.end_headers()
                return
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def produce(bootstrap: str, topic: str, partitions: int, n: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)
    schema = parse_avro(json.dumps(ORDER))
    at = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
    values = [frame(SCHEMA_ID, avro_encode_native(schema, {
        "id": i, "sku": f"sku-{i:06d}", "amount": i * 0.25, "tags": ["a", "b"][: i % 3],
        "state": ("NEW", "PAID", "SHIPPED")[i % 3], "at": at})) for i in range(1000)]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 1_000_000, "acks": 1})
    for i in range(n):
        while True:
            try:
                producer.produce(topic, value=values[i % 1000], partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def scan(spark: Any, bootstrap: str, topic: str, url: str | None) -> tuple[float, Any]:
    reader = spark.read.format("sluice").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    if url is None:
        query = reader.load().selectExpr("sum(length(value)) AS n")
    else:
        query = reader.option("schema.registry.url", url).option("value.format", "avro").load() \
            .selectExpr("sum(value.amount) AS amount", "count(value.sku) AS n")
    started = time.perf_counter()
    row = query.collect()[0]
    return time.perf_counter() - started, row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    n, cores = args.records, os.cpu_count() or 1
    root = Path(tempfile.mkdtemp(prefix="sluice-bench-spark-typed-"))
    procs = Procs()
    stack = contextlib.ExitStack()
    server = None
    try:
        metadata_url = stack.enter_context(metadata_database(root))
        broker = Broker(procs, root / "data", metadata_url, f"bench-{uuid.uuid4().hex[:12]}", 1, [])
        failed = broker.start()
        if failed is not None:
            raise SystemExit(f"broker did not start:\n{failed}")
        topic = "orders"
        produce(broker.bootstrap, topic, args.partitions, n)
        server, url = registry(topic)
        print(f"broker pid {broker.pid}; {n:,} framed Avro records in {args.partitions} partition(s); {cores} cores")
        from dataplane.client.spark.session import spark_session, stop_spark

        spark = spark_session(master=f"local[{cores}]")
        scan(spark, broker.bootstrap, topic, None)  # warm-ups: Python workers, imports, registry lookups
        _, row = scan(spark, broker.bootstrap, topic, url)
        assert row["n"] == n, row
        binary = min(scan(spark, broker.bootstrap, topic, None)[0] for _ in range(args.rounds))
        typed = min(scan(spark, broker.bootstrap, topic, url)[0] for _ in range(args.rounds))
        print(f"{'read':<28}{'records/s':>14}")
        print(f"{'binary value':<28}{n / binary:>14,.0f}")
        print(f"{'value.format=avro':<28}{n / typed:>14,.0f}   ({typed / binary:.1f}x the binary read's time)")
        stop_spark()
    finally:
        if server is not None:
            server.shutdown()
        procs.stop_all()
        stack.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    main()
