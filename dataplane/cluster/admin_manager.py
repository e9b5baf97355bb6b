"""The admin manager: every metadata write the admin APIs make, and the re-read that makes it visible here.

Kafka's ``ZkAdminManager`` / ``ControllerApis`` role. Handlers for CreateTopics,
DeleteTopics, CreatePartitions, AlterConfigs, IncrementalAlterConfigs, the ACL and
SCRAM APIs, AlterClientQuotas, ElectLeaders and AlterPartitionReassignments call
these methods and never touch the metadata store; so the store's write paths have
one owner on the broker, and the refresh that follows each write (topics, security
or quotas, whichever the write changed) cannot be forgotten by a handler.

Owned by the broker (built by its composition root); runs on the broker's event
loop, every store call on the ``StoreThread``'s thread.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from dataplane.cluster.metadata_cache import MetadataCache
from dataplane.cluster.quota_store import QuotaStore
from dataplane.cluster.security_store import SecurityStore
from dataplane.cluster.store import MetadataStore, PartitionChange, TopicState
from dataplane.cluster.store_thread import StoreThread
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.security.authorizer import AclBinding
from dataplane.security.filters import AclFilter
from dataplane.security.quotas import Entity, InvalidQuota
from dataplane.security.scram import ScramCredential


class Refreshers(Protocol):
    """What makes a write visible on this broker: the metadata loop's re-reads (the broker implements them)."""

    async def refresh_topics(self) -> None: ...

    async def refresh_security(self) -> None: ...

    async def refresh_quotas(self) -> None: ...


@dataclass(frozen=True, slots=True)
class TopicDefaults:
    """The broker's settings for topics nobody sized: CreateTopics with -1, and auto-creation."""

    num_partitions: int
    replication_factor: int
    auto_create: bool


@dataclass(frozen=True, slots=True)
class InternalTopic:
    """An internal topic made on first need (``__consumer_offsets``, ``__transaction_state``)."""

    name: str
    partitions: int
    replication_factor: int  # capped at the live brokers when made, as Kafka does
    configs: Mapping[str, str]
    min_insync: Callable[[int], str] | None = None  # min.insync.replicas from the replication it got


class AdminManager:
    """Metadata writes for the admin APIs, each followed by the re-read that shows it on this broker."""

    def __init__(self, db: StoreThread, metadata: MetadataCache, refreshers: Refreshers,
                 defaults: TopicDefaults) -> None:
        self._db = db
        self._metadata = metadata
        self._refresh = refreshers
        self.defaults = defaults
        self._producer_ids: range = range(0)
        self._producer_id_lock = asyncio.Lock()

    @property
    def _store(self) -> MetadataStore:
        return self._db.store

    # ------------------------------------------------------------------ topics

    async def refresh_topics(self) -> None:
        """Re-read topics (a caller about to answer from the cache after another broker's change)."""
        await self._refresh.refresh_topics()

    async def create_topic(self, name: str, partitions: int, replication_factor: int,
                           configs: Mapping[str, Any] | None = None, *, validate_only: bool = False,
                           assignments: list[list[int]] | None = None, refresh: bool = True) -> TopicState:
        """Create a topic; with ``refresh`` (the default) this broker re-reads topics at once.

        A caller creating many (CreateTopics with a thousand topics) passes ``refresh=False`` and calls
        ``refresh_topics`` once: each refresh reads every topic, so one per topic made a large request quadratic.
        """
        topic: TopicState = await self._db.call(
            self._store.create_topic, name, partitions, replication_factor, self._metadata.live_node_ids(),
            racks=self._metadata.live_racks(), configs=configs, assignments=assignments, dry_run=validate_only)
        if refresh and not validate_only:
            await self._refresh.refresh_topics()
        return topic

    async def topic_or_autocreate(self, name: str, *, may_create: bool = True) -> TopicState | None:
        """The topic, auto-created when ``auto.create.topics.enable`` and the caller ``may_create`` it
        (None when absent or invalid).

        A topic this broker has not heard of may have been created through another
        one a moment ago: the metadata is re-read before creating or giving up.
        """
        topic = self._metadata.topic(name)
        if topic is not None:
            return topic
        await self._refresh.refresh_topics()
        topic = self._metadata.topic(name)
        if topic is not None or not self.defaults.auto_create or not may_create:
            return topic
        try:
            return await self.create_topic(name, self.defaults.num_partitions, self.defaults.replication_factor)
        except KafkaError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
            await self._refresh.refresh_topics()
            return self._metadata.topic(name)

    async def ensure_internal_topic(self, wanted: InternalTopic) -> TopicState:
        """An internal topic, created on first need (replication capped at the live brokers)."""
        topic = self._metadata.topic(wanted.name)
        if topic is not None:
            return topic
        brokers = self._metadata.live_node_ids()
        replication = min(wanted.replication_factor, len(brokers))
        configs = dict(wanted.configs)
        if wanted.min_insync is not None:
            configs["min.insync.replicas"] = wanted.min_insync(replication)
        try:
            await self._db.call(self._store.create_topic, wanted.name, wanted.partitions, replication, brokers,
                                racks=self._metadata.live_racks(), configs=configs, internal=True)
        except KafkaError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
        await self._refresh.refresh_topics()
        return self._metadata.topics[wanted.name]

    async def delete_topic(self, name: str | None = None, *, topic_id: uuid.UUID | None = None) -> TopicState:
        """Delete one topic (by name or id); the caller refreshes once for a whole request."""
        topic: TopicState = await self._db.call(self._store.delete_topic, name, topic_id=topic_id)
        return topic

    async def create_partitions(self, name: str, count: int, *, assignments: Sequence[Sequence[int]] | None,
                                validate_only: bool) -> TopicState:
        """Grow one topic; the caller refreshes once for a whole request."""
        topic: TopicState = await self._db.call(self._store.create_partitions, name, count,
                                                self._metadata.live_node_ids(), assignments=assignments,
                                                dry_run=validate_only)
        return topic

    # ------------------------------------------------------------------ configs

    async def alter_topic_configs(self, name: str, change: Callable[[Mapping[str, str]], Mapping[str, object]], *,
                                  validate_only: bool) -> dict[str, str]:
        found: dict[str, str] = await self._db.call(self._store.alter_topic_configs, name, change,
                                                    dry_run=validate_only)
        return found

    async def alter_cluster_configs(self, change: Callable[[Mapping[str, str]], Mapping[str, object]], *,
                                    validate_only: bool) -> dict[str, str]:
        found: dict[str, str] = await self._db.call(self._store.alter_cluster_configs, change,
                                                    dry_run=validate_only)
        return found

    async def alter_broker_configs(self, node_id: int, change: Callable[[Mapping[str, str]], Mapping[str, str]], *,
                                   validate_only: bool) -> dict[str, str]:
        found: dict[str, str] = await self._db.call(self._store.alter_broker_configs, node_id, change,
                                                    dry_run=validate_only)
        return found

    # ------------------------------------------------------------------ the controller's partition changes

    async def apply_partition_changes(self, node_id: int, changes: Sequence[PartitionChange]) -> None:
        """Leader elections asked for by ElectLeaders, fenced by the controller epoch this broker knows."""
        await self._db.call(self._store.apply_partition_changes, node_id, self._metadata.controller_epoch, changes)

    async def reassign(self, node_id: int, topic: str, partition: int, target: Sequence[int] | None) -> None:
        """Start (or, with no target, cancel) one partition move; the controller loop completes it."""
        await self._db.call(self._store.reassign, node_id, self._metadata.controller_epoch, topic, partition,
                            target)

    # ------------------------------------------------------------------ security

    async def create_acls(self, bindings: Sequence[AclBinding]) -> None:
        await self._db.call(SecurityStore(self._store).create_acls, bindings)
        await self._refresh.refresh_security()

    async def delete_acls(self, filters: Sequence[AclFilter]) -> list[list[AclBinding]]:
        """Per filter, the bindings it deleted."""
        matched: list[list[AclBinding]] = await self._db.call(SecurityStore(self._store).delete_acls, filters)
        await self._refresh.refresh_security()
        return matched

    async def alter_scram_credentials(self, upsertions: Iterable[tuple[str, str, ScramCredential]],
                                      deletions: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
        """KIP-554 changes in one transaction; the deletions that found nothing."""
        missing: set[tuple[str, str]] = await self._db.call(SecurityStore(self._store).alter_scram_credentials,
                                                            list(upsertions), list(deletions))
        await self._refresh.refresh_security()
        return missing

    async def scram_mechanisms(self, usernames: Sequence[str] | None) -> dict[str, list[tuple[str, int]]]:
        found: dict[str, list[tuple[str, int]]] = await self._db.call(SecurityStore(self._store).scram_mechanisms,
                                                                      usernames)
        return found

    async def refresh_security(self) -> None:
        await self._refresh.refresh_security()

    # ------------------------------------------------------------------ quotas

    async def alter_quotas(self, changes: Sequence[tuple[Entity, Sequence[tuple[str, float, bool]]]], *,
                           validate_only: bool) -> list[InvalidQuota | None]:
        """AlterClientQuotas entries; per entry, its error or None."""
        outcomes: list[InvalidQuota | None] = await self._db.call(QuotaStore(self._store).alter, changes,
                                                                  validate_only=validate_only)
        if not validate_only:
            await self._refresh.refresh_quotas()
        return outcomes

    # ------------------------------------------------------------------ producer ids

    async def next_producer_id(self) -> int:
        """A cluster-unique producer id, from blocks the metadata store hands out."""
        async with self._producer_id_lock:
            if not self._producer_ids:
                self._producer_ids = await self._db.call(self._store.allocate_producer_ids)
            producer_id = self._producer_ids[0]
            self._producer_ids = self._producer_ids[1:]
            return producer_id

