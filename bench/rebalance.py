"""A managed cluster's rebalance under its replication throttle: does the move take the throttle's time?

    python bench/rebalance.py            # 100 partitions x 20 MB moved at 50 MiB/s: ~4 min on 2 cores
    python bench/rebalance.py --quick    # 24 partitions x 5 MB moved at 10 MiB/s: ~2 min (a smoke run)

Runs the real stack (embedded Postgres and Redis, a Celery worker, two agents starting ``sluice broker``
processes; bench/stack.py, shared with bench/managed.py) and a 3-broker "dedicated" cluster. One topic
of ``--partitions`` partitions (default 150) with every replica on broker 1 is filled with ``--mb`` MB of
incompressible records per partition (acks=all). A rebalance is requested through the service with
``replication_throttle`` = ``--throttle-mib`` MiB/s; its proposal evens the replicas out, moving two
thirds of them (100 by default) onto brokers 2 and 3. The timed part runs from the approval until the
rebalance is Ready.

The baseline is the throttle's own time, computed from the proposal: the throttle is a per-broker budget
(every fetcher of a receiving broker shares it, as Kafka's follower quota does), so the moves take
max over receiving brokers of (bytes that broker copies / throttle). Goal: the measured time within
20 % of it. An unthrottled copy of the same moves (the rebalance undone with throttle 0, then redone) is
printed beside it, to show the throttle — not the machine — set the pace.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Procs
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from stack import QUIET_KAFKA, ManagedBench, bench_main, create_managed, delete_managed

from sluice.embedded import Services

GOAL_TOLERANCE = 0.20
MIB = 1024 * 1024
RECORD = 64 * 1024


def fill(kafka: dict[str, str], topic: str, partitions: int, mb: int) -> float:
    """``mb`` MB of random records into every partition; returns MB/s."""
    producer = Producer({**kafka, "acks": "all", "linger.ms": 20, "batch.size": 1 << 20,
                         "queue.buffering.max.kbytes": 256 * 1024, "message.max.bytes": 2 << 20, **QUIET_KAFKA})
    per_partition = mb * 1_000_000 // RECORD
    payload = os.urandom(RECORD * 4)
    failed: list[str] = []
    t0 = time.monotonic()
    for i in range(per_partition):
        for p in range(partitions):
            start = (i * 7 + p * 13) % (RECORD * 3)
            while True:
                try:
                    producer.produce(topic, payload[start:start + RECORD], partition=p,
                                     on_delivery=lambda err, _msg: failed.append(str(err)) if err else None)
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.poll(0)
    if producer.flush(300) or failed:
        raise SystemExit(f"filling the topic failed: {failed[:3]}")
    return partitions * per_partition * RECORD / 1e6 / (time.monotonic() - t0)


def wait_state(rebalance_id: uuid.UUID, states: set[str], timeout: float) -> Any:
    from controlplane.clusters.models import Rebalance

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rebalance = Rebalance.objects.get(pk=rebalance_id)
        if rebalance.state in states:
            return rebalance
        if rebalance.state in ("NotReady", "Stopped"):
            raise SystemExit(f"rebalance {rebalance.state}: {rebalance.message}")
        time.sleep(0.05)
    raise SystemExit(f"rebalance not {states} after {timeout:.0f} s")


def rebalance(cluster: Any, throttle: int, timeout: float) -> tuple[float, dict[int, int], int]:
    """Request, wait for the proposal, approve, time to Ready: (seconds, bytes per receiving broker, moves)."""
    from controlplane.clusters.rebalancing import rebalance_approve, rebalance_create
    from controlplane.core.actors import SYSTEM_ACTOR

    made = rebalance_create(cluster=cluster, actor=SYSTEM_ACTOR, replication_throttle=throttle)
    ready = wait_state(made.id, {"ProposalReady", "Ready"}, 120)
    if ready.state == "Ready":
        raise SystemExit(f"nothing to move: {ready.message}")
    receiving: collections.Counter[int] = collections.Counter()
    moves = 0
    for move in ready.proposal["moves"]:
        added = set(move["target"]) - set(move["current"])
        moves += bool(added)
        for node in added:
            receiving[node] += move["bytes_to_copy"]
    t0 = time.monotonic()
    rebalance_approve(rebalance=ready, actor=SYSTEM_ACTOR)
    wait_state(made.id, {"Ready"}, timeout)
    return time.monotonic() - t0, dict(receiving), moves


def run(args: argparse.Namespace, tmp: Path, services: Services, procs: Procs) -> int:
    bench = ManagedBench(tmp, services, procs)
    throttle = round(args.throttle_mib * MIB)
    try:
        bench.start()
        assert bench.store is not None
        cluster, took, _ = create_managed(bench.tenant, "moves", "dedicated", 3, bench.store)
        cluster.refresh_from_db()
        bootstrap = cluster.status["bootstrap_servers"]
        print(f"3-broker cluster Ready in {took:.1f} s", flush=True)
        from controlplane.clusters.credentials import client_config
        from controlplane.clusters.kafka_clients import admin_as_internal

        # Managed clusters authenticate: the bench's clients use the control plane's own settings.
        kafka = client_config(cluster, bootstrap=bootstrap)
        admin = AdminClient({**kafka, **QUIET_KAFKA})
        admin.create_topics([NewTopic("moves", args.partitions, replica_assignment=[[1]] * args.partitions,
                                      config={"max.message.bytes": str(2 << 20)})])["moves"].result(60)
        rate = fill(kafka, "moves", args.partitions, args.mb)
        print(f"filled {args.partitions} partitions x {args.mb} MB on broker 1 at {rate:.0f} MB/s", flush=True)

        seconds, receiving, moves = rebalance(cluster, throttle, args.timeout)
        expected = max(receiving.values()) / throttle
        total = sum(receiving.values())
        print(f"\nthrottled rebalance: {moves} partition(s) moved, {total / 1e6:.0f} MB copied "
              f"({', '.join(f'broker {n}: {b / 1e6:.0f} MB' for n, b in sorted(receiving.items()))})")
        verdict = "met" if abs(seconds / expected - 1) <= GOAL_TOLERANCE else "MISSED"
        print(f"  throttle {args.throttle_mib:g} MiB/s per broker -> the throttle's time "
              f"{expected:.1f} s; measured (approve to Ready) {seconds:.1f} s; ratio {seconds / expected:.2f} "
              f"(goal within {GOAL_TOLERANCE:.0%}: {verdict})", flush=True)
        if not args.skip_unthrottled:
            # Put everything back on broker 1 directly (not timed), then the same moves with no throttle.
            back = {("moves", p): [1] for p in range(args.partitions)}
            with admin_as_internal(cluster, bootstrap=bootstrap, timeout=60) as moves_admin:
                moves_admin.alter_reassignments(back)
                deadline = time.monotonic() + args.timeout
                while moves_admin.list_reassignments() and time.monotonic() < deadline:
                    time.sleep(0.2)
            free, _, _ = rebalance(cluster, 0, args.timeout)
            print(f"  the same moves unthrottled: {free:.1f} s ({total / 1e6 / free:.0f} MB/s over all brokers) "
                  f"-- the machine's own pace, for comparison", flush=True)
        delete_managed(cluster, tmp / "clusters", tmp / "broker-logs", timeout=120)
    finally:
        bench.stop()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=None, help="partitions (default 150; quick 36)")
    ap.add_argument("--mb", type=int, default=None, help="MB per partition (default 20; quick 5)")
    ap.add_argument("--throttle-mib", type=float, default=None, help="MiB/s per broker (default 50; quick 10)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds to wait for a rebalance")
    ap.add_argument("--skip-unthrottled", action="store_true", help="do not time the unthrottled comparison")
    ap.add_argument("--quick", action="store_true", help="a smoke run")
    ap.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    args = ap.parse_args()
    args.partitions = args.partitions or (36 if args.quick else 150)
    args.mb = args.mb or (5 if args.quick else 20)
    args.throttle_mib = args.throttle_mib or (10.0 if args.quick else 50.0)

    return bench_main("rebalance", lambda tmp, services, procs: run(args, tmp, services, procs), scratch=args.dir)

if __name__ == "__main__":
    sys.exit(main())
