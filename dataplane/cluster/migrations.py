"""The dataplane's own schema migrations: numbered SQL files applied in order.

Each file runs in one transaction together with its row in
``schema_migrations``; a transaction-scoped advisory lock keyed on the schema
name lets many brokers start at once and apply each file exactly once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

import psycopg
from psycopg import sql

DEFAULT_SCHEMA = "sluice_meta"
_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}\Z")


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


def available_migrations() -> list[Migration]:
    """The migrations shipped with this package, in version order."""
    found: list[Migration] = []
    for entry in resources.files("dataplane.cluster").joinpath("migrations").iterdir():
        match = _FILE.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), match.group(2), entry.read_text()))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migration versions must be 1..n without gaps, found {versions}")
    return found


def validate_schema_name(schema: str) -> str:
    if not _SCHEMA_NAME.match(schema):
        raise ValueError(f"invalid schema name {schema!r}: use lowercase letters, digits and '_'")
    return schema


def applied_versions(conn: psycopg.Connection[tuple[object, ...]], schema: str = DEFAULT_SCHEMA) -> list[int]:
    validate_schema_name(schema)
    exists = conn.execute("SELECT to_regclass(%s)", (f"{schema}.schema_migrations",)).fetchone()
    if exists is None or exists[0] is None:
        return []
    rows = conn.execute(sql.SQL("SELECT version FROM {}.schema_migrations ORDER BY version")
                        .format(sql.Identifier(schema))).fetchall()
    return [int(str(row[0])) for row in rows]


def migrate(conninfo: str, schema: str = DEFAULT_SCHEMA) -> list[int]:
    """Apply every pending migration; return the versions this call applied."""
    validate_schema_name(schema)
    applied_now: list[int] = []
    ident = sql.Identifier(schema)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        for migration in available_migrations():
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"sluice-migrate:{schema}",))
                conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(ident))
                conn.execute(sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {}.schema_migrations ("
                    " version integer PRIMARY KEY, name text NOT NULL,"
                    " applied_at timestamptz NOT NULL DEFAULT now())").format(ident))
                done = conn.execute(sql.SQL("SELECT 1 FROM {}.schema_migrations WHERE version = %s")
                                    .format(ident), (migration.version,)).fetchone()
                if done:
                    continue
                conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(ident))
                conn.execute(migration.sql.encode())
                conn.execute(sql.SQL("INSERT INTO {}.schema_migrations (version, name) VALUES (%s, %s)")
                             .format(ident), (migration.version, migration.name))
                applied_now.append(migration.version)
    return applied_now
