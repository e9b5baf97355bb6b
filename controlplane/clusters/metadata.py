"""What the dataplane's metadata store says about a managed cluster's brokers.

The control plane reads it directly (same Postgres, the dataplane's own schema)
for the two facts no admin call gives cheaply before a broker is up: which
brokers hold a live lease, and how many replicas each is assigned.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import psycopg
from django.conf import settings

from dataplane.cluster.migrations import migrate
from dataplane.cluster.store import MetadataStore

_migrated = False


@dataclass(frozen=True, slots=True)
class Registration:
    live: frozenset[int] = frozenset()
    replicas: dict[int, int] = field(default_factory=dict)


def _conninfo() -> str:
    return str(settings.DATABASE_URL)


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
        live = frozenset(b.node_id for b in store.live_brokers())
        return Registration(live, store.replica_counts())


def drop(kafka_cluster_id: str) -> None:
    with _store(kafka_cluster_id) as store:
        store.drop_cluster()
