"""The plan's partition limit: the pure decision as a table, and the store enforcing it (real Postgres)."""

from __future__ import annotations

import os
import threading

import psycopg
import pytest

from dataplane.cluster.partition_limit import refusal
from dataplane.cluster.store import MetadataStore
from dataplane.protocol.errors import ErrorCode, KafkaError
from tests.dataplane.cluster.test_store import store  # noqa: F401  (the fixture)


@pytest.mark.parametrize(("limit", "used", "adding", "refused"), [
    (None, 10_000, 10_000, False),  # no limit set (a plain, unmanaged cluster)
    (100, 0, 100, False),  # exactly at the limit fits
    (100, 99, 1, False),
    (100, 100, 1, True),
    (100, 90, 11, True),
    (100, 177, 1, True),  # already beyond a lowered limit: nothing more
    (1, 0, 1, False),
])
def test_refusal(limit: int | None, used: int, adding: int, refused: bool) -> None:
    why = refusal(limit=limit, used=used, adding=adding)
    assert (why is not None) == refused
    if why is not None:
        assert f"allows {limit} partitions" in why and f"{used} are in use" in why


def _refused(call: object) -> KafkaError:
    with pytest.raises(KafkaError) as caught:
        call()  # type: ignore[operator]
    assert caught.value.code == ErrorCode.POLICY_VIOLATION
    return caught.value


def test_topics_and_partitions_beyond_the_limit_are_refused(store: MetadataStore) -> None:  # noqa: F811
    assert store.set_partition_limit(5) and not store.set_partition_limit(5)
    assert store.partition_limit() == 5
    store.create_topic("__consumer_offsets", 50, 1, [1], internal=True)  # the broker's own: not counted
    store.create_topic("a", 3, 1, [1])
    error = _refused(lambda: store.create_topic("b", 3, 1, [1]))
    assert "allows 5 partitions" in str(error) and "3 are in use" in str(error)
    _refused(lambda: store.create_topic("b", 3, 1, [1], dry_run=True))  # validate_only too
    assert store.topic("b") is None
    _refused(lambda: store.create_partitions("a", 6, [1]))
    _refused(lambda: store.create_partitions("a", 6, [1], dry_run=True))
    store.create_partitions("a", 5, [1])  # up to the limit
    assert len(store.topic("a").partitions) == 5  # type: ignore[union-attr]
    store.set_partition_limit(None)
    store.create_topic("b", 3, 1, [1])


def test_concurrent_creates_do_not_overshoot(store: MetadataStore) -> None:  # noqa: F811
    store.set_partition_limit(10)
    outcomes: list[str] = []
    start = threading.Barrier(6)

    def create(index: int) -> None:
        with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
            mine = MetadataStore(conn, store.cluster_id, store.schema)
            start.wait()
            try:
                mine.create_topic(f"t{index}", 3, 1, [1])
                outcomes.append("created")
            except KafkaError as exc:
                assert exc.code == ErrorCode.POLICY_VIOLATION
                outcomes.append("refused")

    threads = [threading.Thread(target=create, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["created"] * 3 + ["refused"] * 3
    assert sum(len(t.partitions) for t in store.topics() if not t.internal) == 9
