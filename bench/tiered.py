"""Tiered storage benchmark: the remote tier against local disk, on one real broker and the embedded object store.

    python bench/tiered.py            # a few minutes (256 MiB per phase)
    python bench/tiered.py --quick    # about a minute (64 MiB)

Three figures, each against a baseline measured in the same run (the machines are shared and noisy, so only
same-run ratios mean anything):

* consume: one confluent-kafka consumer reading a whole topic from offset 0 once its data is in the remote tier
  (local retention left one segment on disk) against the same bytes read from local disk. Goal >= 0.5x.
* produce: 1 KiB records, idempotent, acks=all, to a tiered topic (uploads and local retention running) against
  the same to a topic without tiering. Goal >= 0.9x.
* uploads against a sustained produce: records produced at a fixed rate (``--rate``, default 50 MiB/s; quick 20)
  for ``--seconds`` to a tiered topic while the bytes not yet uploaded (the local backlog: log end minus the
  highest tiered offset) are sampled; the uploads keep up when the backlog of the run's second half is no larger
  than the first half's plus one segment, i.e. it does not grow.

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
from common import ROOT, Broker, MiB, Procs, cpu_seconds, describe_tree, metadata_database, ok, ratio
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


def produce_at(bootstrap: str, topic: str, rate_mib: float, seconds: float) -> float:
    """Produce ``rate_mib`` MiB/s for ``seconds`` (1 s slices, paced); the MiB/s actually reached."""
    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
        "compression.type": "none", "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576, "delivery.report.only.error": True, "log_level": 3})
    producer.list_topics(topic, timeout=10)
    value = b"v" * VALUE
    per_slice = int(rate_mib * MiB / VALUE)
    started = time.perf_counter()
    sent = 0
    for second in range(int(seconds)):
        for _ in range(per_slice):
            try:
                producer.produce(topic, value)
            except BufferError:
                producer.poll(0.005)
                producer.produce(topic, value)
        sent += per_slice
        producer.poll(0)
        pause = started + second + 1 - time.perf_counter()
        if pause > 0:
            time.sleep(pause)  # pacing the offered load, not synchronisation
    if producer.flush(600):
        raise SystemExit("produce did not finish")
    return sent * VALUE / MiB / (time.perf_counter() - started)


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
    ap.add_argument("--rate", type=float, default=None, help="sustained produce, MiB/s (default 50; quick 20)")
    ap.add_argument("--seconds", type=float, default=None, help="sustained produce length (default 30; quick 15)")
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
        cpu: dict[str, list[float]] = {"plain": [], "tiered": [], "store-plain": [], "store-tiered": []}
        plain_rates: list[float] = []
        tiered_rates: list[float] = []
        local_reads: list[float] = []
        remote_reads: list[float] = []
        for r in range(rounds):
            plain, tiered = f"plain-{r}", f"tiered-{r}"
            create_topic(broker.bootstrap, plain, 1, configs={"segment.bytes": str(SEGMENT)})
            create_topic(broker.bootstrap, tiered, 1, configs={
                "segment.bytes": str(SEGMENT), "remote.storage.enable": "true",
                "local.retention.bytes": str(SEGMENT)})
            order = [(plain, plain_rates), (tiered, tiered_rates)]
            for topic, rates in order if r % 2 == 0 else reversed(order):
                kind = "tiered" if topic == tiered else "plain"
                before, store_before = cpu_seconds(broker.pid), cpu_seconds(store.pid or 0)
                rates.append(produce(broker.bootstrap, topic, n))
                cpu[kind].append(cpu_seconds(broker.pid) - before)  # CPU-s of the broker per phase
                cpu[f"store-{kind}"].append(cpu_seconds(store.pid or 0) - store_before)
            # All but the active segment uploaded and gone from local disk: the tiered topic is read remotely.
            wait_for(lambda t=tiered: list_offset(broker.port, t, -4) >= n - 2 * SEGMENT // VALUE,
                     "uploads and local retention")
            for topic, reads in ((plain, local_reads), (tiered, remote_reads)) if r % 2 == 0 else (
                    (tiered, remote_reads), (plain, local_reads)):
                reads.append(consume(broker.bootstrap, topic))
        rate = args.rate or (20.0 if args.quick else 50.0)
        seconds = args.seconds or (15.0 if args.quick else 30.0)
        sustained_segment = 8 * MiB
        create_topic(broker.bootstrap, "sustained", 1, configs={
            "segment.bytes": str(sustained_segment), "remote.storage.enable": "true",
            "local.retention.bytes": str(sustained_segment)})
        with UploadWatch(broker.port, "sustained") as watch:
            reached = produce_at(broker.bootstrap, "sustained", rate, seconds)
        samples = [(t, end, max(tiered + 1, 0)) for t, end, tiered in watch.samples]
        half = len(samples) // 2
        backlog = [(end - up) * VALUE / MiB for _, end, up in samples]
        first, second = max(backlog[:half] or [0.0]), max(backlog[half:] or [0.0])
        uploaded = [(t, up) for t, _, up in samples if up > 0]
        upload_rate = ((uploaded[-1][1] - uploaded[0][1]) * VALUE / MiB / (uploaded[-1][0] - uploaded[0][0])
                       if len(uploaded) >= 2 and uploaded[-1][0] > uploaded[0][0] else 0.0)
        local, remote_read = max(local_reads), max(remote_reads)
        plain_rate, tiered_rate = max(plain_rates), max(tiered_rates)
        print(f"consume from offset 0: local {local:8.1f} MiB/s   remote tier {remote_read:8.1f} MiB/s   "
              f"x{ratio(remote_read, local):.2f} (goal >= 0.5) {ok(remote_read >= 0.5 * local)}")
        print(f"produce acks=all:      plain {plain_rate:8.1f} MiB/s   tiered      {tiered_rate:8.1f} MiB/s   "
              f"x{ratio(tiered_rate, plain_rate):.2f} (goal >= 0.9) {ok(tiered_rate >= 0.9 * plain_rate)}")
        mib = n * VALUE / MiB
        per_mib = min(cpu["plain"]) / mib * 1000
        print(f"CPU during produce (min over rounds, per MiB produced): broker plain {per_mib:.1f}"
              f" ms, broker tiered {min(cpu['tiered']) / mib * 1000:.1f} ms (uploads included); object store "
              f"{min(cpu['store-tiered']) / mib * 1000:.1f} ms while tiered (same machine)")
        keeps_up = second <= first + sustained_segment / MiB
        print(f"sustained produce {reached:.1f} MiB/s for {seconds:.0f} s (asked {rate:.0f}): uploads "
              f"{upload_rate:.1f} MiB/s; local backlog max {first:.1f} MiB (1st half) -> {second:.1f} MiB (2nd half), "
              f"segments {sustained_segment // MiB} MiB: x{ratio(upload_rate, reached):.2f} of produce, "
              f"backlog not growing {ok(keeps_up)}")


if __name__ == "__main__":
    main()
