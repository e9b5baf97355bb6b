"""The metadata schema's migrations against the real Postgres of the test session."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from dataplane.cluster.migrations import applied_versions, available_migrations, migrate, validate_schema_name


@pytest.fixture
def schema() -> Iterator[str]:
    name = f"meta_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def test_migrate_applies_everything_once(schema: str) -> None:
    url = os.environ["DATABASE_URL"]
    everything = [m.version for m in available_migrations()]
    assert migrate(url, schema) == everything
    assert migrate(url, schema) == []
    with psycopg.connect(url) as conn:
        assert applied_versions(conn, schema) == everything


def test_concurrent_migrations_apply_each_file_once(schema: str) -> None:
    url = os.environ["DATABASE_URL"]
    results: list[list[int]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def run() -> None:
        start.wait()
        try:
            results.append(migrate(url, schema))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(v for applied in results for v in applied) == [m.version for m in available_migrations()]


def test_schema_constraints_hold(schema: str) -> None:
    url = os.environ["DATABASE_URL"]
    migrate(url, schema)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        conn.execute("INSERT INTO clusters (cluster_id) VALUES ('c1')")
        topic = uuid.uuid4()
        conn.execute("INSERT INTO topics (topic_id, cluster_id, name, collision_key) VALUES (%s, 'c1', 'a.b', 'a_b')",
                     (topic,))
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute("INSERT INTO topics (topic_id, cluster_id, name, collision_key) "
                         "VALUES (%s, 'c1', 'a_b', 'a_b')", (uuid.uuid4(),))
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("INSERT INTO topics (topic_id, cluster_id, name, collision_key) "
                         "VALUES (%s, 'c1', 'bad name', 'bad name')", (uuid.uuid4(),))
        # ISR must be a subset of the replicas, and the leader one of them.
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("INSERT INTO partitions (topic_id, partition, replicas, isr, leader) "
                         "VALUES (%s, 0, '{1,2}', '{1,3}', 1)", (topic,))
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("INSERT INTO partitions (topic_id, partition, replicas, isr, leader) "
                         "VALUES (%s, 0, '{1,2}', '{1}', 5)", (topic,))
        conn.execute("INSERT INTO partitions (topic_id, partition, replicas, isr, leader) "
                     "VALUES (%s, 0, '{1,2}', '{1}', -1)", (topic,))
        conn.execute("DELETE FROM clusters WHERE cluster_id = 'c1'")
        assert conn.execute("SELECT count(*) FROM partitions").fetchone() == (0,)


@pytest.mark.parametrize("bad", ["", "Upper", "has-dash", "x" * 64, "a;drop", "1starts_with_digit", "trailing\n"])
def test_schema_names_are_validated(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid schema name"):
        validate_schema_name(bad)
