"""The coordinators' host: what the group and transaction coordinators need of the broker they run on.

Their internal topics (``__consumer_offsets``, ``__transaction_state``: created on
first need, their logs, appends acknowledged by the whole ISR), producer ids, and
the transaction markers a coordinator asks partition leaders to write: into this
broker's own partitions, or to other brokers over WriteTxnMarkers; and the check
a partition leader makes before a producer's first transactional write (KIP-890
part 1), locally or over AddPartitionsToTxn v4 verify-only.

Built by the broker (the composition root), which hands it to both coordinators
and to the request handlers (``server.owners.CoordinatorHost``); the coordinators
are attached once, before the broker starts, since each is built with this host.
Runs on the broker's event loop; one connection per other broker, one request at
a time on it.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable
from typing import Any

from kio.schema.add_partitions_to_txn.v4.request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from kio.schema.write_txn_markers.v1.request import WritableTxnMarker, WritableTxnMarkerTopic, WriteTxnMarkersRequest
from kio.static.primitive import i16, i32, i64

from dataplane.cluster.admin_manager import AdminManager, InternalTopic
from dataplane.cluster.metadata_cache import MetadataCache
from dataplane.cluster.store import TopicState
from dataplane.coordinator.manager import OFFSETS_TOPIC, OFFSETS_TOPIC_CONFIGS, GroupCoordinator
from dataplane.coordinator.txn_manager import TransactionCoordinator
from dataplane.coordinator.txn_records import TRANSACTION_STATE_CONFIGS, TRANSACTION_STATE_TOPIC
from dataplane.coordinator.txn_state import Markers, TopicPartition
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.replication.manager import ReplicaManager
from dataplane.replication.partition import Role
from dataplane.replication.peer import PeerConnection, PeerError
from dataplane.security.sasl import ClientCredentials
from dataplane.server.config import BrokerConfig
from dataplane.storage import Log

log = logging.getLogger(__name__)


class BrokerCoordinatorHost:
    """The coordinators' side of the broker (see the module docstring)."""

    def __init__(self, config: BrokerConfig, metadata: MetadataCache, replicas: ReplicaManager, admin: AdminManager,
                 *, lease_ok: Callable[[], bool], peer_credentials: ClientCredentials | None,
                 peer_tls: ssl.SSLContext | None) -> None:
        self.config = config
        self.metadata = metadata
        self.replicas = replicas
        self.admin = admin
        self._lease_ok = lease_ok
        self._peer_credentials = peer_credentials
        self._peer_tls = peer_tls
        self._groups: GroupCoordinator | None = None
        self._transactions: TransactionCoordinator | None = None
        # Connections to other brokers for markers and verify-only checks: one per broker, one request at a time.
        self._peers: dict[int, tuple[asyncio.Lock, list[PeerConnection]]] = {}

    def attach(self, groups: GroupCoordinator, transactions: TransactionCoordinator) -> None:
        self._groups, self._transactions = groups, transactions

    @property
    def groups(self) -> GroupCoordinator:
        assert self._groups is not None, "coordinators not attached"
        return self._groups

    @property
    def transactions(self) -> TransactionCoordinator:
        assert self._transactions is not None, "coordinators not attached"
        return self._transactions

    def close(self) -> None:
        for _, conns in self._peers.values():
            for conn in conns:
                conn.close()
        self._peers.clear()

    async def next_producer_id(self) -> int:
        return await self.admin.next_producer_id()

    # ------------------------------------------------------------------ __consumer_offsets (the group coordinator's)

    async def ensure_offsets_topic(self) -> TopicState:
        """``__consumer_offsets``, created on first need as Kafka does (replication capped at live brokers)."""
        return await self.admin.ensure_internal_topic(InternalTopic(
            OFFSETS_TOPIC, self.config.offsets_topic_partitions, self.config.offsets_topic_replication_factor,
            OFFSETS_TOPIC_CONFIGS))

    def offsets_partition_count(self) -> int | None:
        topic = self.metadata.topic(OFFSETS_TOPIC)
        return None if topic is None else len(topic.partitions)

    def leads_offsets_partition(self, partition: int) -> bool:
        found = self.replicas.partition(OFFSETS_TOPIC, partition)
        return found is not None and found.role is Role.LEADER and self._lease_ok()

    def offsets_log(self, partition: int) -> Log:
        return self.replicas.leader_partition(OFFSETS_TOPIC, partition).log

    async def append_offsets(self, partition: int, batch: bytes) -> None:
        """Coordinator writes: appended as leader and acknowledged once the whole ISR has them (acks=all)."""
        found = self.replicas.leader_partition(OFFSETS_TOPIC, partition)
        info = await found.append_as_leader(batch, acks_all=True)
        await found.wait_for_replication(info.last_offset + 1, self.config.offsets_commit_timeout_ms / 1000)

    # ------------------------------------------------------------------ __transaction_state and markers (the
    # transaction coordinator's host)

    async def ensure_txn_topic(self) -> TopicState:
        """``__transaction_state``, created on first need as Kafka does (replication capped at live brokers)."""
        return await self.admin.ensure_internal_topic(InternalTopic(
            TRANSACTION_STATE_TOPIC, self.config.transaction_state_partitions,
            self.config.transaction_state_replication_factor, TRANSACTION_STATE_CONFIGS,
            min_insync=lambda replication: str(min(2, replication))))

    def txn_partition_count(self) -> int | None:
        topic = self.metadata.topic(TRANSACTION_STATE_TOPIC)
        return None if topic is None else len(topic.partitions)

    def leads_txn_partition(self, partition: int) -> bool:
        found = self.replicas.partition(TRANSACTION_STATE_TOPIC, partition)
        return found is not None and found.role is Role.LEADER and self._lease_ok()

    def txn_log(self, partition: int) -> Log:
        return self.replicas.leader_partition(TRANSACTION_STATE_TOPIC, partition).log

    def txn_coordinator_epoch(self, partition: int) -> int:
        found = self.replicas.partition(TRANSACTION_STATE_TOPIC, partition)
        return -1 if found is None else found.leader_epoch

    async def append_txn(self, partition: int, batch: bytes) -> None:
        found = self.replicas.leader_partition(TRANSACTION_STATE_TOPIC, partition)
        info = await found.append_as_leader(batch, acks_all=True)
        await found.wait_for_replication(info.last_offset + 1, self.config.offsets_commit_timeout_ms / 1000)

    async def write_markers(self, markers: Markers, coordinator_epoch: int) -> dict[TopicPartition, ErrorCode]:
        """The coordinator's markers, to each partition's leader: this broker's own, or over WriteTxnMarkers.

        A partition whose topic is gone counts as written (its data went with it), as in Kafka.
        """
        results: dict[TopicPartition, ErrorCode] = {}
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in sorted(markers.partitions):
            topic = self.metadata.topic(tp[0])
            if topic is None or tp[1] >= len(topic.partitions):
                results[tp] = ErrorCode.NONE
                continue
            leader = topic.partitions[tp[1]].leader
            if leader < 0:
                results[tp] = ErrorCode.LEADER_NOT_AVAILABLE
            else:
                by_leader.setdefault(leader, []).append(tp)
        # Every leader at once: a transaction's end costs one round of marker writes, not one per broker.
        for found in await asyncio.gather(*(
                self.write_markers_here(markers.producer_id, markers.producer_epoch, markers.commit,
                                        coordinator_epoch, tps) if leader == self.config.node_id
                else self._markers_to(leader, markers, coordinator_epoch, tps)
                for leader, tps in by_leader.items())):
            results.update(found)
        return results

    async def write_markers_here(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                                 partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """Markers into partitions this broker leads (acks=all); an offsets partition's group coordinator is
        told, so the transaction's offsets become committed (or are dropped)."""
        timeout = self.config.offsets_commit_timeout_ms / 1000

        async def one(topic: str, index: int) -> ErrorCode:
            try:
                partition = self.replicas.leader_partition(topic, index)
                offset = await partition.write_txn_marker(producer_id, producer_epoch, commit=commit,
                                                          coordinator_epoch=coordinator_epoch)
                await partition.wait_for_replication(offset + 1, timeout)
                if topic == OFFSETS_TOPIC:
                    await self.groups.complete_transaction(index, producer_id, commit)
                return ErrorCode.NONE
            except KafkaError as exc:
                return exc.code

        # The partitions are independent: their markers are appended and replicated together.
        codes = await asyncio.gather(*(one(topic, index) for topic, index in partitions))
        return dict(zip(partitions, codes, strict=True))

    async def _markers_to(self, node_id: int, markers: Markers, coordinator_epoch: int,
                          partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """WriteTxnMarkers v1 to another broker."""
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        try:
            response = await self._peer_call(node_id, write_txn_markers_request(markers, coordinator_epoch, by_topic),
                                             1)
        except PeerError as exc:
            log.info("markers to broker %d failed: %s", node_id, exc)
            return dict.fromkeys(partitions, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        results: dict[TopicPartition, ErrorCode] = dict.fromkeys(partitions, ErrorCode.UNKNOWN_SERVER_ERROR)
        for marker in response.markers:
            for topic in marker.topics:
                for part in topic.partitions:
                    results[(str(topic.name), int(part.partition_index))] = ErrorCode(int(part.error_code.value))
        return results

    async def verify_in_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                    partition: TopicPartition) -> ErrorCode:
        """KIP-890 part 1: before a producer's first transactional write to a partition, its coordinator must
        have the partition in the open transaction (AddPartitionsToTxn v4 verify-only when it is elsewhere);
        a late or stray write cannot open a transaction nobody will end."""
        index = self.transactions.partition_for(transactional_id)
        topic = self.metadata.topic(TRANSACTION_STATE_TOPIC)
        if index is None or topic is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.leads_txn_partition(index):
            found = await self.transactions.verify_partitions(transactional_id, producer_id, producer_epoch,
                                                              [partition])
            return found[partition]
        leader = topic.partitions[index].leader
        if leader < 0:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        try:
            response = await self._peer_call(leader, verify_request(transactional_id, producer_id, producer_epoch,
                                                                    partition), 4)
        except PeerError:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if int(response.error_code.value):
            return ErrorCode(int(response.error_code.value))
        for txn in response.results_by_transaction:
            for result in txn.topic_results:
                for part in result.results_by_partition:
                    return ErrorCode(int(part.partition_error_code.value))
        return ErrorCode.UNKNOWN_SERVER_ERROR

    async def _peer_call(self, node_id: int, request: Any, version: int) -> Any:
        """One request to another broker over a connection kept for it (one request at a time); PeerError."""
        lock, conns = self._peers.setdefault(node_id, (asyncio.Lock(), []))
        timeout = self.config.offsets_commit_timeout_ms / 1000 + 5
        async with lock:
            try:
                if not conns:
                    address = self.replicas.leader_address(node_id)
                    if address is None:
                        raise PeerError(f"broker {node_id} is not live")
                    conn = await PeerConnection.open(*address, f"sluice-txn-{self.config.node_id}", timeout,
                                                     tls=self._peer_tls)
                    conns.append(conn)
                    credentials = self._peer_credentials
                    if credentials is not None:
                        await conn.authenticate(credentials, timeout)
                return await conns[0].call(request, version, timeout)
            except PeerError:
                for conn in conns:
                    conn.close()
                conns.clear()
                raise


def write_txn_markers_request(markers: Markers, coordinator_epoch: int, by_topic: dict[str, list[int]]) -> Any:
    """WriteTxnMarkers v1 for one producer's markers on another broker's partitions."""
    topics = tuple(WritableTxnMarkerTopic(name=name, partition_indexes=tuple(i32(p) for p in indexes))  # type: ignore[arg-type]
                   for name, indexes in sorted(by_topic.items()))
    return WriteTxnMarkersRequest(markers=(WritableTxnMarker(
        producer_id=i64(markers.producer_id), producer_epoch=i16(markers.producer_epoch),  # type: ignore[arg-type]
        transaction_result=markers.commit, topics=topics, coordinator_epoch=i32(coordinator_epoch)),))


def verify_request(transactional_id: str, producer_id: int, producer_epoch: int, partition: TopicPartition) -> Any:
    """AddPartitionsToTxn v4, verify-only, for one partition (KIP-890 part 1)."""
    return AddPartitionsToTxnRequest(transactions=(AddPartitionsToTxnTransaction(
        transactional_id=transactional_id, producer_id=i64(producer_id),  # type: ignore[arg-type]
        producer_epoch=i16(producer_epoch), verify_only=True,
        topics=(AddPartitionsToTxnTopic(name=partition[0], partitions=(i32(partition[1]),)),)),))  # type: ignore[arg-type]
