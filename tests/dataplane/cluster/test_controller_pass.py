"""The controller's pass against real Postgres: it reads every partition only when the live brokers or the
metadata version moved since its last pass, and then decides as before."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from typing import Any

from dataplane.cluster.controller import elect_leaders_for_liveness
from dataplane.cluster.store import BrokerRegistration, MetadataStore
from tests.dataplane.cluster.test_store import store  # noqa: F401  (the fixture)


def _counting(method: Callable[[], Any]) -> tuple[Callable[[], Any], list[int]]:
    calls: list[int] = []

    def counted() -> Any:
        calls.append(1)
        return method()
    return counted, calls


def test_a_pass_is_skipped_until_a_lease_lapses_or_the_metadata_moves(store: MetadataStore) -> None:  # noqa: F811
    incarnations = {node: uuid.uuid4() for node in (1, 2)}
    for node, incarnation in incarnations.items():
        store.register_broker(BrokerRegistration(node, "127.0.0.1", 9000 + node, None, incarnation), 30)
    store.create_topic("t", 4, 2, [1, 2], rng=random.Random(3))
    holder, epoch = store.acquire_controller(1, 30)
    assert holder == 1
    store.topics, reads = _counting(store.topics)  # type: ignore[method-assign]

    changed, seen = elect_leaders_for_liveness(store, 1, epoch)
    assert (changed, len(reads), seen.live) == (0, 1, frozenset({1, 2}))
    assert elect_leaders_for_liveness(store, 1, epoch, seen) == (0, seen) and len(reads) == 1  # nothing moved

    store.create_topic("u", 1, 1, [1])  # a metadata write: the next pass reads again
    changed, seen = elect_leaders_for_liveness(store, 1, epoch, seen)
    assert (changed, len(reads)) == (0, 2)

    store.unregister_broker(2, incarnations[2])  # broker 2 is gone: its leaderships and ISR places move
    changed, after = elect_leaders_for_liveness(store, 1, epoch, seen)
    assert len(reads) == 3 and after.live == frozenset({1}) and changed == 4
    found = store.topic("t")
    assert found is not None and all(p.leader == 1 and p.isr == (1,) for p in found.partitions)
    # Its own writes bumped the version: one more pass finds nothing to do, the one after is skipped.
    changed, settled = elect_leaders_for_liveness(store, 1, epoch, after)
    assert (changed, len(reads)) == (0, 4)
    assert elect_leaders_for_liveness(store, 1, epoch, settled) == (0, settled) and len(reads) == 4
