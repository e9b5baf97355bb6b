"""Quota benchmark: does a producer held by its byte quota leave another tenant's produce latency alone?

    python bench/quotas.py            # ~1.5 minutes
    python bench/quotas.py --quick    # ~40 s

One broker with a SASL_PLAINTEXT listener (metadata in an embedded Postgres unless DATABASE_URL is set) and two
principals: ``noisy`` with a ``producer_byte_rate`` quota, ``quiet`` with none. ``quiet`` produces 1 KiB records
at a fixed rate (acks=all, linger 0) and its per-record latency (produce call to acknowledgement) is measured:

1. alone (the unloaded baseline);
2. while ``noisy`` (another process) produces as fast as it can, 10x its quota and more, with the quota on;
3. the same without the quota (the reference: what the quota protects against).

Prints quiet's p50/p99 in each phase, the ratio loaded-with-quota / unloaded (goal <= 2.0), and the rate
``noisy`` was held to against its quota. Every process started here is killed by its pid on exit.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psycopg
from common import ROOT, Broker, Procs, metadata_database, ok, percentiles, ratio
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from dataplane.cluster.migrations import migrate
from dataplane.cluster.quota_store import QuotaStore
from dataplane.cluster.security_store import SecurityStore
from dataplane.cluster.store import MetadataStore
from dataplane.security.quotas import PRODUCER_BYTE_RATE, USER, entity
from dataplane.security.sasl import plain_hash

VALUE = 1024
QUIET_RATE = 500  # records/s from the tenant whose latency is measured
QUOTA = 2 * 1024 * 1024  # noisy's producer_byte_rate
USERS = {"noisy": "noisy-secret", "quiet": "quiet-secret", "admin": "admin-secret"}
LOG = {"log_level": 0, "logger": lambda *args: None}
GOAL = 2.0


def client(bootstrap: str, user: str) -> dict[str, object]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": USERS[user], **LOG}


def seed(url: str, cluster_id: str) -> None:
    migrate(url, "sluice_meta")
    with psycopg.connect(url) as conn:
        store = MetadataStore(conn, cluster_id)
        store.ensure_cluster()
        for user, secret in USERS.items():
            SecurityStore(store).set_plain_credential(user, plain_hash(secret))


def set_quota(url: str, cluster_id: str, value: float | None) -> None:
    """What AlterClientQuotas does (the store's write path); brokers hear of it by NOTIFY."""
    with psycopg.connect(url) as conn:
        QuotaStore(MetadataStore(conn, cluster_id)).alter(
            [(entity([(USER, "noisy")]), [(PRODUCER_BYTE_RATE, value or 0.0, value is None)])])


def quiet_latencies(bootstrap: str, topic: str, seconds: float) -> list[int]:
    """Nanoseconds from produce() to the acknowledgement of each record sent at QUIET_RATE for ``seconds``."""
    producer = Producer({**client(bootstrap, "quiet"), "linger.ms": 0, "acks": "all"})
    producer.produce(topic, b"warm")
    producer.flush(30)
    latencies: list[int] = []
    value = b"q" * VALUE

    def delivered(error: object, message: object, sent: int) -> None:
        if error is None:
            latencies.append(time.perf_counter_ns() - sent)
    interval = 1 / QUIET_RATE
    start = time.perf_counter()
    n = 0
    while (now := time.perf_counter()) - start < seconds:
        due = start + n * interval
        if now < due:
            producer.poll(due - now)
            continue
        sent = time.perf_counter_ns()
        producer.produce(topic, value, on_delivery=lambda e, m, s=sent: delivered(e, m, s))
        producer.poll(0)
        n += 1
    producer.flush(30)
    return latencies


def noisy(bootstrap: str, seconds: float) -> None:
    """The noisy tenant (its own process): produce as fast as the client can, print bytes/s acknowledged in the
    last ``seconds`` - 3 (the first 3 s are the quota's burst)."""
    producer = Producer({**client(bootstrap, "noisy"), "linger.ms": 5, "batch.size": 64 * 1024,
                         "queue.buffering.max.kbytes": 8192})
    acked: list[tuple[float, int]] = []
    value = b"n" * VALUE
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            producer.produce("noisy", value,
                             on_delivery=lambda e, m: acked.append((time.monotonic(), VALUE)) if e is None else None)
        except BufferError:
            producer.poll(0.005)
        producer.poll(0)
    producer.flush(30)
    counted = sum(size for at, size in acked if start + 3 <= at < start + seconds)
    print(f"{counted / (seconds - 3):.0f}", flush=True)


def phase(bootstrap: str, seconds: float, *, load: bool) -> tuple[list[int], float | None]:
    """quiet's latencies, with the noisy process producing alongside when ``load``; noisy's measured rate."""
    other = None
    if load:
        other = subprocess.Popen([sys.executable, __file__, "--noisy", bootstrap, str(seconds + 4)],
                                 stdout=subprocess.PIPE, text=True, start_new_session=True)
        time.sleep(3)  # bench pacing, not synchronisation: let noisy spend its burst before measuring
    try:
        latencies = quiet_latencies(bootstrap, "quiet", seconds)
        rate = None
        if other is not None:
            out, _ = other.communicate(timeout=seconds + 60)
            rate = float(out.strip().splitlines()[-1])
        return latencies, rate
    finally:
        if other is not None and other.poll() is None:
            other.kill()
            other.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--noisy", nargs=2, metavar=("BOOTSTRAP", "SECONDS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.noisy:
        noisy(args.noisy[0], float(args.noisy[1]))
        return 0
    seconds = 8.0 if args.quick else 20.0
    procs = Procs()
    with tempfile.TemporaryDirectory(prefix="sluice-bench-quotas-") as tmp, metadata_database(ROOT) as url:
        root = Path(tmp)
        try:
            cluster_id = f"bench-{uuid.uuid4().hex[:8]}"
            seed(url, cluster_id)
            set_quota(url, cluster_id, QUOTA)
            config = root / "broker.toml"
            config.write_text('listeners = "SASL_PLAINTEXT://127.0.0.1:0"\ninter.broker.sasl.username = "broker"\n'
                              'inter.broker.sasl.password = "broker-secret"\n')
            broker = Broker(procs, root / "data", url, cluster_id, 1, ["--config", str(config)])
            failed = broker.start()
            if failed:
                print(f"broker did not start:\n{failed}")
                return 1
            admin = AdminClient(client(broker.bootstrap, "admin"))
            for future in admin.create_topics([NewTopic("quiet", 1, 1), NewTopic("noisy", 1, 1)]).values():
                future.result(30)
            print(f"quota bench: quiet produces {QUIET_RATE} x {VALUE} B records/s (acks=all, linger 0) for "
                  f"{seconds:.0f} s per phase; noisy's producer_byte_rate {QUOTA / 2**20:.0f} MiB/s")
            alone, _ = phase(broker.bootstrap, seconds, load=False)
            held, held_rate = phase(broker.bootstrap, seconds, load=True)
            set_quota(url, cluster_id, None)
            free, free_rate = phase(broker.bootstrap, seconds, load=True)
            print(f"\n{'quiet produce latency':40}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}  noisy acked")
            rows = (("alone (baseline)", alone, None), ("noisy at 10x+ its quota, quota on", held, held_rate),
                    ("noisy flat out, no quota (reference)", free, free_rate))
            for label, latencies, rate in rows:
                p50, p99, top = percentiles(latencies)
                noted = "" if rate is None else f"{rate / 2**20:8.1f} MiB/s"
                print(f"{label:40}{p50:>9.2f}{p99:>9.2f}{top:>9.1f}  {noted}")
            base_p99, held_p99, free_p99 = (percentiles(x)[1] for x in (alone, held, free))
            share = ratio(held_p99, base_p99)
            print(f"\nquiet p99 with noisy held / alone: {share:.2f} (goal <= {GOAL}: {ok(share <= GOAL)}); "
                  f"without the quota: {ratio(free_p99, base_p99):.2f}")
            if held_rate is not None:
                print(f"noisy held at {held_rate / QUOTA:.2f} of its quota "
                      f"(unthrottled it reached {ratio(free_rate or 0.0, QUOTA):.1f}x the quota)")
        finally:
            procs.stop_all()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
