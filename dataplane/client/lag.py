"""Consumer lag of a group: committed offset, log end offset and lag per partition.

What ``kafka-consumer-groups --describe`` prints, as a library call for the
control plane and the console. It speaks the Kafka protocol through
confluent-kafka's AdminClient (DescribeGroups, OffsetFetch, ListOffsets), so it
works against any broker of the cluster and honours the same ACLs as any other
client; ``compute_lag`` is the pure part.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Owner:
    member_id: str
    client_id: str
    host: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionLag:
    topic: str
    partition: int
    committed_offset: int | None  # None: the group never committed here
    log_end_offset: int
    lag: int | None  # None without a commit (the consumer's auto.offset.reset decides where it starts)
    metadata: str = ""
    owner: Owner | None = None


@dataclass(frozen=True, slots=True)
class GroupLag:
    group_id: str
    state: str
    partitions: tuple[PartitionLag, ...]

    @property
    def total_lag(self) -> int:
        return sum(p.lag for p in self.partitions if p.lag is not None)


class LagError(RuntimeError):
    """The cluster could not answer (unknown group, unreachable brokers, refused by ACLs)."""


def compute_lag(committed: Mapping[TopicPartition, tuple[int, str]], end_offsets: Mapping[TopicPartition, int],
                owners: Mapping[TopicPartition, Owner] | None = None) -> tuple[PartitionLag, ...]:
    """Lag for every partition the group has committed to or owns, sorted by topic and partition.

    A commit past the end (the log was truncated or deleted) counts as lag 0, as Kafka's tool shows it.
    """
    owners = owners or {}
    rows = []
    for tp in sorted(set(committed) | set(owners)):
        end = end_offsets.get(tp, -1)
        offset, metadata = committed.get(tp, (-1, ""))
        has_commit = offset >= 0
        lag = max(0, end - offset) if has_commit and end >= 0 else None
        rows.append(PartitionLag(tp[0], tp[1], offset if has_commit else None, end, lag, metadata, owners.get(tp)))
    return tuple(rows)


def group_lag(bootstrap_servers: str, group_id: str, *, timeout: float = 10.0,
              client_config: Mapping[str, Any] | None = None) -> GroupLag:
    """Ask the cluster for ``group_id``'s lag. Raises LagError when it cannot."""
    admin = AdminClient({"bootstrap.servers": bootstrap_servers, **(client_config or {})})
    try:
        description = admin.describe_consumer_groups([group_id], request_timeout=timeout)[group_id].result()
        listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id)],
                                                   request_timeout=timeout)[group_id].result()
        committed = {(tp.topic, tp.partition): (tp.offset, tp.metadata or "") for tp in listed.topic_partitions
                     if tp.error is None}
        owners: dict[TopicPartition, Owner] = {}
        for member in description.members:
            owner = Owner(member.member_id, member.client_id, member.host, member.group_instance_id)
            for tp in member.assignment.topic_partitions if member.assignment else ():
                owners[(tp.topic, tp.partition)] = owner
        wanted = set(committed) | set(owners)
        ends: dict[TopicPartition, int] = {}
        if wanted:
            latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
            futures = admin.list_offsets({KafkaTopicPartition(t, p): latest for t, p in wanted},
                                         request_timeout=timeout)
            for tp, future in futures.items():
                ends[(tp.topic, tp.partition)] = future.result().offset
    except KafkaException as exc:
        raise LagError(f"lag of group {group_id!r}: {exc.args[0].str() if exc.args else exc}") from exc
    state = getattr(description.state, "name", str(description.state))
    return GroupLag(group_id, _state_name(state), compute_lag(committed, ends, owners))


def _state_name(state: str) -> str:
    """confluent-kafka's enum names (COMPLETING_REBALANCE) as Kafka's protocol spells states."""
    return {"EMPTY": "Empty", "PREPARING_REBALANCE": "PreparingRebalance",
            "COMPLETING_REBALANCE": "CompletingRebalance", "STABLE": "Stable", "DEAD": "Dead"}.get(state, state)

