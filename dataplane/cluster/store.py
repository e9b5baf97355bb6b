"""Reads and writes of cluster metadata in Postgres.

Every change bumps ``clusters.metadata_version`` and sends a NOTIFY on the
cluster's channel in the same transaction, so brokers that LISTEN learn of it
at commit; brokers also re-read on a timer, so a missed notification only
delays. Not thread-safe: one store (one connection) per thread.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from dataplane.cluster import partition_limit
from dataplane.cluster.assignment import AssignmentError, assign_replicas
from dataplane.cluster.migrations import DEFAULT_SCHEMA, validate_schema_name
from dataplane.config.topic import ConfigError, validate_topic_configs
from dataplane.naming import InvalidTopicName, collision_key, validate_topic_name
from dataplane.protocol.errors import ErrorCode, KafkaError


@dataclass(frozen=True, slots=True)
class PartitionState:
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    adding: tuple[int, ...] = ()    # a reassignment's joining replicas
    removing: tuple[int, ...] = ()  # ... and the ones that leave when it completes

    @property
    def target_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    node_id: int
    host: str
    port: int
    rack: str | None
    incarnation: uuid.UUID
    directory_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class TopicState:
    topic_id: uuid.UUID
    name: str
    configs: Mapping[str, str]
    internal: bool
    partitions: tuple[PartitionState, ...]


@dataclass(frozen=True, slots=True)
class PartitionChange:
    """A controller decision for one partition, made from the state at ``partition_epoch``."""

    topic_id: uuid.UUID
    partition: int
    partition_epoch: int
    leader: int
    isr: tuple[int, ...]
    leader_changed: bool
    replicas: tuple[int, ...] | None = None  # None keeps the replica list
    adding: tuple[int, ...] | None = None    # None keeps the reassignment state as it is
    removing: tuple[int, ...] | None = None


_TopicRow = tuple[uuid.UUID, str, dict[str, str], bool, int, list[int], list[int], int, int, int, list[int], list[int]]


def _validated(configs: Mapping[str, object]) -> dict[str, str]:
    try:
        return validate_topic_configs(configs)
    except ConfigError as exc:
        raise KafkaError(exc.message, code=ErrorCode.INVALID_CONFIG) from exc


def _check_assignments(layout: list[list[int]], added: int, replication_factor: int, brokers: Sequence[int]) -> None:
    """Manual replica lists for new partitions: one per partition, the topic's replication factor, known brokers."""
    def refuse(message: str) -> KafkaError:
        return KafkaError(message, code=ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    if len(layout) != added:
        raise refuse(f"Increasing the number of partitions by {added} but {len(layout)} assignments provided.")
    for replicas in layout:
        if len(replicas) != replication_factor:
            raise refuse(f"Inconsistent replication factor between partitions, partition 0 has {replication_factor} "
                         f"while the assignment {replicas} has {len(replicas)} replicas.")
        if len(set(replicas)) != len(replicas):
            raise refuse(f"Duplicate brokers not allowed in replica assignment: {replicas}.")
        unknown = sorted(set(replicas) - set(brokers))
        if unknown:
            raise refuse(f"Unknown broker(s) in replica assignment: {unknown}.")


def _array(values: Sequence[int] | None) -> list[int] | None:
    return None if values is None else list(values)


def notify_channel(cluster_id: str) -> str:
    return f"sluice_meta_{cluster_id}"


class MetadataStore:
    """The cluster's metadata in Postgres: brokers and leases, the controller lease, topics, partitions, configs.

    Wraps one connection, so it is not for concurrent use: a broker's ``StoreThread`` owns it and calls it
    on its one thread; the control plane uses its own instance per call.
    """

    def __init__(self, conn: psycopg.Connection[tuple[object, ...]], cluster_id: str,
                 schema: str = DEFAULT_SCHEMA, *,
                 reconnect: Callable[[], psycopg.Connection[tuple[object, ...]]] | None = None) -> None:
        self.cluster_id = cluster_id
        self.schema = validate_schema_name(schema)
        self._reconnect = reconnect
        self.conn = self._prepare(conn)

    def _prepare(self, conn: psycopg.Connection[tuple[object, ...]]) -> psycopg.Connection[tuple[object, ...]]:
        conn.autocommit = True
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
        return conn

    def ensure_connected(self) -> None:
        """Replace a connection that broke (Postgres restarted, a network cut) before the next call."""
        if self._reconnect is not None and (self.conn.closed or self.conn.broken):
            self.conn = self._prepare(self._reconnect())

    def ensure_cluster(self) -> None:
        self.conn.execute("INSERT INTO clusters (cluster_id) VALUES (%s) ON CONFLICT DO NOTHING", (self.cluster_id,))

    def register_broker(self, broker: BrokerRegistration, lease_seconds: float) -> None:
        """Register (or re-register after a restart) with a lease that heartbeats renew.

        A live registration of the same node id from another data directory is
        refused with DUPLICATE_BROKER_REGISTRATION, as KRaft does; from the same
        directory it is a restart after a crash and replaces the old one.
        """
        with self.conn.transaction():
            row = self.conn.execute(
                "SELECT incarnation, lease_expires_at > now(), directory_id FROM brokers"
                " WHERE cluster_id = %s AND node_id = %s FOR UPDATE", (self.cluster_id, broker.node_id)).fetchone()
            if row is not None and row[0] != broker.incarnation and row[1] and row[2] != broker.directory_id:
                raise KafkaError(f"broker {broker.node_id} is already registered by a live process",
                                 code=ErrorCode.DUPLICATE_BROKER_REGISTRATION)
            self.conn.execute(
                "INSERT INTO brokers (cluster_id, node_id, host, port, rack, incarnation, directory_id,"
                " lease_expires_at) VALUES (%s, %s, %s, %s, %s, %s, %s, now() + make_interval(secs => %s))"
                " ON CONFLICT (cluster_id, node_id) DO UPDATE SET host = EXCLUDED.host, port = EXCLUDED.port,"
                " rack = EXCLUDED.rack, incarnation = EXCLUDED.incarnation, directory_id = EXCLUDED.directory_id,"
                " lease_expires_at = EXCLUDED.lease_expires_at, registered_at = now()",
                (self.cluster_id, broker.node_id, broker.host, broker.port, broker.rack, broker.incarnation,
                 broker.directory_id, lease_seconds))
            self._changed()

    def renew_lease(self, node_id: int, incarnation: uuid.UUID, lease_seconds: float,
                    bytes_out: Mapping[str, int] | None = None) -> bool:
        """Extend our lease (and publish our per-topic bytes sent to consumers, when given); False when
        another incarnation took the node id over."""
        row = self.conn.execute(
            "UPDATE brokers SET lease_expires_at = now() + make_interval(secs => %s),"
            " bytes_out = COALESCE(%s, bytes_out)"
            " WHERE cluster_id = %s AND node_id = %s AND incarnation = %s RETURNING 1",
            (lease_seconds, None if bytes_out is None else Jsonb(dict(bytes_out)), self.cluster_id, node_id,
             incarnation)).fetchone()
        return row is not None

    def bytes_out(self) -> dict[int, tuple[uuid.UUID, dict[str, int]]]:
        """node id -> (incarnation, bytes sent to consumers per topic) of every broker holding a live lease."""
        rows = self.conn.execute("SELECT node_id, incarnation, bytes_out FROM brokers WHERE cluster_id = %s"
                                 " AND lease_expires_at > now()", (self.cluster_id,)).fetchall()
        return {int(str(node)): (cast(uuid.UUID, incarnation),
                                 {str(k): int(v) for k, v in cast(dict[str, int], counters).items()})
                for node, incarnation, counters in rows}

    def unregister_broker(self, node_id: int, incarnation: uuid.UUID) -> None:
        """At clean shutdown: let the lease lapse now rather than at its expiry."""
        with self.conn.transaction():
            self.conn.execute("UPDATE brokers SET lease_expires_at = now() WHERE cluster_id = %s AND node_id = %s"
                              " AND incarnation = %s", (self.cluster_id, node_id, incarnation))
            self._changed()

    def live_brokers(self) -> list[BrokerRegistration]:
        rows = self.conn.execute(
            "SELECT node_id, host, port, rack, incarnation, directory_id FROM brokers WHERE cluster_id = %s"
            " AND lease_expires_at > now() ORDER BY node_id", (self.cluster_id,)).fetchall()
        return [BrokerRegistration(int(str(r[0])), str(r[1]), int(str(r[2])), None if r[3] is None else str(r[3]),
                                   cast(uuid.UUID, r[4]), cast("uuid.UUID | None", r[5])) for r in rows]

    def metadata_version(self) -> int:
        row = self.conn.execute("SELECT metadata_version FROM clusters WHERE cluster_id = %s",
                                (self.cluster_id,)).fetchone()
        return int(str(row[0])) if row else -1

    def versions(self) -> tuple[int, int]:
        """(metadata version, security version): the second moves only when ACLs or credentials change."""
        row = self.conn.execute("SELECT metadata_version, security_version FROM clusters WHERE cluster_id = %s",
                                (self.cluster_id,)).fetchone()
        return (int(str(row[0])), int(str(row[1]))) if row else (-1, -1)

    def _changed(self, *, security: bool = False) -> None:
        """Inside a write transaction: bump the version(s) and notify listeners at commit."""
        self.conn.execute("UPDATE clusters SET metadata_version = metadata_version + 1,"
                          " security_version = security_version + %s WHERE cluster_id = %s",
                          (1 if security else 0, self.cluster_id))
        self.conn.execute("SELECT pg_notify(%s, '')", (notify_channel(self.cluster_id),))

    # ------------------------------------------------------------------ the controller lease

    def acquire_controller(self, node_id: int, lease_seconds: float) -> tuple[int, int]:
        """Take, renew or observe the controller lease: (controller node id, controller epoch).

        A lapsed lease goes to the caller with the next epoch, even when the caller
        held it before (a paused controller that wakes is a new controller), so a
        write made under an earlier epoch can never pass ``_fence``.
        """
        with self.conn.transaction():
            row = self.conn.execute(
                "SELECT node_id, epoch, lease_expires_at > now() FROM controller WHERE cluster_id = %s FOR UPDATE",
                (self.cluster_id,)).fetchone()
            if row is None:
                self.conn.execute("INSERT INTO controller (cluster_id, node_id, epoch, lease_expires_at)"
                                  " VALUES (%s, %s, 1, now() + make_interval(secs => %s))",
                                  (self.cluster_id, node_id, lease_seconds))
                self._changed()
                return node_id, 1
            holder, epoch, live = int(str(row[0])), int(str(row[1])), bool(row[2])
            if live and holder != node_id:
                return holder, epoch
            if not live:
                epoch += 1
            self.conn.execute("UPDATE controller SET node_id = %s, epoch = %s,"
                              " lease_expires_at = now() + make_interval(secs => %s) WHERE cluster_id = %s",
                              (node_id, epoch, lease_seconds, self.cluster_id))
            if not live:
                self._changed()
            return node_id, epoch

    def resign_controller(self, node_id: int, epoch: int) -> None:
        """At clean shutdown: end our controller lease now, so another broker takes over at once."""
        with self.conn.transaction():
            self.conn.execute("UPDATE controller SET lease_expires_at = now() WHERE cluster_id = %s"
                              " AND node_id = %s AND epoch = %s", (self.cluster_id, node_id, epoch))
            self._changed()

    def _fence(self, node_id: int, epoch: int) -> None:
        """Inside a write transaction: refuse unless the caller holds a current controller lease at ``epoch``.

        FOR SHARE holds off a takeover (which locks the row FOR UPDATE) until this
        transaction ends, so the check stays true for the writes that follow it.
        """
        row = self.conn.execute(
            "SELECT 1 FROM controller WHERE cluster_id = %s AND node_id = %s AND epoch = %s"
            " AND lease_expires_at > now() FOR SHARE", (self.cluster_id, node_id, epoch)).fetchone()
        if row is None:
            raise KafkaError(f"broker {node_id} is not the controller at epoch {epoch}",
                             code=ErrorCode.STALE_CONTROLLER_EPOCH)

    def apply_partition_changes(self, node_id: int, controller_epoch: int,
                                changes: Sequence[PartitionChange]) -> int:
        """Controller writes, fenced by its epoch; each change also compares the partition epoch it was made from.

        A change whose partition moved meanwhile (a leader's ISR update won the
        race) is skipped and re-decided on the controller's next pass. Returns how
        many changes were applied.
        """
        applied = 0
        with self.conn.transaction():
            self._fence(node_id, controller_epoch)
            for change in changes:
                row = self.conn.execute(
                    "UPDATE partitions SET leader = %s, isr = %s, replicas = COALESCE(%s::integer[], replicas),"
                    " adding_replicas = COALESCE(%s::integer[], adding_replicas),"
                    " removing_replicas = COALESCE(%s::integer[], removing_replicas),"
                    " leader_epoch = leader_epoch + %s, partition_epoch = partition_epoch + 1"
                    " WHERE topic_id = %s AND partition = %s AND partition_epoch = %s RETURNING 1",
                    (change.leader, list(change.isr), _array(change.replicas), _array(change.adding),
                     _array(change.removing), 1 if change.leader_changed else 0, change.topic_id, change.partition,
                     change.partition_epoch)).fetchone()
                applied += row is not None
            if applied:
                self._changed()
        return applied

    def live_since(self) -> dict[int, float]:
        """Each live broker's latest registration time (epoch seconds): a restarted process re-registers."""
        rows = self.conn.execute("SELECT node_id, extract(epoch FROM registered_at) FROM brokers"
                                 " WHERE cluster_id = %s AND lease_expires_at > now()", (self.cluster_id,)).fetchall()
        return {int(str(node)): float(str(at)) for node, at in rows}

    def replica_counts(self) -> dict[int, int]:
        """Partition replicas assigned to each broker (a scale-in may stop a broker only at zero)."""
        rows = self.conn.execute(
            "SELECT r, count(*) FROM partitions p JOIN topics t USING (topic_id), unnest(p.replicas) AS r"
            " WHERE t.cluster_id = %s GROUP BY r", (self.cluster_id,)).fetchall()
        return {int(str(node)): int(str(n)) for node, n in rows}

    def drop_cluster(self) -> None:
        """Remove every row of this cluster (topics, partitions, brokers, leases): its brokers are gone."""
        self.conn.execute("DELETE FROM topics WHERE cluster_id = %s", (self.cluster_id,))
        self.conn.execute("DELETE FROM clusters WHERE cluster_id = %s", (self.cluster_id,))

    def registered_brokers(self) -> set[int]:
        rows = self.conn.execute("SELECT node_id FROM brokers WHERE cluster_id = %s", (self.cluster_id,)).fetchall()
        return {int(str(r[0])) for r in rows}

    def reassign(self, node_id: int, controller_epoch: int, name: str, partition: int,
                 target: Sequence[int] | None) -> None:
        """Start (or with ``target`` None, cancel) moving a partition to ``target`` replicas; controller-fenced.

        The replica list becomes target + the current replicas not in it; the new
        ones are *adding*, the old ones *removing*. The controller completes the move
        once every adding replica is in the ISR (``reassignment.complete``).
        """
        with self.conn.transaction():
            self._fence(node_id, controller_epoch)
            topic = self._topic_for_update(name)
            if not 0 <= partition < len(topic.partitions):
                raise KafkaError(f"Topic {name} has no partition {partition}.",
                                 code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            state = topic.partitions[partition]
            if target is None:
                if not state.adding and not state.removing:
                    raise KafkaError(f"No reassignment of {name}-{partition} is in progress.",
                                     code=ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
                target = tuple(r for r in state.replicas if r not in state.adding)
            known = self.registered_brokers()
            if not target or len(set(target)) != len(target) or not set(target) <= known:
                raise KafkaError(f"Replica assignment {list(target)} must be distinct, registered brokers.",
                                 code=ErrorCode.INVALID_REPLICA_ASSIGNMENT)
            original = tuple(r for r in state.replicas if r not in state.adding)
            replicas = tuple(target) + tuple(r for r in original if r not in target)
            adding = tuple(r for r in target if r not in original)
            removing = tuple(r for r in original if r not in target)
            isr = tuple(r for r in state.isr if r in replicas) or state.isr
            self.conn.execute(
                "UPDATE partitions SET replicas = %s, isr = %s, adding_replicas = %s, removing_replicas = %s,"
                " partition_epoch = partition_epoch + 1 WHERE topic_id = %s AND partition = %s",
                (list(replicas), list(isr), list(adding), list(removing), topic.topic_id, partition))
            self._changed()

    def alter_isr(self, topic_id: uuid.UUID, partition: int, *, leader: int, leader_epoch: int,
                  partition_epoch: int, isr: Sequence[int]) -> PartitionState | None:
        """A leader's ISR change, compare-and-set on (leader, leader epoch, partition epoch).

        None when the partition moved since the leader last read it: a leader that
        has been replaced (or raced the controller) changes nothing.
        """
        with self.conn.transaction():
            row = self.conn.execute(
                "UPDATE partitions SET isr = %s, partition_epoch = partition_epoch + 1"
                " WHERE topic_id = %s AND partition = %s AND leader = %s AND leader_epoch = %s"
                " AND partition_epoch = %s AND %s::integer[] <@ replicas"
                " RETURNING partition, replicas, isr, leader, leader_epoch, partition_epoch, adding_replicas,"
                " removing_replicas",
                (list(isr), topic_id, partition, leader, leader_epoch, partition_epoch, list(isr))).fetchone()
            if row is None:
                return None
            self._changed()
        part, replicas, new_isr, new_leader, epoch, pepoch, adding, removing = \
            cast(tuple[int, list[int], list[int], int, int, int, list[int], list[int]], row)
        return PartitionState(part, tuple(replicas), tuple(new_isr), new_leader, epoch, pepoch, tuple(adding),
                              tuple(removing))

    def create_topic(self, name: str, partitions: int, replication_factor: int, brokers: Sequence[int], *,
                     racks: Mapping[int, str | None] | None = None,
                     configs: Mapping[str, object] | None = None, internal: bool = False,
                     assignments: Sequence[Sequence[int]] | None = None,
                     rng: random.Random | None = None, dry_run: bool = False) -> TopicState:
        """Create a topic with partitions spread over ``brokers``, across racks when they have them, or
        placed as ``assignments`` says (one replica list per partition; Kafka's CreateTopics rules)."""
        try:
            validate_topic_name(name)
        except InvalidTopicName as exc:
            raise KafkaError(str(exc), code=ErrorCode.INVALID_TOPIC_EXCEPTION) from exc
        try:
            canonical = validate_topic_configs(configs or {})
        except ConfigError as exc:
            raise KafkaError(exc.message, code=ErrorCode.INVALID_CONFIG) from exc
        if partitions < 1:
            raise KafkaError(f"number of partitions must be at least 1, got {partitions}",
                             code=ErrorCode.INVALID_PARTITIONS)
        if assignments is not None:
            layout = [list(replicas) for replicas in assignments]
            _check_assignments(layout, partitions, len(layout[0]) if layout else 0, brokers)
        else:
            pick = rng or random.Random()
            count = max(1, len(set(brokers)))
            try:
                layout = assign_replicas(brokers, partitions, replication_factor, racks=racks,
                                         start_index=pick.randrange(count), shift=pick.randrange(count))
            except AssignmentError as exc:
                raise KafkaError(str(exc), code=ErrorCode.INVALID_REPLICATION_FACTOR) from exc
        topic_id = uuid.uuid4()
        if dry_run:  # CreateTopics validate_only: every check, no write
            clash = self.conn.execute("SELECT 1 FROM topics WHERE cluster_id = %s AND collision_key = %s",
                                      (self.cluster_id, collision_key(name))).fetchone()
            if clash:
                raise KafkaError(f"Topic '{name}' already exists.", code=ErrorCode.TOPIC_ALREADY_EXISTS)
            if not internal:
                with self.conn.transaction():
                    self._check_partition_limit(len(layout), self._lock_partition_limit())
            return TopicState(topic_id, name, canonical, internal, tuple(
                PartitionState(index, tuple(replicas), tuple(replicas), replicas[0], 0, 0)
                for index, replicas in enumerate(layout)))
        try:
            with self.conn.transaction():
                if not internal:
                    self._check_partition_limit(len(layout), self._lock_partition_limit())
                self.conn.execute(
                    "INSERT INTO topics (topic_id, cluster_id, name, collision_key, configs, internal) "
                    "VALUES (%s, %s, %s, %s, %s, %s)",
                    (topic_id, self.cluster_id, name, collision_key(name), Jsonb(canonical),
                     internal))
                with self.conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO partitions (topic_id, partition, replicas, isr, leader) "
                        "VALUES (%s, %s, %s, %s, %s)",
                        [(topic_id, index, replicas, replicas, replicas[0]) for index, replicas in enumerate(layout)])
                self._changed()
        except psycopg.errors.UniqueViolation as exc:
            raise KafkaError(f"Topic '{name}' already exists (or collides with one that differs only by '.'/'_').",
                             code=ErrorCode.TOPIC_ALREADY_EXISTS) from exc
        except psycopg.errors.ForeignKeyViolation as exc:
            raise KafkaError(f"cluster {self.cluster_id} is not registered", code=ErrorCode.UNKNOWN_SERVER_ERROR) \
                from exc
        topic = self.topic(name)
        assert topic is not None
        return topic

    def partition_limit(self) -> int | None:
        """The cluster's partition limit (None: none), as the control plane last set it."""
        row = self.conn.execute("SELECT max_partitions FROM clusters WHERE cluster_id = %s",
                                (self.cluster_id,)).fetchone()
        return None if row is None or row[0] is None else int(str(row[0]))

    def set_partition_limit(self, limit: int | None) -> bool:
        """Set the cluster's partition limit (None: no limit); whether it changed. Partitions already beyond a
        lowered limit stay; only new ones are refused."""
        if limit is not None and limit < 1:
            raise ValueError(f"a partition limit must be at least 1, got {limit}")
        with self.conn.transaction():
            changed = self.conn.execute(
                "UPDATE clusters SET max_partitions = %s WHERE cluster_id = %s "
                "AND max_partitions IS DISTINCT FROM %s", (limit, self.cluster_id, limit)).rowcount
            if changed:
                self._changed()
        return bool(changed)

    def _lock_partition_limit(self) -> int | None:
        """Inside a transaction: the limit, with the cluster row locked until commit, so creates that add
        partitions are counted one after another (FOR NO KEY UPDATE: rows referencing the cluster stay free)."""
        row = self.conn.execute("SELECT max_partitions FROM clusters WHERE cluster_id = %s FOR NO KEY UPDATE",
                                (self.cluster_id,)).fetchone()
        return None if row is None or row[0] is None else int(str(row[0]))

    def _check_partition_limit(self, adding: int, limit: int | None) -> None:
        """Inside a transaction, with the cluster row locked (``_lock_partition_limit``): refuse ``adding``
        partitions beyond ``limit`` with POLICY_VIOLATION, as Kafka's CreateTopicPolicy refusals are."""
        if limit is None:
            return
        row = self.conn.execute(
            "SELECT count(*) FROM partitions p JOIN topics t ON t.topic_id = p.topic_id "
            "WHERE t.cluster_id = %s AND NOT t.internal", (self.cluster_id,)).fetchone()
        used = int(str(row[0])) if row else 0
        why = partition_limit.refusal(limit=limit, used=used, adding=adding)
        if why is not None:
            raise KafkaError(why, code=ErrorCode.POLICY_VIOLATION)

    def delete_topic(self, name: str | None = None, *, topic_id: uuid.UUID | None = None) -> TopicState:
        """Delete a topic by name or by id and return what it was; internal topics are refused."""
        if (name is None) == (topic_id is None):
            raise ValueError("give exactly one of name and topic_id")
        with self.conn.transaction():
            topic = self._topic_for_update(name, topic_id)
            if topic.internal:
                raise KafkaError(f"Internal topic '{topic.name}' cannot be deleted.",
                                 code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            self.conn.execute("DELETE FROM topics WHERE topic_id = %s", (topic.topic_id,))
            self._changed()
        return topic

    def _topic_for_update(self, name: str | None, topic_id: uuid.UUID | None = None) -> TopicState:
        """Inside a transaction: the topic, its row locked until commit (the read half of read-modify-write)."""
        key, value = ("name", name) if topic_id is None else ("topic_id", topic_id)
        row = self.conn.execute(
            sql.SQL("SELECT topic_id FROM topics WHERE cluster_id = %s AND {} = %s FOR UPDATE")
            .format(sql.Identifier(key)), (self.cluster_id, value)).fetchone()
        if row is None:
            if topic_id is not None:
                raise KafkaError(f"Topic id {topic_id} does not exist.", code=ErrorCode.UNKNOWN_TOPIC_ID)
            raise KafkaError(f"Topic '{name}' does not exist.", code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        found = self._topics("t.topic_id = %s", row[0])
        assert found
        return found[0]

    def create_partitions(self, name: str, count: int, brokers: Sequence[int], *,
                          assignments: Sequence[Sequence[int]] | None = None,
                          rng: random.Random | None = None, dry_run: bool = False) -> TopicState:
        """Grow a topic to ``count`` partitions (never shrink: Kafka's CreatePartitions rules)."""
        with self.conn.transaction():
            limit = self._lock_partition_limit()  # the cluster row first, as create_topic takes it
            topic = self._topic_for_update(name)
            current = len(topic.partitions)
            if count < current:
                raise KafkaError(f"Topic currently has {current} partitions, which is higher than the requested "
                                 f"{count}.", code=ErrorCode.INVALID_PARTITIONS)
            if count == current:
                raise KafkaError(f"Topic already has {current} partitions.", code=ErrorCode.INVALID_PARTITIONS)
            replication_factor = len(topic.partitions[0].replicas)
            added = count - current
            if assignments is not None:
                layout = [list(replicas) for replicas in assignments]
                _check_assignments(layout, added, replication_factor, brokers)
            else:
                pick = rng or random.Random()
                known = max(1, len(set(brokers)))
                try:
                    layout = assign_replicas(brokers, added, replication_factor, start_index=pick.randrange(known),
                                             shift=pick.randrange(known), first_partition=current)
                except AssignmentError as exc:
                    raise KafkaError(str(exc), code=ErrorCode.INVALID_REPLICATION_FACTOR) from exc
            if not topic.internal:
                self._check_partition_limit(added, limit)
            grown = topic.partitions + tuple(
                PartitionState(current + i, tuple(replicas), tuple(replicas), replicas[0], 0, 0)
                for i, replicas in enumerate(layout))
            if dry_run:
                return TopicState(topic.topic_id, topic.name, topic.configs, topic.internal, grown)
            with self.conn.cursor() as cur:
                cur.executemany("INSERT INTO partitions (topic_id, partition, replicas, isr, leader) "
                                "VALUES (%s, %s, %s, %s, %s)",
                                [(topic.topic_id, p.partition, list(p.replicas), list(p.isr), p.leader)
                                 for p in grown[current:]])
            self._changed()
        return TopicState(topic.topic_id, topic.name, topic.configs, topic.internal, grown)

    def alter_topic_configs(self, name: str, change: Callable[[Mapping[str, str]], Mapping[str, object]], *,
                            dry_run: bool = False) -> dict[str, str]:
        """Replace a topic's overrides with ``change(current overrides)``, validated; returns the new overrides.

        The read and the write share one transaction with the row locked, so two
        concurrent incremental changes (APPEND to ``cleanup.policy``…) cannot lose one another.
        """
        with self.conn.transaction():
            topic = self._topic_for_update(name)
            configs = _validated(change(dict(topic.configs)))
            if not dry_run and configs != dict(topic.configs):
                self.conn.execute("UPDATE topics SET configs = %s WHERE topic_id = %s",
                                  (Jsonb(configs), topic.topic_id))
                self._changed()
        return configs

    def cluster_configs(self) -> dict[str, str]:
        """Cluster-wide defaults for topic configs, by topic config name (``retention.ms``…)."""
        rows = self.conn.execute("SELECT name, value FROM cluster_configs WHERE cluster_id = %s",
                                 (self.cluster_id,)).fetchall()
        return {str(name): str(value) for name, value in rows}

    def alter_cluster_configs(self, change: Callable[[Mapping[str, str]], Mapping[str, object]], *,
                              dry_run: bool = False) -> dict[str, str]:
        """Replace the cluster defaults with ``change(current)``, validated as topic configs; returns them."""
        with self.conn.transaction():
            # The cluster row lock serialises read-modify-write cycles of the defaults.
            self.conn.execute("SELECT 1 FROM clusters WHERE cluster_id = %s FOR UPDATE", (self.cluster_id,))
            current = self.cluster_configs()
            configs = _validated(change(current))
            if not dry_run and configs != current:
                self.conn.execute("DELETE FROM cluster_configs WHERE cluster_id = %s", (self.cluster_id,))
                with self.conn.cursor() as cur:
                    cur.executemany("INSERT INTO cluster_configs (cluster_id, name, value) VALUES (%s, %s, %s)",
                                    [(self.cluster_id, key, value) for key, value in sorted(configs.items())])
                self._changed()
        return configs

    def broker_configs(self) -> dict[int, dict[str, str]]:
        """Dynamic broker configs by node id (-1: the cluster-wide default), by Kafka's broker config name."""
        rows = self.conn.execute("SELECT node_id, name, value FROM broker_configs WHERE cluster_id = %s",
                                 (self.cluster_id,)).fetchall()
        found: dict[int, dict[str, str]] = {}
        for node_id, name, value in rows:
            found.setdefault(int(str(node_id)), {})[str(name)] = str(value)
        return found

    def alter_broker_configs(self, node_id: int, change: Callable[[Mapping[str, str]], Mapping[str, str]], *,
                             dry_run: bool = False) -> dict[str, str]:
        """Replace one node's dynamic configs (-1: the cluster default) with ``change(current)``; returns them.

        ``change`` validates (the server knows which names are dynamic); the cluster row
        lock serialises read-modify-write cycles as for the topic defaults.
        """
        with self.conn.transaction():
            self.conn.execute("SELECT 1 FROM clusters WHERE cluster_id = %s FOR UPDATE", (self.cluster_id,))
            current = self.broker_configs().get(node_id, {})
            configs = dict(change(current))
            if not dry_run and configs != current:
                self.conn.execute("DELETE FROM broker_configs WHERE cluster_id = %s AND node_id = %s",
                                  (self.cluster_id, node_id))
                with self.conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO broker_configs (cluster_id, node_id, name, value) VALUES (%s, %s, %s, %s)",
                        [(self.cluster_id, node_id, key, value) for key, value in sorted(configs.items())])
                self._changed()
        return configs

    def topics(self) -> list[TopicState]:
        """Every topic of the cluster with its partitions, in one round trip."""
        return self._topics()

    def _topics(self, where: str = "TRUE", *args: object) -> list[TopicState]:
        rows = self.conn.execute(
            "SELECT t.topic_id, t.name, t.configs, t.internal, p.partition, p.replicas, p.isr, p.leader,"
            " p.leader_epoch, p.partition_epoch, p.adding_replicas, p.removing_replicas"
            " FROM topics t JOIN partitions p USING (topic_id)"
            f" WHERE t.cluster_id = %s AND {where} ORDER BY t.name, p.partition",
            (self.cluster_id, *args)).fetchall()
        found: dict[uuid.UUID, tuple[str, dict[str, str], bool, list[PartitionState]]] = {}
        for row in rows:
            topic_id, name, configs, internal, part, replicas, isr, leader, epoch, pepoch, adding, removing = \
                cast(_TopicRow, row)
            entry = found.setdefault(topic_id, (name, dict(configs), internal, []))
            entry[3].append(PartitionState(part, tuple(replicas), tuple(isr), leader, epoch, pepoch, tuple(adding),
                                           tuple(removing)))
        return [TopicState(tid, name, configs, internal, tuple(parts))
                for tid, (name, configs, internal, parts) in found.items()]

    def topic(self, name: str) -> TopicState | None:
        found = self._topics("t.name = %s", name)
        return found[0] if found else None

    def allocate_producer_ids(self, block_size: int = 1000) -> range:
        """A block of producer ids no other broker of the cluster will ever get."""
        if block_size < 1:
            raise ValueError("block_size must be positive")
        row = self.conn.execute(
            "INSERT INTO producer_id_blocks AS b (cluster_id, next_producer_id) VALUES (%s, %s)"
            " ON CONFLICT (cluster_id) DO UPDATE SET next_producer_id = b.next_producer_id + %s"
            " RETURNING next_producer_id", (self.cluster_id, block_size, block_size)).fetchone()
        assert row is not None
        end = int(str(row[0]))
        return range(end - block_size, end)
