"""Transactions benchmark: what exactly-once costs next to the idempotent producer, on one real broker.

    python bench/transactions.py            # a few minutes
    python bench/transactions.py --quick    # about a minute

Two ratios, each against a baseline measured in the same run on the same broker (the machines are shared and
noisy, so only same-run ratios mean anything):

* produce: one confluent-kafka producer sending 1 KiB records in transactions of 1,000 records (begin, 1,000
  produces, commit) against the same producer configuration without ``transactional.id`` (idempotent, acks=all).
  Goal: transactional records/s >= 0.8 x idempotent. Measured twice: with librdkafka's default ``batch.size``, which
  splits a 1,000-record transaction into two Produce requests sent one after the other, and with a ``batch.size``
  that holds the whole transaction.
* consume: the same data read with ``isolation.level=read_committed`` against ``read_uncommitted``, on a topic where
  10 % of the transactions were aborted (read_committed skips them: its figure counts the records it returned, the
  rate is over the same bytes of log). Goal: read_committed >= 0.9 x read_uncommitted, both in log bytes per second.

Rounds alternate the order of the measured and the baseline phase; the best of each is kept.
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from broker import create_topic
from common import ROOT, Broker, MiB, Procs, describe_tree, metadata_database, ok, ratio
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

VALUE = 1024
PER_TXN = 1000
# Both producers alike. librdkafka flushes a transaction at commit, so linger.ms is paid once per transaction too.
LINGER_MS = 1


# librdkafka's default batch.size (1,000,000 B) holds 967 of a transaction's 1,000 records: the other 33 go in a
# second Produce that librdkafka sends only after the first, so each commit waits for two requests in a row. ONE_BATCH
# is the size that takes a whole transaction (1,000 x 1 KiB records and their framing, ~1,034,000 B, under the
# topic's max.message.bytes of 1,048,588); both producers are measured with each.
DEFAULT_BATCH = 1_000_000
ONE_BATCH = 1_040_000


def _producer(bootstrap: str, transactional: bool, batch_size: int = DEFAULT_BATCH) -> Producer:
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": LINGER_MS,
        "compression.type": "none", "batch.size": batch_size, "message.max.bytes": max(batch_size, 1_000_000),
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576, "delivery.report.only.error": True, "log_level": 3}
    if transactional:
        conf["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
    producer = Producer(conf)
    if transactional:
        producer.init_transactions(60)
    return producer


COMMIT_MS: list[float] = []  # each transactional commit's duration, for where a transaction's time goes


def produce(bootstrap: str, topic: str, n: int, *, transactional: bool, abort_every: int = 0,
            batch_size: int = DEFAULT_BATCH) -> float:
    """Records per second for n records (transactions of PER_TXN; every abort_every-th one aborted)."""
    producer = _producer(bootstrap, transactional, batch_size)
    producer.list_topics(topic, timeout=10)
    value = b"v" * VALUE
    started = time.perf_counter()
    if transactional:
        for txn in range(n // PER_TXN):
            producer.begin_transaction()
            for _ in range(PER_TXN):
                try:
                    producer.produce(topic, value)
                except BufferError:
                    producer.poll(0.005)
                    producer.produce(topic, value)
            if abort_every and txn % abort_every == abort_every - 1:
                producer.flush(60)  # in the log before the abort (librdkafka drops what it has not sent)
                producer.abort_transaction(60)
            else:
                committing = time.perf_counter()
                producer.commit_transaction(60)
                COMMIT_MS.append((time.perf_counter() - committing) * 1000)
    else:
        for i in range(n):
            try:
                producer.produce(topic, value)
            except BufferError:
                producer.poll(0.005)
                producer.produce(topic, value)
            if not i & 0x3FFF:
                producer.poll(0)
        if producer.flush(300):
            raise SystemExit("idempotent produce did not finish")
    return n / (time.perf_counter() - started)


def consume(bootstrap: str, topic: str, *, committed: bool) -> tuple[float, int]:
    """(log MiB/s, records returned) reading the whole topic once, up to its end for the isolation level."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False,
        "enable.partition.eof": True, "max.partition.fetch.bytes": 4 * MiB, "fetch.max.bytes": 64 * MiB,
        "queued.min.messages": 1_000_000, "queued.max.messages.kbytes": 262_144, "fetch.queue.backoff.ms": 5,
        "isolation.level": "read_committed" if committed else "read_uncommitted", "log_level": 3})
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    consumer.assign([TopicPartition(topic, 0, 0)])
    count = 0
    started = time.perf_counter()
    try:
        while True:
            for message in consumer.consume(10_000, 1.0):
                error = message.error()
                if error is None:
                    count += 1
                elif error.code() == KafkaError._PARTITION_EOF:
                    elapsed = time.perf_counter() - started
                    return (high - low) * VALUE / MiB / elapsed, count
                else:
                    raise SystemExit(f"consume failed: {error}")
    finally:
        consumer.close()


def produce_phase(bootstrap: str, n: int, rounds: int, batch_size: int) -> None:
    """Transactional against idempotent produce with one batch.size, best of ``rounds`` each, order alternating."""
    COMMIT_MS.clear()
    label = ("librdkafka's default batch.size, 1,000,000 B: two Produce requests a transaction"
             if batch_size == DEFAULT_BATCH else f"batch.size {batch_size:,} B: one Produce request a transaction")
    print(f"{label}")
    best_txn = best_idem = 0.0
    for rnd in range(rounds):
        order = (True, False) if rnd % 2 == 0 else (False, True)
        for transactional in order:
            topic = f"p-{uuid.uuid4().hex[:6]}"
            create_topic(bootstrap, topic, 1)
            rate = produce(bootstrap, topic, n, transactional=transactional, batch_size=batch_size)
            print(f"  round {rnd + 1} {'transactional' if transactional else 'idempotent':13} "
                  f"{rate:10,.0f} records/s")
            if transactional:
                best_txn = max(best_txn, rate)
            else:
                best_idem = max(best_idem, rate)
    produce_ratio = ratio(best_txn, best_idem)
    per_txn = PER_TXN / best_txn * 1000
    print(f"  a transaction takes {per_txn:.2f} ms at the best rate; commit_transaction (the flush of its "
          f"records, then EndTxn) median {statistics.median(COMMIT_MS):.2f} ms, p90 "
          f"{statistics.quantiles(COMMIT_MS, n=10)[-1]:.2f} ms")
    print(f"produce, batch.size {batch_size:,}: transactional {best_txn:,.0f} rec/s vs idempotent "
          f"{best_idem:,.0f} rec/s = {produce_ratio:.2f}  goal >= 0.8 {ok(produce_ratio >= 0.8)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=None, help="records per phase (default 200,000; quick 50,000)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=None, help="default 3 (quick 1)")
    ap.add_argument("--broker-args", default="")
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    n = args.records or (50_000 if args.quick else 200_000)
    n -= n % PER_TXN
    rounds = args.rounds or (1 if args.quick else 3)
    root = Path(tempfile.mkdtemp(prefix="sluice-bench-txn-", dir=args.dir))
    procs = Procs()
    with contextlib.ExitStack() as stack:
        stack.callback(procs.stop_all)
        metadata_url = stack.enter_context(metadata_database(root))
        broker = Broker(procs, root / "data", metadata_url, f"bench-{uuid.uuid4().hex[:12]}", 1,
                        shlex.split(args.broker_args))
        failed = broker.start()
        if failed is not None:
            raise SystemExit(f"broker did not start:\n{failed}")
        print(f"broker code: {describe_tree(ROOT)}; {n:,} records of {VALUE} B per phase, "
              f"{PER_TXN} per transaction, {rounds} round(s)")
        for batch_size in (DEFAULT_BATCH, ONE_BATCH):
            produce_phase(broker.bootstrap, n, rounds, batch_size)

        topic = f"c-{uuid.uuid4().hex[:6]}"
        create_topic(broker.bootstrap, topic, 1)
        produce(broker.bootstrap, topic, n, transactional=True, abort_every=10)
        best_rc = best_ru = 0.0
        returned = {True: 0, False: 0}
        for rnd in range(rounds):
            for committed in ((True, False) if rnd % 2 == 0 else (False, True)):
                rate, count = consume(broker.bootstrap, topic, committed=committed)
                returned[committed] = count
                print(f"  round {rnd + 1} {'read_committed' if committed else 'read_uncommitted':16} "
                      f"{rate:8.1f} MiB/s of log, {count:,} records returned")
                if committed:
                    best_rc = max(best_rc, rate)
                else:
                    best_ru = max(best_ru, rate)
        expected = n - (n // PER_TXN // 10) * PER_TXN
        if returned[True] != expected or returned[False] != n:
            raise SystemExit(f"wrong record counts: read_committed {returned[True]:,} (expected {expected:,}), "
                             f"read_uncommitted {returned[False]:,} (expected {n:,})")
        consume_ratio = ratio(best_rc, best_ru)
        print(f"consume (10% of transactions aborted): read_committed {best_rc:.1f} MiB/s vs read_uncommitted "
              f"{best_ru:.1f} MiB/s = {consume_ratio:.2f}  goal >= 0.9 {ok(consume_ratio >= 0.9)}")


if __name__ == "__main__":
    main()
