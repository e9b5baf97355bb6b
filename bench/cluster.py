"""Replication cost and failover time: a 3-broker cluster against one broker, measured in the same run.

    python bench/cluster.py [--records N] [--quick]

* throughput: 1 KiB records to an RF=3, min.insync.replicas=2 topic with acks=all
  on 3 brokers, next to acks=1 on a single broker (RF=1) — goal: ratio >= 0.5;
* end-to-end latency at 5k records/s, acks=all on the cluster (producer send to
  consumer receipt, one partition) — goal: p99 <= 15 ms;
* failover: SIGKILL the partition's leader, then time until an acks=all produce
  succeeds on the new leader — goal: under 2 x the broker lease.

All brokers share this machine's two cores with the clients, so the cluster
figures include three brokers' CPU, not just the network hops a real cluster adds.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker import Phase, create_topic, kafka_latency, kafka_produce
from common import Broker, Procs, metadata_database, ok, percentiles
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

LEASE_MS = 3000
VALUE = b"x" * 1024


def start_cluster(procs: Procs, root: Path, metadata_url: str, size: int) -> list[Broker]:
    root.mkdir(parents=True, exist_ok=True)
    cluster_id = f"bench-{uuid.uuid4().hex[:12]}"
    brokers = [Broker(procs, root / f"broker-{n}", metadata_url, cluster_id, 1,
                      ["--broker-session-timeout-ms", str(LEASE_MS), "--offsets-topic-partitions", "3"], node_id=n)
               for n in range(1, size + 1)]
    for broker in brokers:
        failure = broker.start()
        if failure:
            raise SystemExit(f"broker {broker.node_id} did not start:\n{failure}")
    bootstrap = ",".join(b.bootstrap for b in brokers)
    deadline = time.monotonic() + 30
    while len(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).brokers) < size:
        if time.monotonic() > deadline:
            raise SystemExit("brokers did not all register")
        time.sleep(0.1)
    return brokers


def leader_of(bootstrap: str, topic: str) -> int:
    meta = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return int(meta.topics[topic].partitions[0].leader)


def failover_seconds(brokers: list[Broker], topic: str) -> float:
    """SIGKILL the leader, then produce acks=all until one succeeds: seconds from the kill to that ack."""
    bootstrap = ",".join(b.bootstrap for b in brokers)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "retry.backoff.ms": 20, "retry.backoff.max.ms": 100, "message.timeout.ms": 60_000,
                         "topic.metadata.refresh.interval.ms": 250, "reconnect.backoff.max.ms": 100,
                         "log_level": 0})
    producer.produce(topic, b"warm", partition=0)
    producer.flush(30)
    leader = next(b for b in brokers if b.node_id == leader_of(bootstrap, topic))
    delivered: list[float] = []
    assert leader.proc is not None
    killed = time.monotonic()
    os.killpg(leader.proc.pid, signal.SIGKILL)
    producer.produce(topic, b"after", partition=0,
                     on_delivery=lambda err, _m: delivered.append(time.monotonic()) if err is None else None)
    producer.flush(60)
    if not delivered:
        raise SystemExit("no acks=all produce succeeded after the leader was killed")
    return delivered[0] - killed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true", help="fewer records, shorter latency run")
    args = parser.parse_args()
    n = 20_000 if args.quick else args.records
    seconds = 3.0 if args.quick else 10.0
    procs = Procs()
    with (tempfile.TemporaryDirectory(prefix="sluice-bench-cluster-") as tmp,
          metadata_database(Path(tmp)) as metadata_url):
        root = Path(tmp)
        try:
            single = start_cluster(procs, root / "single", metadata_url, 1)
            create_topic(single[0].bootstrap, "one", 1)
            baseline: Phase = kafka_produce(single[0].bootstrap, single[0].pid, "one", 1, VALUE, n, 1)
            for broker in single:
                broker.stop()

            brokers = start_cluster(procs, root / "cluster", metadata_url, 3)
            bootstrap = ",".join(b.bootstrap for b in brokers)
            create_topic(bootstrap, "three", 1, 3, {"min.insync.replicas": "2"})
            replicated = kafka_produce(bootstrap, None, "three", 1, VALUE, n, -1)
            create_topic(bootstrap, "latency", 1, 3, {"min.insync.replicas": "2"})
            lat = kafka_latency(bootstrap, "latency", 5000, seconds, 1024, acks=-1)
            p50, p99, worst = percentiles(lat)
            create_topic(bootstrap, "failover", 1, 3, {"min.insync.replicas": "2"})
            failover = failover_seconds(brokers, "failover")
        finally:
            procs.stop_all()
    ratio = replicated.rps / baseline.rps if baseline.rps else 0.0
    print(f"records: {n} x 1 KiB, one partition")
    print(f"  single broker, RF=1, acks=1     : {baseline.rps:10.0f} rec/s {baseline.mbps:7.1f} MiB/s"
          f"  errors {baseline.errors}")
    print(f"  3 brokers, RF=3, acks=all, ISR 2: {replicated.rps:10.0f} rec/s {replicated.mbps:7.1f} MiB/s"
          f"  errors {replicated.errors}")
    print(f"  ratio (goal >= 0.50)            : {ratio:10.2f}  {ok(ratio >= 0.5)}")
    print(f"latency at 5000 rec/s, acks=all, {len(lat)} samples: p50 {p50:.1f} ms  p99 {p99:.1f} ms  "
          f"max {worst:.1f} ms  (goal p99 <= 15 ms) {ok(p99 <= 15)}")
    print(f"failover: leader SIGKILL to first acks=all ack: {failover * 1000:.0f} ms "
          f"(lease {LEASE_MS} ms; goal < {2 * LEASE_MS} ms) {ok(failover * 1000 < 2 * LEASE_MS)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
