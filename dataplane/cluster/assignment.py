"""Replica assignment for new partitions: Kafka's rack-unaware round robin.

Pure function of its inputs (``start_index``/``shift`` are chosen at random by
callers, fixed by tests), so it is checked by properties: every partition gets
``replication_factor`` distinct brokers, and leaders and replicas are spread so
no broker holds more than one more than any other.
"""

from __future__ import annotations

from collections.abc import Sequence


class AssignmentError(ValueError):
    """The request cannot be placed on these brokers (Kafka: INVALID_REPLICATION_FACTOR)."""


def assign_replicas(brokers: Sequence[int], partitions: int, replication_factor: int, *,
                    start_index: int = 0, shift: int = 0, first_partition: int = 0,
                    racks: object = None) -> list[list[int]]:
    """Replica lists for partitions ``first_partition ..`` (the first replica is the preferred leader)."""
    ordered = sorted(set(brokers))
    count = len(ordered)
    if partitions < 1:
        raise AssignmentError(f"number of partitions must be at least 1, got {partitions}")
    if replication_factor < 1:
        raise AssignmentError(f"replication factor must be at least 1, got {replication_factor}")
    if replication_factor > count:
        raise AssignmentError(
            f"replication factor {replication_factor} is larger than the {count} available brokers")
    result: list[list[int]] = []
    next_shift = shift % count
    for partition in range(first_partition, first_partition + partitions):
        if partition > 0 and partition % count == 0:
            next_shift += 1
        first = (partition + start_index) % count
        replicas = [ordered[first]]
        for j in range(replication_factor - 1):
            step = 1 + (next_shift + j) % (count - 1)
            replicas.append(ordered[(first + step) % count])
        result.append(replicas)
    return result
