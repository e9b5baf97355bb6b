"""Client quotas in the cluster's metadata schema (migration 0008).

Writes follow the store's discipline: one transaction, the cluster row locked so two writers' read-modify-write
cycles serialise, ``metadata_version`` and ``quota_version`` bumped and a NOTIFY sent at commit, so every broker
re-reads quotas on the next notification (or timer tick) and only when they changed. AlterClientQuotas on any
broker lands here, and so do the control plane's writes (through the same Kafka API).

Not thread-safe, like the ``MetadataStore`` it wraps.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg
from psycopg.types.json import Jsonb

from dataplane.cluster.store import MetadataStore
from dataplane.security.quotas import Entity, InvalidQuota, altered


def _entity(value: object) -> Entity:
    assert isinstance(value, dict)
    return tuple(sorted((str(k), None if v is None else str(v)) for k, v in value.items()))


class QuotaStore:
    """The quota rows of one cluster, through ``store``'s connection (and its thread)."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    @property
    def _conn(self) -> psycopg.Connection[tuple[object, ...]]:
        return self.store.conn

    def version(self) -> int:
        row = self._conn.execute("SELECT quota_version FROM clusters WHERE cluster_id = %s",
                                 (self.store.cluster_id,)).fetchone()
        return int(str(row[0])) if row else -1

    def quotas(self) -> dict[Entity, dict[str, float]]:
        rows = self._conn.execute("SELECT entity, key, value FROM client_quotas WHERE cluster_id = %s",
                                  (self.store.cluster_id,)).fetchall()
        found: dict[Entity, dict[str, float]] = {}
        for entity, key, value in rows:
            found.setdefault(_entity(entity), {})[str(key)] = float(str(value))
        return found

    def snapshot(self) -> tuple[int, dict[Entity, dict[str, float]]]:
        """The version and the quotas, read in one transaction."""
        with self._conn.transaction():
            return self.version(), self.quotas()

    def alter(self, changes: Sequence[tuple[Entity, Sequence[tuple[str, float, bool]]]], *,
              validate_only: bool = False) -> list[InvalidQuota | None]:
        """Apply AlterClientQuotas entries (entity, ops of (key, value, remove)); per entry, its error or None.

        An entry with a bad op changes nothing of that entry (Kafka's rule); the others are applied together.
        """
        results: list[InvalidQuota | None] = []
        changed = False
        with self._conn.transaction():
            self._conn.execute("SELECT 1 FROM clusters WHERE cluster_id = %s FOR UPDATE", (self.store.cluster_id,))
            current = self.quotas()
            for kind, ops in changes:
                try:
                    values = altered(current, kind, ops)
                except InvalidQuota as exc:
                    results.append(exc)
                    continue
                results.append(None)
                if validate_only or values == current.get(kind, {}):
                    continue
                current[kind] = values
                document = Jsonb(dict(kind))
                self._conn.execute("DELETE FROM client_quotas WHERE cluster_id = %s AND entity = %s",
                                   (self.store.cluster_id, document))
                with self._conn.cursor() as cur:
                    cur.executemany("INSERT INTO client_quotas (cluster_id, entity, key, value)"
                                    " VALUES (%s, %s, %s, %s)",
                                    [(self.store.cluster_id, document, k, v) for k, v in values.items()])
                changed = True
            if changed:
                self._conn.execute("UPDATE clusters SET quota_version = quota_version + 1 WHERE cluster_id = %s",
                                   (self.store.cluster_id,))
                self.store._changed()
        return results
