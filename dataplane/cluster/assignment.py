"""Replica assignment for new partitions: Kafka's AdminUtils.assignReplicasToBrokers.

Without racks it is Kafka's rack-unaware round robin over the sorted brokers.
When every broker declares a rack it is Kafka's rack-aware variant: brokers are
ordered one rack at a time (``rack_alternated``), leaders go round robin over
that order, and each follower takes the next broker on a rack (then a broker)
that holds no replica of the partition yet. Only some brokers declaring a rack
is an error, unless ``ignore_missing_racks`` asks for the rack-unaware layout
(Kafka's RackAwareMode.Safe, as used for auto-created topics).

Pure function of its inputs (``start_index``/``shift`` are chosen at random by
callers, fixed by tests), so it is checked by properties: every partition gets
``replication_factor`` distinct brokers; leaders go round robin, so over a
multiple of the broker count each broker leads equally often; with racks, a
partition's replicas are on ``min(replication_factor, racks)`` distinct racks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


class AssignmentError(ValueError):
    """The request cannot be placed on these brokers (Kafka: INVALID_REPLICATION_FACTOR)."""


def assign_replicas(brokers: Sequence[int], partitions: int, replication_factor: int, *,
                    start_index: int = 0, shift: int = 0, first_partition: int = 0,
                    racks: Mapping[int, str | None] | None = None,
                    ignore_missing_racks: bool = False) -> list[list[int]]:
    """Replica lists for partitions ``first_partition ..`` (the first replica is the preferred leader).

    With ``racks`` (broker -> rack) where any broker has one, every broker must
    have one and replicas spread over racks (``_rack_aware``); otherwise, or if
    some lack one and ``ignore_missing_racks`` is set, Kafka's rack-unaware placement.
    """
    ordered = sorted(set(brokers))
    count = len(ordered)
    if partitions < 1:
        raise AssignmentError(f"number of partitions must be at least 1, got {partitions}")
    if replication_factor < 1:
        raise AssignmentError(f"replication factor must be at least 1, got {replication_factor}")
    if replication_factor > count:
        raise AssignmentError(
            f"replication factor {replication_factor} is larger than the {count} available brokers")
    known = {b: racks.get(b) for b in ordered} if racks else {}
    if any(rack is not None for rack in known.values()):
        if all(rack is not None for rack in known.values()):
            return _rack_aware({b: str(r) for b, r in known.items()}, partitions, replication_factor,
                               start_index=start_index, shift=shift, first_partition=first_partition)
        if not ignore_missing_racks:
            raise AssignmentError("Not all brokers have rack information for replica rack aware assignment.")
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


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Brokers ordered one per rack in turn (racks and brokers sorted): Kafka's getRackAlternatedBrokerList."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    queues = [by_rack[rack] for rack in sorted(by_rack)]
    result: list[int] = []
    depth = 0
    while len(result) < len(racks):
        result += [queue[depth] for queue in queues if depth < len(queue)]
        depth += 1
    return result


def _rack_aware(racks: Mapping[int, str], partitions: int, replication_factor: int, *, start_index: int,
                shift: int, first_partition: int) -> list[list[int]]:
    """Kafka's assignReplicasToBrokersRackAware: a rack takes a second replica only once every rack has one."""
    arranged = rack_alternated(racks)
    count, rack_count = len(arranged), len(set(racks.values()))
    result: list[list[int]] = []
    next_shift = shift  # not reduced mod count: it is multiplied by rack_count before the mod (count - 1)
    for partition in range(first_partition, first_partition + partitions):
        if partition > 0 and partition % count == 0:
            next_shift += 1
        first = (partition + start_index) % count
        replicas = [arranged[first]]
        used_racks = {racks[arranged[first]]}
        k = 0
        while len(replicas) < replication_factor:
            step = 1 + (next_shift * rack_count + k) % (count - 1)
            broker = arranged[(first + step) % count]
            k += 1
            rack = racks[broker]
            if (rack not in used_racks or len(used_racks) == rack_count) and \
                    (broker not in replicas or len(replicas) == count):
                replicas.append(broker)
                used_racks.add(rack)
        result.append(replicas)
    return result
