"""ACL bindings and SASL credentials in the cluster's metadata schema (migration 0004).

Writes go through the same transaction discipline as the rest of the store: one
transaction, ``_changed(security=True)`` inside it (metadata and security
versions bumped, NOTIFY at commit), so brokers re-read ACLs and credentials on
the next notification or timer tick.

Functions the control plane calls (through a ``MetadataStore`` of its own):
``set_plain_credential(username, password_sha256)`` / ``delete_plain_credential``
for SASL/PLAIN (the SHA-256 hex of an API key's secret, never the secret), and
``set_scram_credential`` for SCRAM credentials it derived when the key was made,
and ``apply_credentials`` to change many in one transaction. Each credential may
name the principal it authenticates as (an API key acts as its owner).
ACLs and SCRAM credentials can also be written through the Kafka admin API
(CreateAcls, DeleteAcls, AlterUserScramCredentials), which lands here.

Not thread-safe, like the ``MetadataStore`` it wraps.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import cast

import psycopg

from dataplane.cluster.store import MetadataStore
from dataplane.security.acl import AclOperation, AclPermission, PatternType, ResourceType
from dataplane.security.authorizer import AclBinding
from dataplane.security.filters import AclFilter
from dataplane.security.sasl import PLAIN, Credentials
from dataplane.security.scram import ScramCredential

_UPSERT_SCRAM = (
    "INSERT INTO scram_credentials (cluster_id, username, mechanism, salt, iterations, stored_key, server_key,"
    " principal) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (cluster_id, username, mechanism)"
    " DO UPDATE SET salt = EXCLUDED.salt, iterations = EXCLUDED.iterations, stored_key = EXCLUDED.stored_key,"
    " server_key = EXCLUDED.server_key, principal = EXCLUDED.principal")
_ACL_COLUMNS = "resource_type, resource_name, pattern_type, principal, host, operation, permission"


def _binding(row: tuple[object, ...]) -> AclBinding:
    rtype, name, pattern, principal, host, op, permission = row
    return AclBinding(ResourceType(int(str(rtype))), str(name), PatternType(int(str(pattern))), str(principal),
                      str(host), AclOperation(int(str(op))), AclPermission(int(str(permission))))


def _values(b: AclBinding) -> tuple[int, str, int, str, str, int, int]:
    return (int(b.resource_type), b.resource_name, int(b.pattern_type), b.principal, b.host, int(b.operation),
            int(b.permission))


class SecurityStore:
    """The security tables of one cluster, through ``store``'s connection (and its thread)."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    @property
    def _conn(self) -> psycopg.Connection[tuple[object, ...]]:
        return self.store.conn

    # ------------------------------------------------------------------ ACLs

    def acls(self) -> list[AclBinding]:
        rows = self._conn.execute(f"SELECT {_ACL_COLUMNS} FROM acls WHERE cluster_id = %s",
                                  (self.store.cluster_id,)).fetchall()
        return [_binding(row) for row in rows]

    def create_acls(self, bindings: Sequence[AclBinding]) -> None:
        """Add bindings (one that exists already is no change, as in Kafka)."""
        if not bindings:
            return
        with self._conn.transaction():
            with self._conn.cursor() as cur:
                cur.executemany(f"INSERT INTO acls (cluster_id, {_ACL_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
                                " ON CONFLICT DO NOTHING",
                                [(self.store.cluster_id, *_values(b)) for b in bindings])
            self.store._changed(security=True)

    def delete_acls(self, filters: Sequence[AclFilter]) -> list[list[AclBinding]]:
        """Delete every binding some filter matches; returns, per filter, the bindings it matched."""
        with self._conn.transaction():
            self._conn.execute("SELECT 1 FROM clusters WHERE cluster_id = %s FOR UPDATE", (self.store.cluster_id,))
            existing = self.acls()
            matched = [[b for b in existing if f.matches(b)] for f in filters]
            doomed = list(dict.fromkeys(b for found in matched for b in found))
            if doomed:
                with self._conn.cursor() as cur:
                    cur.executemany(
                        "DELETE FROM acls WHERE cluster_id = %s AND resource_type = %s AND resource_name = %s"
                        " AND pattern_type = %s AND principal = %s AND host = %s AND operation = %s"
                        " AND permission = %s", [(self.store.cluster_id, *_values(b)) for b in doomed])
                self.store._changed(security=True)
        return matched

    # ------------------------------------------------------------------ credentials

    def credentials(self) -> Credentials:
        cluster = (self.store.cluster_id,)
        plain = self._conn.execute("SELECT username, password_sha256, principal FROM plain_credentials"
                                   " WHERE cluster_id = %s", cluster).fetchall()
        scram = self._conn.execute("SELECT username, mechanism, salt, iterations, stored_key, server_key, principal"
                                   " FROM scram_credentials WHERE cluster_id = %s", cluster).fetchall()
        principals = {(str(u), PLAIN): str(p) for u, _, p in plain if p is not None}
        principals.update({(str(u), str(m)): str(p) for u, m, *_, p in scram if p is not None})
        return Credentials(
            plain={str(u): str(h) for u, h, _ in plain},
            scram={(str(u), str(m)): ScramCredential(cast(bytes, salt), int(str(i)), cast(bytes, stored),
                                                     cast(bytes, server))
                   for u, m, salt, i, stored, server, _ in scram},
            principals=principals)

    def set_plain_credential(self, username: str, password_sha256: str, principal: str | None = None) -> None:
        """SASL/PLAIN for ``username``: the SHA-256 hex digest of its password (the control plane's key hash).

        ``principal``: who the user is once authenticated (None: ``User:<username>``).
        """
        self.apply_credentials(plain=[(username, password_sha256, principal)])

    def delete_plain_credential(self, username: str) -> bool:
        with self._conn.transaction():
            row = self._conn.execute("DELETE FROM plain_credentials WHERE cluster_id = %s AND username = %s"
                                     " RETURNING 1", (self.store.cluster_id, username)).fetchone()
            if row is not None:
                self.store._changed(security=True)
        return row is not None

    def apply_credentials(self, *, plain: Sequence[tuple[str, str, str | None]] = (),
                          scram: Sequence[tuple[str, str, ScramCredential, str | None]] = (),
                          delete_plain: Sequence[str] = (),
                          delete_scram: Sequence[tuple[str, str]] = ()) -> None:
        """Upsert and delete credentials in one transaction and one notification (the control plane's reconcile).

        ``plain``: (username, password SHA-256 hex, principal); ``scram``: (username, mechanism, credential,
        principal); a principal of None means ``User:<username>``.
        """
        if not (plain or scram or delete_plain or delete_scram):
            return
        cluster_id = self.store.cluster_id
        with self._conn.transaction():
            with self._conn.cursor() as cur:
                if delete_plain:
                    cur.execute("DELETE FROM plain_credentials WHERE cluster_id = %s AND username = ANY(%s)",
                                (cluster_id, list(delete_plain)))
                if delete_scram:
                    cur.executemany("DELETE FROM scram_credentials WHERE cluster_id = %s AND username = %s"
                                    " AND mechanism = %s", [(cluster_id, u, m) for u, m in delete_scram])
                if plain:
                    cur.executemany(
                        "INSERT INTO plain_credentials (cluster_id, username, password_sha256, principal)"
                        " VALUES (%s, %s, %s, %s) ON CONFLICT (cluster_id, username) DO UPDATE SET"
                        " password_sha256 = EXCLUDED.password_sha256, principal = EXCLUDED.principal",
                        [(cluster_id, u, h, p) for u, h, p in plain])
                if scram:
                    cur.executemany(
                        _UPSERT_SCRAM, [(cluster_id, u, m, c.salt, c.iterations, c.stored_key, c.server_key, p)
                                        for u, m, c, p in scram])
            self.store._changed(security=True)

    def alter_scram_credentials(self, upsertions: Iterable[tuple[str, str, ScramCredential]],
                                deletions: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
        """Apply KIP-554 changes in one transaction; returns the deletions that found nothing.

        A credential set this way authenticates as ``User:<username>`` (Kafka's rule).
        """
        missing = set()
        changed = False
        with self._conn.transaction():
            for username, mechanism in deletions:
                row = self._conn.execute("DELETE FROM scram_credentials WHERE cluster_id = %s AND username = %s"
                                         " AND mechanism = %s RETURNING 1",
                                         (self.store.cluster_id, username, mechanism)).fetchone()
                if row is None:
                    missing.add((username, mechanism))
                changed = changed or row is not None
            for username, mechanism, c in upsertions:
                self._conn.execute(_UPSERT_SCRAM, (self.store.cluster_id, username, mechanism, c.salt, c.iterations,
                                                   c.stored_key, c.server_key, None))
                changed = True
            if changed:
                self.store._changed(security=True)
        return missing

    def set_scram_credential(self, username: str, mechanism: str, credential: ScramCredential,
                             principal: str | None = None) -> None:
        self.apply_credentials(scram=[(username, mechanism, credential, principal)])

    def scram_mechanisms(self, usernames: Sequence[str] | None) -> dict[str, list[tuple[str, int]]]:
        """Per user, (mechanism, iterations) of each SCRAM credential (DescribeUserScramCredentials)."""
        rows = self._conn.execute(
            "SELECT username, mechanism, iterations FROM scram_credentials WHERE cluster_id = %s"
            " AND (%s::text[] IS NULL OR username = ANY(%s::text[])) ORDER BY username, mechanism",
            (self.store.cluster_id, None if usernames is None else list(usernames),
             None if usernames is None else list(usernames))).fetchall()
        found: dict[str, list[tuple[str, int]]] = {}
        for user, mechanism, iterations in rows:
            found.setdefault(str(user), []).append((str(mechanism), int(str(iterations))))
        return found
