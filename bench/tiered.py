"""Tiered storage benchmark: the remote tier against local disk, on one real broker and the embedded object store.

    python bench/tiered.py            # a few minutes (256 MiB per phase)
    python bench/tiered.py --quick    # about a minute (64 MiB)

Three figures, each against a baseline measured in the same run (the machines are shared and noisy, so only
same-run ratios mean anything):

* consume: one confluent-kafka consumer reading a whole topic from offset 0 once its data is in the remote tier
  (local retention left one segment on disk) against the same bytes read from local disk. Goal >= 0.5x.
* produce: 1 KiB records, idempotent, acks=all, to a tiered topic (uploads and local retention running) against
  the same to a topic without tiering. Goal >= 0.9x.
* uploads against a sustained produce: the bytes not yet uploaded when the produce ends (the local backlog) and
  the upload rate while producing; the backlog must stay bounded (a few segments), not grow with the run.

The object store is s3rver on the same machine (``sluice.objectstore``): remote reads pay HTTP and s3rver's own
cost rather than a network's latency, and the two share the machine's cores with the broker.
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker import create_topic
from common import ROOT, Broker, MiB, Procs, describe_tree, metadata_database, ok, ratio
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kio.schema.list_offsets.v9.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i64

from sluice.objectstore import start_object_store
from tests.support.wire import KafkaWire

VALUE = 1024
SEGMENT = 16 * MiB


def produce(bootstrap: str, topic: str, n: int) -> float:
    """MiB/s of record values for n records of VALUE bytes (idempotent, acks=all)."""
    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
        "compression.type": "none", "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576, "delivery.report.only.error": True, "log_level": 3})
    producer.list_topics(topic, timeout=10)
    value = b"v" * VALUE
    started = time.perf_counter()
    for i in range(n):
        try:
            producer.produce(topic, value)
        except BufferError:
            producer.poll(0.005)
            producer.produce(topic, value)
        if not i & 0x3FFF:
            producer.poll(0)
    if producer.flush(600):
        raise SystemExit("produce did not finish")
    return n * VALUE / MiB / (time.perf_counter() - started)


def consume(bootstrap: str, topic: str) -> float:
    """MiB/s of record values reading the whole topic from offset 0."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False,
        "enable.partition.eof": True, "max.partition.fetch.bytes": 4 * MiB, "fetch.max.bytes": 64 * MiB,
        "queued.min.messages": 1_000_000, "queued.max.messages.kbytes": 262_144, "fetch.queue.backoff.ms": 5,
        "log_level": 3})
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    consumer.assign([TopicPartition(topic, 0, 0)])
    started = time.perf_counter()
    try:
        while True:
            for message in consumer.consume(10_000, 1.0):
                error = message.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    return (high - low) * VALUE / MiB / (time.perf_counter() - started)
                if error is not None:
                    raise SystemExit(f"consume failed: {error}")
    finally:
        consumer.close()


def list_offset(port: int, topic: str, timestamp: int) -> int:
    with KafkaWire(port) as wire:
        answer = wire.call(ListOffsetsRequest(replica_id=BrokerId(-1), isolation_level=i8(0), topics=(
            ListOffsetsTopic(name=TopicName(topic), partitions=(ListOffsetsPartition(
                partition_index=i32(0), current_leader_epoch=i32(-1), timestamp=i64(timestamp)),)),)))
    return int(answer.topics[0].partitions[0].offset)


class UploadWatch:
    """Samples the highest tiered offset (ListOffsets -5) every 0.25 s while a produce runs."""

    def __init__(self, port: int, topic: str) -> None:
        self.port, self.topic = port, topic
        self.samples: list[tuple[float, int, int]] = []  # (time, log end, tiered end)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> UploadWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            with contextlib.suppress(Exception):
                self.samples.append((time.perf_counter(), list_offset(self.port, self.topic, -1),
                                     list_offset(self.port, self.topic, -5)))


def wait_for(condition: Any, what: str, timeout: float = 600) -> float:
    started = time.perf_counter()
    while not condition():
        if time.perf_counter() - started > timeout:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.1)
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=None, help="MiB per phase (default 256; quick 64)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=None, help="default 2 (quick 1)")
    ap.add_argument("--broker-args", default="")
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    n = (args.mib or (64 if args.quick else 256)) * MiB // VALUE
    rounds = args.rounds or (1 if args.quick else 2)
    root = Path(tempfile.mkdtemp(prefix="sluice-bench-tiered-", dir=args.dir))
    procs = Procs()
    with contextlib.ExitStack() as stack:
        stack.callback(procs.stop_all)
        store = start_object_store(root / "objectstore")
        stack.callback(store.stop)
        metadata_url = stack.enter_context(metadata_database(root))
        remote = ["--remote-storage-endpoint", store.endpoint, "--remote-storage-bucket", store.bucket,
                  "--remote-storage-access-key", store.access_key, "--remote-storage-secret-key", store.secret_key,
                  "--remote-log-manager-interval-ms", "200"]
        broker = Broker(procs, root / "data", metadata_url, f"bench-{uuid.uuid4().hex[:12]}", 1,
                        [*remote, *shlex.split(args.broker_args)])
        failed = broker.start()
        if failed:
            raise SystemExit(f"broker did not start:\n{failed}")
        print(f"sluice tree: {describe_tree(ROOT)}; {n:,} x {VALUE} B records per phase, {rounds} round(s); "
              f"segments {SEGMENT // MiB} MiB; object store s3rver on 127.0.0.1")
        plain_rates, tiered_rates, local_reads, remote_reads, backlogs, upload_rates = [], [], [], [], [], []
        for r in range(rounds):
            plain, tiered = f"plain-{r}", f"tiered-{r}"
            create_topic(broker.bootstrap, plain, 1, configs={"segment.bytes": str(SEGMENT)})
            create_topic(broker.bootstrap, tiered, 1, configs={
                "segment.bytes": str(SEGMENT), "remote.storage.enable": "true",
                "local.retention.bytes": str(SEGMENT)})
            order = [(plain, plain_rates), (tiered, tiered_rates)]
            for topic, rates in order if r % 2 == 0 else reversed(order):
                if topic == tiered:
                    with UploadWatch(broker.port, topic) as watch:
                        rates.append(produce(broker.bootstrap, topic, n))
                    _end, tiered_end = watch.samples[-1][1:] if watch.samples else (n, -1)
                    backlogs.append((n - max(tiered_end + 1, 0)) * VALUE / MiB)
                    mid = [s for s in watch.samples if s[2] >= 0]
                    if len(mid) >= 2:
                        (t0, _, u0), (t1, _, u1) = mid[0], mid[-1]
                        upload_rates.append((u1 - u0) * VALUE / MiB / max(t1 - t0, 1e-9))
                else:
                    rates.append(produce(broker.bootstrap, topic, n))
            # All but the active segment uploaded and gone from local disk: the tiered topic is read remotely.
            wait_for(lambda t=tiered: list_offset(broker.port, t, -4) >= n - 2 * SEGMENT // VALUE,
                     "uploads and local retention")
            for topic, reads in ((plain, local_reads), (tiered, remote_reads)) if r % 2 == 0 else (
                    (tiered, remote_reads), (plain, local_reads)):
                reads.append(consume(broker.bootstrap, topic))
        local, remote_read = max(local_reads), max(remote_reads)
        plain_rate, tiered_rate = max(plain_rates), max(tiered_rates)
        print(f"consume from offset 0: local {local:8.1f} MiB/s   remote tier {remote_read:8.1f} MiB/s   "
              f"x{ratio(remote_read, local):.2f} (goal >= 0.5) {ok(remote_read >= 0.5 * local)}")
        print(f"produce acks=all:      plain {plain_rate:8.1f} MiB/s   tiered      {tiered_rate:8.1f} MiB/s   "
              f"x{ratio(tiered_rate, plain_rate):.2f} (goal >= 0.9) {ok(tiered_rate >= 0.9 * plain_rate)}")
        upload = max(upload_rates) if upload_rates else 0.0
        backlog = min(backlogs)
        print(f"uploads while producing {tiered_rate:.1f} MiB/s: {upload:.1f} MiB/s; not yet uploaded when the "
              f"produce ended: {backlog:.1f} MiB (segments {SEGMENT // MiB} MiB; bounded: "
              f"{ok(backlog <= 4 * SEGMENT / MiB)})")


if __name__ == "__main__":
    main()
