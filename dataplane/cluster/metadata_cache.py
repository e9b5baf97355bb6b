"""This broker's view of the cluster's metadata: topics and partitions, live brokers, the controller.

Every request handler reads it (Metadata, DescribeCluster, leader lookups,
configs), so they agree with each other, and none reads Postgres per request.
It is refreshed from the metadata store by the broker's metadata loop (woken by
NOTIFY, and on a timer in case a notification was missed), by the lease
heartbeat (live brokers), by the controller loop (the controller), and patched
at once by this broker's own writes (an ISR change it made).

Owned by the broker; read and written on its event loop only.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Mapping

from dataplane.cluster.store import BrokerRegistration, PartitionState, TopicState
from dataplane.protocol.errors import ErrorCode, KafkaError


class MetadataCache:
    def __init__(self, local: BrokerRegistration) -> None:
        self.local = local  # this broker: alive whatever its lease says, since it is answering
        self.version = -1  # the store's metadata version this view was read at
        self.topics: dict[str, TopicState] = {}
        self._names: dict[uuid.UUID, str] = {}  # topic id -> name (Fetch v13+ names topics by id)
        self.cluster_defaults: dict[str, str] = {}  # cluster-wide topic config defaults
        self.broker_configs: dict[int, dict[str, str]] = {}  # dynamic broker configs by node id (-1: default)
        self._brokers: dict[int, BrokerRegistration] = {}
        self.controller_id = -1
        self.controller_epoch = 0

    @property
    def node_id(self) -> int:
        return self.local.node_id

    # ------------------------------------------------------------------ updates

    def config_changes(self, topics: Iterable[TopicState], defaults: Mapping[str, str]) -> list[TopicState]:
        """Which of a fresh read's topics have effective configs other than the cached ones (or are new)."""
        defaults_changed = dict(defaults) != self.cluster_defaults
        return [t for t in topics
                if defaults_changed or (old := self.topics.get(t.name)) is None or old.configs != t.configs]

    def update_topics(self, version: int, topics: Iterable[TopicState], defaults: Mapping[str, str]) -> None:
        """Take a fresh read of every topic."""
        self.topics = {t.name: t for t in topics}
        self._names = {t.topic_id: t.name for t in self.topics.values()}
        self.cluster_defaults = dict(defaults)
        self.version = version

    def update_broker_configs(self, configs: Mapping[int, Mapping[str, str]]) -> None:
        self.broker_configs = {node: dict(values) for node, values in configs.items()}

    def dynamic_broker_config(self, name: str, node_id: int | None = None) -> str | None:
        """A dynamic broker config in force on ``node_id`` (this broker by default): its own, else the default."""
        node = self.node_id if node_id is None else node_id
        own = self.broker_configs.get(node, {}).get(name)
        return own if own is not None else self.broker_configs.get(-1, {}).get(name)

    def update_brokers(self, brokers: Iterable[BrokerRegistration]) -> None:
        self._brokers = {b.node_id: b for b in brokers}

    def update_controller(self, controller_id: int, epoch: int) -> None:
        self.controller_id, self.controller_epoch = controller_id, epoch

    def patch_partition(self, topic_name: str, state: PartitionState) -> None:
        """A partition state this broker just wrote (an ISR change), taken before the next refresh."""
        topic = self.topics.get(topic_name)
        if topic is not None and state.partition < len(topic.partitions) \
                and topic.partitions[state.partition].partition_epoch < state.partition_epoch:
            parts = tuple(state if p.partition == state.partition else p for p in topic.partitions)
            self.topics[topic_name] = dataclasses.replace(topic, partitions=parts)

    # ------------------------------------------------------------------ reads

    def topic(self, name: str) -> TopicState | None:
        return self.topics.get(name)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self._names.get(topic_id)

    def partition(self, topic_name: str, partition: int) -> tuple[TopicState, PartitionState]:
        """Raises UNKNOWN_TOPIC_OR_PARTITION for a topic or partition the cluster does not have."""
        topic = self.topics.get(topic_name)
        if topic is None or not 0 <= partition < len(topic.partitions):
            raise KafkaError(f"This server does not host this topic-partition: {topic_name}-{partition}",
                             code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return topic, topic.partitions[partition]

    def live_brokers(self) -> list[BrokerRegistration]:
        """Every broker with a live lease, and this one, by node id."""
        live = dict(self._brokers)
        live[self.local.node_id] = self.local
        return [live[n] for n in sorted(live)]

    def live_node_ids(self) -> list[int]:
        return sorted({*self._brokers, self.local.node_id})

    def live_racks(self) -> dict[int, str | None]:
        return {b.node_id: b.rack for b in self.live_brokers()}

    def broker_address(self, node_id: int) -> tuple[str, int] | None:
        found = self.local if node_id == self.local.node_id else self._brokers.get(node_id)
        return None if found is None else (found.host, found.port)

    def known_controller(self) -> int:
        """The controller as last seen; this broker when none is known yet (Kafka clients need some id)."""
        return self.controller_id if self.controller_id >= 0 else self.local.node_id
