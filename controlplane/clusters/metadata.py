"""What the dataplane's metadata store says about a managed cluster's brokers.

The control plane reads it directly (same Postgres, the dataplane's own schema)
for the two facts no admin call gives cheaply before a broker is up: which
brokers hold a live lease, and how many replicas each is assigned. And it writes
the clusters' SASL credentials there (``credential_reconcile`` says why), and the plan's partition limit, which
the brokers enforce on every create (``dataplane.cluster.partition_limit``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import psycopg
from django.db import connection

from dataplane.cluster.migrations import migrate
from dataplane.cluster.security_store import SecurityStore
from dataplane.cluster.store import MetadataStore
from dataplane.security.events import SecurityEvent

_migrated = False


@dataclass(frozen=True, slots=True)
class Registration:
    live: frozenset[int] = frozenset()
    replicas: dict[int, int] = field(default_factory=dict)
    since: dict[int, float] = field(default_factory=dict)  # node -> when its live lease was taken

    def registered(self, node_id: int, started: float | None) -> bool:
        """Live, and registered by the current process (an old incarnation's lease outlives its process)."""
        # 5 s of slack for clocks of different hosts (the old lease is from long before, or a crash ago).
        return node_id in self.live and (started is None or self.since.get(node_id, 0.0) >= started - 5.0)


def _conninfo() -> str:
    """Django's own database, as its connection resolved it (so a test database is followed too)."""
    db = connection.settings_dict
    params = {"dbname": db["NAME"], "user": db.get("USER") or None, "password": db.get("PASSWORD") or None,
              "host": db.get("HOST") or None, "port": str(db["PORT"]) if db.get("PORT") else None,
              **{k: v for k, v in (db.get("OPTIONS") or {}).items() if isinstance(v, str | int)}}
    return psycopg.conninfo.make_conninfo(**{k: v for k, v in params.items() if v is not None})


@contextmanager
def _store(kafka_cluster_id: str) -> Iterator[MetadataStore]:
    global _migrated
    conninfo = _conninfo()
    if not _migrated:
        migrate(conninfo)
        _migrated = True
    with psycopg.connect(conninfo, connect_timeout=5) as conn:
        yield MetadataStore(conn, kafka_cluster_id)


def registration(kafka_cluster_id: str) -> Registration:
    with _store(kafka_cluster_id) as store:
        since = store.live_since()
        return Registration(frozenset(since), store.replica_counts(), since)


def bytes_out(kafka_cluster_id: str) -> dict[int, dict[str, int]]:
    """node id -> bytes each live broker has sent to consumers per topic since it started."""
    with _store(kafka_cluster_id) as store:
        return {node: counters for node, (_, counters) in store.bytes_out().items()}


@contextmanager
def security(kafka_cluster_id: str) -> Iterator[SecurityStore | None]:
    """The cluster's security tables (ACLs, credentials), or None while no broker has created the cluster."""
    with _store(kafka_cluster_id) as store:
        exists = store.conn.execute("SELECT 1 FROM clusters WHERE cluster_id = %s", (kafka_cluster_id,)).fetchone()
        yield SecurityStore(store) if exists else None


def set_partition_limit(kafka_cluster_id: str, limit: int | None) -> bool:
    """Make the brokers enforce the plan's partition limit (CreateTopics/CreatePartitions over the Kafka
    protocol included); whether it changed. False too while no broker has created the cluster's row."""
    with _store(kafka_cluster_id) as store:
        return store.set_partition_limit(limit)


def drop(kafka_cluster_id: str) -> None:
    with _store(kafka_cluster_id) as store:
        store.drop_cluster()


def take_security_events(kafka_cluster_id: str, limit: int) -> list[SecurityEvent]:
    """Remove and return the oldest security events the cluster's brokers reported (for the audit trail)."""
    with _store(kafka_cluster_id) as store:
        return SecurityStore(store).take_security_events(limit)
