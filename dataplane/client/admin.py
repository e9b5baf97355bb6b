"""A typed, synchronous admin client for one Sluice (or Kafka) cluster, for the control plane.

The control plane's reconcile tasks and API views call these methods and get
frozen dataclasses back; no confluent-kafka or kio type leaks out, and every
failure is an ``AdminError`` with a stable ``code`` (librdkafka's name for the
Kafka error, e.g. ``UNKNOWN_TOPIC_OR_PART``, or ``_TRANSPORT``/``_TIMED_OUT``
when the cluster cannot be reached) and a ``retriable`` flag a reconcile loop
can branch on.

Everything librdkafka's AdminClient does goes through it, so the requests carry
its retries, metadata handling and (later) its SASL/TLS configuration. What it
does not send is spoken over a plain blocking socket with the broker's own
codec (``dataplane.protocol.client``): partition reassignments
(AlterPartitionReassignments, ListPartitionReassignments) to the controller,
DescribeLogDirs and ListGroups to every broker. ListGroups is the one API
librdkafka has but cannot be used for: its listing drops each group's protocol
type. That path speaks PLAINTEXT, SASL_PLAINTEXT, SSL and SASL_SSL (PLAIN, SCRAM-SHA-256/512,
from the same ``sasl.*`` and ``ssl.*`` settings librdkafka is given; OAUTHBEARER with a token from
the same ``oauth_cb``).

Each public call has one deadline (``timeout``) shared by the requests it
makes, so an unreachable cluster raises a retriable AdminError instead of
hanging. A ClusterAdmin may be shared between threads.

Two librdkafka behaviours are worked around: it learns of a new controller only
from a periodic metadata refresh (every 5 minutes by default) and until then
waits for the old one, so every controller request after a failover timed out;
and confluent-kafka 2.16's ``elect_leaders`` refuses any timeout argument.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import sys
import time
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, TypeVar

from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    ElectionType,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclBindingFilter,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
)
from confluent_kafka.admin import AclOperation as KafkaAclOperation  # type: ignore[attr-defined]
from confluent_kafka.admin import ConfigEntry as KafkaConfigEntry  # type: ignore[attr-defined]
from confluent_kafka.admin import NewTopic as KafkaNewTopic  # type: ignore[attr-defined]
from kio.index import load_request_schema
from kio.schema.alter_partition_reassignments.v0.request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from kio.schema.list_partition_reassignments.v0.request import ListPartitionReassignmentsRequest
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import f64, i8, i32, i32Timedelta

from dataplane.client.tokens import with_static_token

# AdminError and BrokerInfo are this module's API too (the control plane imports them from here).
from dataplane.client.wire import CLIENT_ID, Deadline, WireSettings, _from_exception
from dataplane.client.wire import AdminError as AdminError
from dataplane.client.wire import BrokerInfo as BrokerInfo
from dataplane.client.wire import request as _request
from dataplane.protocol.errors import ErrorCode
from dataplane.security import acl
from dataplane.security.quotas import Entity as QuotaEntity

TopicPartitionKey = tuple[str, int]
OffsetSpecArg = Literal["earliest", "latest"] | int
T = TypeVar("T")

# A commit from outside the group (no member id, generation -1) is refused with these while the group has members.
_GROUP_HAS_MEMBERS = frozenset({"UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "REBALANCE_IN_PROGRESS"})
# librdkafka's enum names for group states, as Kafka's protocol spells them (ListGroups' own spelling).
_GROUP_STATES = {"UNKNOWN": "Unknown", "EMPTY": "Empty", "PREPARING_REBALANCE": "PreparingRebalance",
                 "COMPLETING_REBALANCE": "CompletingRebalance", "STABLE": "Stable", "DEAD": "Dead"}
DYNAMIC_TOPIC_CONFIG = "DYNAMIC_TOPIC_CONFIG"
_NOT_CONTROLLER = int(ErrorCode.NOT_CONTROLLER)
# Leadership is moving (a controller failover, a partition's new leader not yet aware of its epoch): ask again.
_TRANSIENT = frozenset({"NOT_CONTROLLER", "NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE", "UNKNOWN_LEADER_EPOCH",
                        "FENCED_LEADER_EPOCH", "REPLICA_NOT_AVAILABLE", "OFFSET_NOT_AVAILABLE", "NOT_COORDINATOR",
                        "COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS",
                        # A transaction's end is still being written (abort_transaction waits for it).
                        "CONCURRENT_TRANSACTIONS",
                        # The broker asked went away mid-request (killed, restarting): another will answer.
                        "_TRANSPORT"})
_RETRY_BACKOFF = 0.1  # seconds between two attempts of a call
_METADATA_REFRESH_MS = 2000
_WIRE_PROTOCOLS = ("plaintext", "sasl_plaintext", "ssl", "sasl_ssl")
_FUTURE_GRACE = 1.0  # librdkafka enforces request_timeout itself; this only guards against a future never resolved

# The wire APIs this module speaks, with the versions it can read: the highest one the broker also serves is used.
_API_VERSIONS = 18
_DESCRIBE_LOG_DIRS, _LIST_GROUPS = 35, 16
_ALTER_REASSIGNMENTS, _LIST_REASSIGNMENTS = 45, 46
_DESCRIBE_CLIENT_QUOTAS, _ALTER_CLIENT_QUOTAS = 48, 49
_FIND_COORDINATOR, _INIT_PRODUCER_ID, _DESCRIBE_TRANSACTIONS, _LIST_TRANSACTIONS = 10, 22, 65, 66
_READABLE: dict[int, tuple[int, ...]] = {_DESCRIBE_LOG_DIRS: (1, 2, 3, 4), _LIST_GROUPS: (0, 1, 2, 3, 4),
                                         _ALTER_REASSIGNMENTS: (0,), _LIST_REASSIGNMENTS: (0,),
                                         _DESCRIBE_CLIENT_QUOTAS: (0, 1), _ALTER_CLIENT_QUOTAS: (0, 1),
                                         _FIND_COORDINATOR: (4, 5, 6), _INIT_PRODUCER_ID: (3, 4, 5),
                                         _DESCRIBE_TRANSACTIONS: (0,), _LIST_TRANSACTIONS: (0, 1)}
_TRANSACTION_COORDINATOR = 1  # FindCoordinator's key type for a transactional id
_OPEN_TRANSACTION_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")


# ---------------------------------------------------------------------------------------------------- values


@dataclass(frozen=True, slots=True)
class TransactionInfo:
    """One transactional id as its coordinator describes it (KIP-664's DescribeTransactions)."""

    transactional_id: str
    coordinator_id: int
    state: str  # Kafka's names: Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, ...
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int  # -1 when no transaction is open
    partitions: tuple[TopicPartitionKey, ...]

    @property
    def is_open(self) -> bool:
        return self.state in _OPEN_TRANSACTION_STATES


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    cluster_id: str
    controller_id: int  # -1 while no broker is the controller
    brokers: tuple[BrokerInfo, ...]  # registered (live) brokers, by node id

    def broker(self, node_id: int) -> BrokerInfo | None:
        return next((b for b in self.brokers if b.node_id == node_id), None)


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int  # -1: no leader
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def offline(self) -> bool:
        return self.leader < 0

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: str | None
    internal: bool
    partitions: tuple[PartitionInfo, ...]  # by partition index


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    """One level a config's value may come from (the topic's own, a broker default, Kafka's default)."""

    name: str
    value: str | None
    source: str


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None  # None for a sensitive value, or a config without one
    source: str  # Kafka's ConfigSource name: DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG, STATIC_BROKER_CONFIG, ...
    is_default: bool
    read_only: bool
    sensitive: bool
    synonyms: tuple[ConfigSynonym, ...] = ()  # highest precedence first, as the broker lists them


def overrides(entries: Mapping[str, ConfigEntry]) -> dict[str, ConfigEntry]:
    """The topic's own settings, without what it inherits from the broker or cluster defaults."""
    return {name: entry for name, entry in entries.items() if entry.source == DYNAMIC_TOPIC_CONFIG}


@dataclass(frozen=True, slots=True)
class NewTopic:
    """A topic to create. With ``assignments`` (one replica list per partition, in partition order)
    the layout is given instead of chosen by the cluster, and must agree with the counts."""

    name: str
    partitions: int
    replication_factor: int
    configs: Mapping[str, str] = field(default_factory=dict)
    assignments: Sequence[Sequence[int]] | None = None

    def __post_init__(self) -> None:
        if self.assignments is not None and (
                len(self.assignments) != self.partitions
                or any(len(replicas) != self.replication_factor for replicas in self.assignments)):
            raise ValueError(f"topic {self.name!r}: assignments must list {self.partitions} partitions of "
                             f"{self.replication_factor} replicas each")


@dataclass(frozen=True, slots=True)
class Reassignment:
    """A partition move in progress: ``replicas`` is the target followed by the replicas leaving."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PartitionSize:
    """One replica's log on one broker."""

    topic: str
    partition: int
    broker: int
    size_bytes: int
    offset_lag: int  # how far this replica's log end is behind the high watermark


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    state: str  # Kafka's spelling (Stable, Empty, ...); "" from a broker too old to say
    protocol_type: str  # "consumer" for consumer groups, "" for offsets-only groups, "connect", ...


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    client_id: str
    host: str
    group_instance_id: str | None
    assignment: tuple[TopicPartitionKey, ...]


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol: str  # the assignor the members agreed on ("range", "roundrobin", ...)
    members: tuple[Member, ...]


@dataclass(frozen=True, slots=True, order=True)
class AclSpec:
    """One ACL by Kafka's enum names (TOPIC, LITERAL, READ, ALLOW, ...): hashable, so sets of them diff."""

    resource_type: str
    resource_name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission: str

    def __str__(self) -> str:
        return (f"{self.permission} {self.principal}@{self.host} {self.operation} on "
                f"{self.resource_type}:{self.pattern_type}:{self.resource_name}")


def _acl_binding(spec: AclSpec, *, filter_: bool = False) -> Any:
    """librdkafka's binding (or exact filter) for a spec; its enums share Kafka's wire numbers with ours."""
    kind = AclBindingFilter if filter_ else AclBinding
    return kind(int(acl.ResourceType[spec.resource_type]), spec.resource_name,
                int(acl.PatternType[spec.pattern_type]), spec.principal, spec.host,
                int(acl.AclOperation[spec.operation]), int(acl.AclPermission[spec.permission]))


def _acl_spec(binding: Any) -> AclSpec:
    return AclSpec(acl.ResourceType(binding.restype.value).name, binding.name,
                   acl.PatternType(binding.resource_pattern_type.value).name, binding.principal, binding.host,
                   acl.AclOperation(binding.operation.value).name,
                   acl.AclPermission(binding.permission_type.value).name)


# ---------------------------------------------------------------------------------------------------- internals


def _transaction_info(state: Any, coordinator_id: int) -> TransactionInfo:
    started = state.transaction_start_time
    return TransactionInfo(
        str(state.transactional_id), coordinator_id, str(state.transaction_state), int(state.producer_id),
        int(state.producer_epoch), int(state.transaction_timeout.total_seconds() * 1000),
        -1 if started is None else int(started.timestamp() * 1000),
        tuple(sorted((str(t.topic), int(p)) for t in state.topics for p in t.partitions)))


def _field_type(schema: Any, name: str) -> Any:
    """The nested entity class of a kio field (``tuple[EntryData, ...]`` -> ``EntryData``)."""
    hints = typing.get_type_hints(schema)
    return typing.get_args(hints[name])[0]


def _timeout_ms(deadline: Deadline) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=deadline.ms()))


def _wire_error(code: Any, message: str | None = None) -> AdminError | None:
    """None for NONE; ``code`` None for a response version without the field."""
    value = 0 if code is None else int(code.value)
    return None if value == 0 else AdminError.from_wire(value, message)


def _source_name(source: Any) -> str:
    """A config entry's source as Kafka names it (confluent-kafka hands over the bare number)."""
    try:
        return str(ConfigSource(source).name)
    except ValueError:
        return str(getattr(source, "name", source))


def _state_name(state: Any) -> str:
    name = getattr(state, "name", str(state))
    return _GROUP_STATES.get(name, name)


# ---------------------------------------------------------------------------------------------------- the client


class ClusterAdmin:
    """Admin operations on one cluster, reached through ``bootstrap`` ("host:port,host:port").

    ``config`` is passed to librdkafka (security settings, for instance); the
    requests spoken over our own sockets support PLAINTEXT, SASL_PLAINTEXT, SSL and SASL_SSL (with
    ``ssl.ca.location``, and ``ssl.certificate.location``/``ssl.key.location`` for mutual TLS) and refuse
    with ``_NOT_IMPLEMENTED`` under any other ``security.protocol``.

    Reads, and writes that change nothing when repeated, are asked again while
    the cluster answers that leadership is moving (NOT_CONTROLLER, an unknown
    leader epoch, ...), until the deadline. Creations, deletions and partition
    moves are sent once: their callers see every outcome and decide.
    """

    def __init__(self, bootstrap: str, *, timeout: float = 10.0, config: Mapping[str, str] | None = None) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self._timeout = timeout
        self._config = dict(config or {})
        self._wire = WireSettings(self._config)
        defaults: dict[str, str | int] = {
            "bootstrap.servers": bootstrap, "client.id": CLIENT_ID,
            # The request timeout of calls that take none (elect_leaders).
            "socket.timeout.ms": max(10, int(timeout * 1000)),
            # librdkafka learns of a new controller only from a metadata refresh, and waits for the old one
            # until then (5 minutes by default): every controller request would time out after a failover.
            "topic.metadata.refresh.interval.ms": _METADATA_REFRESH_MS,
        }
        try:
            self._admin: AdminClient | None = AdminClient(with_static_token({**defaults, **self._config}))
        except KafkaException as exc:
            raise _from_exception(exc) from exc

    def close(self) -> None:
        """Let librdkafka's threads and connections go (it has no explicit close: they go with the client)."""
        self._admin = None

    def __enter__(self) -> ClusterAdmin:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # ------------------------------------------------------------------ plumbing

    @property
    def _client(self) -> AdminClient:
        if self._admin is None:
            raise AdminError("_DESTROY", "this ClusterAdmin is closed")
        return self._admin

    def _retry(self, attempt: Callable[[Deadline], T]) -> T:
        """``attempt``'s result, tried again while the cluster's leadership is moving, within one deadline."""
        deadline = Deadline(self._timeout)
        while True:
            try:
                return attempt(deadline)
            except AdminError as exc:
                if exc.code not in _TRANSIENT or deadline.left() <= _RETRY_BACKOFF:
                    raise
            time.sleep(_RETRY_BACKOFF)

    def _once(self, attempt: Callable[[Deadline], T]) -> T:
        return attempt(Deadline(self._timeout))

    @staticmethod
    def _wait(future: concurrent.futures.Future[T], deadline: Deadline) -> T:
        try:
            return future.result(timeout=deadline.remaining() + _FUTURE_GRACE)
        except KafkaException as exc:
            raise _from_exception(exc) from exc
        except concurrent.futures.TimeoutError as exc:
            raise AdminError("_TIMED_OUT", "librdkafka did not answer in time", retriable=True) from exc

    def _outcomes(self, futures: Mapping[Any, concurrent.futures.Future[Any]],
                  deadline: Deadline) -> Iterator[tuple[Any, Any, AdminError | None]]:
        """(key, result or None, error or None) of every future: one key's failure does not stop the others."""
        for key, future in futures.items():
            try:
                yield key, self._wait(future, deadline), None
            except AdminError as exc:
                yield key, None, exc

    def _per_partition(self, futures: Mapping[TopicPartition, concurrent.futures.Future[T]],
                       deadline: Deadline) -> Iterator[tuple[TopicPartitionKey, T]]:
        """Each partition's result; the first failure raises, naming its partition."""
        for tp, future in futures.items():
            try:
                yield (tp.topic, tp.partition), self._wait(future, deadline)
            except AdminError as exc:
                # librdkafka's _NOENT here: the metadata has no leader for it, because it does not exist.
                code = "UNKNOWN_TOPIC_OR_PART" if exc.code == "_NOENT" else exc.code
                raise AdminError(code, f"{tp.topic}-{tp.partition}: {exc.message}",
                                 retriable=exc.retriable or code == "UNKNOWN_TOPIC_OR_PART") from exc

    @staticmethod
    def _operation_timeout(deadline: Deadline) -> float:
        """How long the broker may wait for a change to take effect: less than we wait, so its answer arrives."""
        return deadline.remaining() * 0.8

    def _each_broker(self, deadline: Deadline, api_key: int, make: Callable[[int], Any]) -> Iterator[
            tuple[BrokerInfo, Any]]:
        """(broker, response) of one request sent to every registered broker, ``make(version)`` building it.

        A broker that cannot be asked fails the whole call: its share of the answer would be missing.
        """
        for broker in self._describe_cluster(deadline).brokers:
            with self._wire.connect(broker, deadline) as wire:
                response = wire.call(make(wire.version(api_key, _READABLE[api_key])))
            error = _wire_error(getattr(response, "error_code", None))  # DescribeLogDirs has it from v3
            if error is not None:
                raise AdminError(error.code, f"broker {broker.node_id}: {error.message}", retriable=error.retriable)
            yield broker, response

    def _to_controller(self, deadline: Deadline, api_key: int, make: Callable[[], Any]) -> Any:
        """The controller's response to a request; NOT_CONTROLLER (retried by ``_retry``) if it moved."""
        cluster = self._describe_cluster(deadline)
        controller = cluster.broker(cluster.controller_id)
        if controller is None:
            raise AdminError("NOT_CONTROLLER", "the cluster has no controller at the moment", retriable=True)
        with self._wire.connect(controller, deadline) as wire:
            wire.version(api_key, _READABLE[api_key])  # one version is read: fail clearly if the broker has not got it
            response = wire.call(make())
        if int(response.error_code.value) == _NOT_CONTROLLER:
            raise AdminError.from_wire(_NOT_CONTROLLER, response.error_message)
        return response

    # ------------------------------------------------------------------ cluster and topics

    def describe_cluster(self) -> ClusterInfo:
        return self._retry(self._describe_cluster)

    def _describe_cluster(self, deadline: Deadline) -> ClusterInfo:
        found = self._wait(self._client.describe_cluster(request_timeout=deadline.remaining()), deadline)
        brokers = tuple(sorted((BrokerInfo(int(n.id), str(n.host), int(n.port), n.rack or None) for n in found.nodes),
                               key=lambda b: b.node_id))
        controller = found.controller
        return ClusterInfo(str(found.cluster_id or ""), -1 if controller is None else int(controller.id), brokers)

    def topics(self, *, include_internal: bool = False) -> dict[str, TopicInfo]:
        """Every topic and its partitions' leaders, replicas and ISR."""
        def attempt(deadline: Deadline) -> dict[str, TopicInfo]:
            try:
                names = list(self._client.list_topics(timeout=deadline.remaining()).topics)
            except KafkaException as exc:
                raise _from_exception(exc) from exc
            return self._describe_topics(names, deadline, include_internal=include_internal)
        return self._retry(attempt)

    def describe_topics(self, names: Iterable[str]) -> dict[str, TopicInfo]:
        """These topics' partitions (leaders, replicas, ISR) in one Metadata round, without listing the
        cluster's other topics; a name the cluster does not have is left out."""
        wanted = list(dict.fromkeys(names))
        if not wanted:
            return {}
        return self._retry(lambda deadline: self._describe_topics(wanted, deadline, include_internal=True))

    def _describe_topics(self, names: list[str], deadline: Deadline, *,
                         include_internal: bool) -> dict[str, TopicInfo]:
        if not names:
            return {}
        futures = self._client.describe_topics(TopicCollection(names), request_timeout=deadline.remaining())
        topics: dict[str, TopicInfo] = {}
        for name, found, error in self._outcomes(futures, deadline):
            if error is not None:
                if error.code == "UNKNOWN_TOPIC_OR_PART":
                    continue  # deleted since it was listed, or never there
                raise error
            if found.is_internal and not include_internal:
                continue
            partitions = tuple(sorted(
                (PartitionInfo(int(p.id), -1 if p.leader is None else int(p.leader.id),
                               tuple(int(r.id) for r in p.replicas), tuple(int(r.id) for r in p.isr))
                 for p in found.partitions), key=lambda p: p.partition))
            topic_id = str(found.topic_id) if found.topic_id is not None else None
            topics[name] = TopicInfo(name, topic_id, bool(found.is_internal), partitions)
        return dict(sorted(topics.items()))

    def topic_configs(self, names: Iterable[str]) -> dict[str, dict[str, ConfigEntry]]:
        """Every config of each topic, with where its value comes from (see ``overrides``)."""
        resources = [ConfigResource(ResourceType.TOPIC, name) for name in dict.fromkeys(names)]
        if not resources:
            return {}

        def attempt(deadline: Deadline) -> dict[str, dict[str, ConfigEntry]]:
            futures = self._client.describe_configs(resources, request_timeout=deadline.remaining())
            described: dict[str, dict[str, ConfigEntry]] = {}
            for resource, entries, error in self._outcomes(futures, deadline):
                if error is not None:
                    raise AdminError(error.code, f"topic {resource.name!r}: {error.message}",
                                     retriable=error.retriable)
                described[resource.name] = {
                    name: ConfigEntry(name, entry.value, _source_name(entry.source),
                                      bool(entry.is_default), bool(entry.is_read_only), bool(entry.is_sensitive),
                                      tuple(ConfigSynonym(s.name, s.value, _source_name(s.source))
                                            for s in (entry.synonyms or {}).values()))
                    for name, entry in sorted(entries.items())}
            return described
        return self._retry(attempt)

    def create_topics(self, specs: Iterable[NewTopic], *, validate_only: bool = False) -> dict[
            str, AdminError | None]:
        """Each topic's outcome (None: created, or valid with ``validate_only``)."""
        new = [self._new_topic(spec) for spec in specs]
        if not new:
            return {}

        def attempt(deadline: Deadline) -> dict[str, AdminError | None]:
            futures = self._client.create_topics(new, validate_only=validate_only,
                                                 request_timeout=deadline.remaining(),
                                                 operation_timeout=self._operation_timeout(deadline))
            return {name: error for name, _, error in self._outcomes(futures, deadline)}
        return self._once(attempt)

    @staticmethod
    def _new_topic(spec: NewTopic) -> KafkaNewTopic:
        configs = {str(k): str(v) for k, v in spec.configs.items()}
        if spec.assignments is None:
            return KafkaNewTopic(spec.name, spec.partitions, spec.replication_factor, config=configs)
        # librdkafka wants the partition count beside a layout (it sends -1 for both counts, as Kafka requires).
        return KafkaNewTopic(spec.name, spec.partitions, replica_assignment=[list(r) for r in spec.assignments],
                             config=configs)

    def create_partitions(self, name: str, total: int, assignments: Sequence[Sequence[int]] | None = None) -> None:
        """Grow ``name`` to ``total`` partitions; ``assignments`` lay out only the new ones."""
        grow = (NewPartitions(name, total) if assignments is None
                else NewPartitions(name, total, replica_assignment=[list(r) for r in assignments]))

        def attempt(deadline: Deadline) -> None:
            futures = self._client.create_partitions([grow], request_timeout=deadline.remaining(),
                                                     operation_timeout=self._operation_timeout(deadline))
            self._wait(futures[name], deadline)
        self._once(attempt)

    def alter_topic_configs(self, name: str, set_: Mapping[str, str], delete: Iterable[str] = ()) -> None:
        """Set some configs and remove others (back to the inherited value), leaving the rest as they are."""
        changes = [KafkaConfigEntry(k, str(v), incremental_operation=AlterConfigOpType.SET) for k, v in set_.items()]
        changes += [KafkaConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete]
        if not changes:
            return
        resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=changes)

        def attempt(deadline: Deadline) -> None:
            [future] = self._client.incremental_alter_configs([resource],
                                                              request_timeout=deadline.remaining()).values()
            self._wait(future, deadline)
        self._retry(attempt)

    def alter_broker_configs(self, node_id: int, set_: Mapping[str, str], delete: Iterable[str] = ()) -> None:
        """Set and remove dynamic configs of one broker (librdkafka sends the request to that broker)."""
        changes = [KafkaConfigEntry(k, str(v), incremental_operation=AlterConfigOpType.SET) for k, v in set_.items()]
        changes += [KafkaConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete]
        if not changes:
            return
        resource = ConfigResource(ResourceType.BROKER, str(node_id), incremental_configs=changes)

        def attempt(deadline: Deadline) -> None:
            [future] = self._client.incremental_alter_configs([resource],
                                                              request_timeout=deadline.remaining()).values()
            self._wait(future, deadline)
        self._retry(attempt)

    def broker_configs(self, node_id: int) -> dict[str, ConfigEntry]:
        """Every config of one broker, with where its value comes from."""
        resource = ConfigResource(ResourceType.BROKER, str(node_id))

        def attempt(deadline: Deadline) -> dict[str, ConfigEntry]:
            futures = self._client.describe_configs([resource], request_timeout=deadline.remaining())
            for _, entries, error in self._outcomes(futures, deadline):
                if error is not None:
                    raise AdminError(error.code, f"broker {node_id}: {error.message}", retriable=error.retriable)
                return {name: ConfigEntry(name, entry.value, _source_name(entry.source), bool(entry.is_default),
                                          bool(entry.is_read_only), bool(entry.is_sensitive))
                        for name, entry in sorted(entries.items())}
            return {}
        return self._retry(attempt)

    def delete_topics(self, names: Iterable[str]) -> dict[str, AdminError | None]:
        wanted = list(dict.fromkeys(names))
        if not wanted:
            return {}

        def attempt(deadline: Deadline) -> dict[str, AdminError | None]:
            futures = self._client.delete_topics(wanted, request_timeout=deadline.remaining(),
                                                 operation_timeout=self._operation_timeout(deadline))
            return {name: error for name, _, error in self._outcomes(futures, deadline)}
        return self._once(attempt)

    # ------------------------------------------------------------------ replicas and leaders

    def alter_reassignments(self, targets: Mapping[TopicPartitionKey, Sequence[int] | None]) -> dict[
            TopicPartitionKey, AdminError | None]:
        """Start moving partitions to new replica lists (None cancels a move); the controller completes them.

        Each partition's outcome; raises only when the controller cannot be asked at all.
        """
        if not targets:
            return {}
        by_topic: dict[str, list[ReassignablePartition]] = {}
        for (topic, partition), replicas in targets.items():
            wanted = None if replicas is None else tuple(BrokerId(r) for r in replicas)
            by_topic.setdefault(topic, []).append(ReassignablePartition(partition_index=i32(partition),
                                                                        replicas=wanted))

        def attempt(deadline: Deadline) -> Any:
            return self._to_controller(deadline, _ALTER_REASSIGNMENTS, lambda: AlterPartitionReassignmentsRequest(
                timeout=_timeout_ms(deadline), topics=tuple(ReassignableTopic(name=TopicName(t), partitions=tuple(ps))
                                                            for t, ps in by_topic.items())))
        # Retried only when the controller refused the whole request, so nothing has started.
        response = self._retry(attempt)
        everything = _wire_error(response.error_code, response.error_message)
        if everything is not None:
            return dict.fromkeys(targets, everything)
        results: dict[TopicPartitionKey, AdminError | None] = dict.fromkeys(
            targets, AdminError("UNKNOWN", "the controller did not answer for this partition"))
        for topic_result in response.responses:
            for part in topic_result.partitions:
                results[(str(topic_result.name), int(part.partition_index))] = _wire_error(
                    part.error_code, part.error_message)
        return results

    def list_reassignments(self) -> dict[TopicPartitionKey, Reassignment]:
        def attempt(deadline: Deadline) -> dict[TopicPartitionKey, Reassignment]:
            response = self._to_controller(deadline, _LIST_REASSIGNMENTS, lambda: ListPartitionReassignmentsRequest(
                timeout=_timeout_ms(deadline), topics=None))
            error = _wire_error(response.error_code, response.error_message)
            if error is not None:
                raise error
            return {(str(t.name), int(p.partition_index)): Reassignment(
                str(t.name), int(p.partition_index), tuple(int(r) for r in p.replicas),
                tuple(int(r) for r in p.adding_replicas), tuple(int(r) for r in p.removing_replicas))
                for t in response.topics for p in t.partitions}
        return self._retry(attempt)

    def elect_preferred_leaders(self, partitions: Iterable[TopicPartitionKey] | None = None) -> dict[
            TopicPartitionKey, AdminError | None]:
        """Give leadership back to each partition's first replica; a partition already led by it succeeds.

        With ``partitions`` None every partition is considered and only those that
        changed or failed are reported, as Kafka does.
        """
        wanted = None if partitions is None else [TopicPartition(t, p) for t, p in dict.fromkeys(partitions)]
        if wanted == []:
            return {}

        def attempt(deadline: Deadline) -> dict[TopicPartitionKey, AdminError | None]:
            # confluent-kafka 2.16's binding fails on any timeout argument here: socket.timeout.ms (see
            # __init__) bounds the request instead, and _wait the call.
            future = self._client.elect_leaders(ElectionType.PREFERRED, wanted)
            results: dict[TopicPartitionKey, AdminError | None] = {}
            for tp, failure in self._wait(future, deadline).items():
                error = None
                if isinstance(failure, KafkaError):
                    error = AdminError.from_kafka(failure)
                elif failure is not None:  # a KafkaException, as confluent-kafka documents
                    error = _from_exception(failure)
                results[(tp.topic, tp.partition)] = None if error is None or error.code == "ELECTION_NOT_NEEDED" \
                    else error
            return results
        return self._retry(attempt)  # an election that already happened is ELECTION_NOT_NEEDED: success

    # ------------------------------------------------------------------ client quotas (KIP-546; librdkafka lacks them)

    def client_quotas(self) -> dict[QuotaEntity, dict[str, float]]:
        """Every quota entity in the cluster and its keys (DescribeClientQuotas, no filter, not strict)."""
        def attempt(deadline: Deadline) -> dict[QuotaEntity, dict[str, float]]:
            broker = self._describe_cluster(deadline).brokers[0]
            with self._wire.connect(broker, deadline) as wire:
                version = wire.version(_DESCRIBE_CLIENT_QUOTAS, _READABLE[_DESCRIBE_CLIENT_QUOTAS])
                response = wire.call(_request(_DESCRIBE_CLIENT_QUOTAS, version,
                                              components=(), strict=False))
            error = _wire_error(response.error_code, response.error_message)
            if error is not None:
                raise error
            return {tuple(sorted((str(e.entity_type), None if e.entity_name is None else str(e.entity_name))
                                 for e in entry.entity)): {str(v.key): float(v.value) for v in entry.values}
                    for entry in response.entries or ()}
        return self._retry(attempt)

    def alter_client_quotas(self, changes: Mapping[QuotaEntity, Mapping[str, float | None]], *,
                            validate_only: bool = False) -> dict[QuotaEntity, AdminError | None]:
        """Set (a value) or remove (None) quota keys per entity; each entity's outcome.

        Any broker takes them (they go to the metadata store). Not retried: a lost answer may have been applied,
        and the caller's next reconcile pass sees the result either way.
        """
        if not changes:
            return {}
        entries = list(changes.items())

        def attempt(deadline: Deadline) -> dict[QuotaEntity, AdminError | None]:
            broker = self._describe_cluster(deadline).brokers[0]
            with self._wire.connect(broker, deadline) as wire:
                version = wire.version(_ALTER_CLIENT_QUOTAS, _READABLE[_ALTER_CLIENT_QUOTAS])
                schema: Any = load_request_schema(_ALTER_CLIENT_QUOTAS, version)
                entry_type = _field_type(schema, "entries")
                entity_type = _field_type(entry_type, "entity")
                op_type = _field_type(entry_type, "ops")
                request = schema(validate_only=validate_only, entries=tuple(
                    entry_type(entity=tuple(entity_type(entity_type=t, entity_name=n) for t, n in entity),
                               ops=tuple(op_type(key=k, value=f64(0.0 if v is None else v), remove=v is None)
                                         for k, v in ops.items()))
                    for entity, ops in entries))
                response = wire.call(request)
            results: dict[QuotaEntity, AdminError | None] = {}
            for (entity, _), answer in zip(entries, response.entries, strict=True):
                results[entity] = _wire_error(answer.error_code, answer.error_message)
            return results
        return self._once(attempt)

    # ------------------------------------------------------------------ transactions (KIP-664; librdkafka lacks them)

    def open_transactions(self) -> list[TransactionInfo]:
        """Every transaction open in the cluster (ListTransactions to each broker, then DescribeTransactions to the
        same broker, its coordinator), by transactional id."""
        def attempt(deadline: Deadline) -> list[TransactionInfo]:
            found: list[TransactionInfo] = []
            for broker in self._describe_cluster(deadline).brokers:
                with self._wire.connect(broker, deadline) as wire:
                    version = wire.version(_LIST_TRANSACTIONS, _READABLE[_LIST_TRANSACTIONS])
                    listed = wire.call(_request(_LIST_TRANSACTIONS, version,
                                                state_filters=_OPEN_TRANSACTION_STATES, producer_id_filters=()))
                    error = _wire_error(listed.error_code)
                    if error is not None:
                        raise AdminError(error.code, f"broker {broker.node_id}: {error.message}",
                                         retriable=error.retriable)
                    ids = tuple(sorted(str(t.transactional_id) for t in listed.transaction_states))
                    if not ids:
                        continue
                    wire.version(_DESCRIBE_TRANSACTIONS, _READABLE[_DESCRIBE_TRANSACTIONS])
                    described = wire.call(_request(_DESCRIBE_TRANSACTIONS, 0, transactional_ids=ids))
                for state in described.transaction_states:
                    if _wire_error(state.error_code) is None and state.transaction_state in _OPEN_TRANSACTION_STATES:
                        found.append(_transaction_info(state, broker.node_id))
            return sorted(found, key=lambda t: t.transactional_id)
        return self._retry(attempt)

    def abort_transaction(self, transactional_id: str) -> None:
        """Abort the id's open transaction by fencing its producer, as a new instance of that producer does when it
        starts (InitProducerId with the id: the coordinator bumps the epoch and writes abort markers). The fenced
        producer's next request fails as fenced; nothing it wrote in the transaction becomes readable.

        An id with no open transaction is left as it is. Retried while the coordinator is still completing it.
        """
        def attempt(deadline: Deadline) -> None:
            coordinator = self._transaction_coordinator(deadline, transactional_id)
            with self._wire.connect(coordinator, deadline) as wire:
                wire.version(_DESCRIBE_TRANSACTIONS, _READABLE[_DESCRIBE_TRANSACTIONS])
                described = wire.call(_request(_DESCRIBE_TRANSACTIONS, 0, transactional_ids=(transactional_id,)))
                state = described.transaction_states[0]
                error = _wire_error(state.error_code)
                if error is not None:
                    raise error
                if state.transaction_state not in _OPEN_TRANSACTION_STATES:
                    return
                version = wire.version(_INIT_PRODUCER_ID, _READABLE[_INIT_PRODUCER_ID])
                answer = wire.call(_request(_INIT_PRODUCER_ID, version, transactional_id=transactional_id,
                                            transaction_timeout=state.transaction_timeout))
            error = _wire_error(answer.error_code)
            if error is not None:
                if error.code == "CONCURRENT_TRANSACTIONS":  # the abort is under way: ask again until it is done
                    raise AdminError("CONCURRENT_TRANSACTIONS", error.message, retriable=True)
                raise error
        self._retry(attempt)

    def _transaction_coordinator(self, deadline: Deadline, transactional_id: str) -> BrokerInfo:
        cluster = self._describe_cluster(deadline)
        with self._wire.connect(cluster.brokers[0], deadline) as wire:
            version = wire.version(_FIND_COORDINATOR, _READABLE[_FIND_COORDINATOR])
            response = wire.call(_request(_FIND_COORDINATOR, version, key_type=i8(_TRANSACTION_COORDINATOR),
                                          coordinator_keys=(transactional_id,)))
        found = response.coordinators[0]
        error = _wire_error(found.error_code, found.error_message)
        if error is not None:
            raise error
        broker = cluster.broker(int(found.node_id))
        if broker is None:
            raise AdminError("COORDINATOR_NOT_AVAILABLE", f"broker {found.node_id} is not registered", retriable=True)
        return broker

    def partition_sizes(self, partitions: Iterable[TopicPartitionKey] | None = None) -> list[PartitionSize]:
        """Every replica's log size on every broker (DescribeLogDirs), or only of ``partitions`` (each broker
        then reads and sends just those); an offline log directory reports none."""
        wanted: dict[str, list[int]] | None = None
        if partitions is not None:
            wanted = {}
            for topic, index in dict.fromkeys(partitions):
                wanted.setdefault(topic, []).append(index)
            if not wanted:
                return []

        def make(version: int) -> Any:
            if wanted is None:
                return _request(_DESCRIBE_LOG_DIRS, version, topics=None)
            schema: Any = load_request_schema(_DESCRIBE_LOG_DIRS, version)
            topic_type = sys.modules[schema.__module__].DescribableLogDirTopic
            return schema(topics=tuple(topic_type(topic=TopicName(t), partitions=tuple(i32(p) for p in ps))
                                       for t, ps in wanted.items()))

        def attempt(deadline: Deadline) -> list[PartitionSize]:
            sizes = [PartitionSize(str(t.name), int(p.partition_index), broker.node_id, int(p.partition_size),
                                   int(p.offset_lag))
                     for broker, response in self._each_broker(deadline, _DESCRIBE_LOG_DIRS, make)
                     for result in response.results if not int(result.error_code.value)
                     for t in result.topics for p in t.partitions if not p.is_future_key]
            return sorted(sizes, key=lambda s: (s.topic, s.partition, s.broker))
        return self._retry(attempt)

    # ------------------------------------------------------------------ records

    def offsets(self, partitions: Iterable[TopicPartitionKey], spec: OffsetSpecArg) -> dict[TopicPartitionKey, int]:
        """The earliest or latest (high watermark) offset of each partition, or the first offset whose record
        has a timestamp at or after ``spec`` milliseconds (-1 if there is none)."""
        if spec == "earliest":
            kind = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
        elif spec == "latest":
            kind = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        elif isinstance(spec, int):
            kind = OffsetSpec.for_timestamp(spec)
        else:
            raise ValueError(f"offset spec must be 'earliest', 'latest' or a timestamp in ms, not {spec!r}")
        wanted = {TopicPartition(t, p): kind for t, p in dict.fromkeys(partitions)}
        if not wanted:
            return {}

        def attempt(deadline: Deadline) -> dict[TopicPartitionKey, int]:
            futures = self._client.list_offsets(wanted, request_timeout=deadline.remaining())
            return {tp: int(found.offset) for tp, found in self._per_partition(futures, deadline)}
        return self._retry(attempt)

    def delete_records(self, before: Mapping[TopicPartitionKey, int]) -> dict[TopicPartitionKey, int]:
        """Drop each partition's records below an offset (-1: the high watermark); the new log start offsets."""
        if not before:
            return {}
        wanted = [TopicPartition(t, p, offset) for (t, p), offset in before.items()]

        def attempt(deadline: Deadline) -> dict[TopicPartitionKey, int]:
            futures = self._client.delete_records(wanted, request_timeout=deadline.remaining(),
                                                  operation_timeout=self._operation_timeout(deadline))
            return {tp: int(found.low_watermark) for tp, found in self._per_partition(futures, deadline)}
        return self._retry(attempt)  # deleting below the same offset twice deletes nothing more

    # ------------------------------------------------------------------ consumer groups

    def groups(self) -> list[GroupListing]:
        """Every group the cluster's coordinators know (ListGroups to each broker), by group id."""
        def attempt(deadline: Deadline) -> list[GroupListing]:
            found = {str(g.group_id): GroupListing(str(g.group_id), str(getattr(g, "group_state", "")),  # v4+
                                                   str(g.protocol_type))
                     for _, response in self._each_broker(deadline, _LIST_GROUPS, lambda v: _request(_LIST_GROUPS, v))
                     for g in response.groups}
            return [found[g] for g in sorted(found)]
        return self._retry(attempt)

    def describe_group(self, group_id: str) -> GroupDescription:
        """A group's state and members; GROUP_ID_NOT_FOUND for a group the cluster does not know."""
        def attempt(deadline: Deadline) -> GroupDescription:
            futures = self._client.describe_consumer_groups([group_id], request_timeout=deadline.remaining())
            found = self._wait(futures[group_id], deadline)
            state = _state_name(found.state)
            if state == "Dead":  # what DescribeGroups before v6 answers for an unknown group
                raise AdminError("GROUP_ID_NOT_FOUND", f"group {group_id!r} does not exist")
            members = tuple(
                Member(str(m.member_id), str(m.client_id), str(m.host), m.group_instance_id or None,
                       tuple(sorted((tp.topic, tp.partition) for tp in (m.assignment.topic_partitions
                                                                         if m.assignment else ()))))
                for m in found.members)
            return GroupDescription(str(found.group_id), state, str(found.partition_assignor or ""), members)
        return self._retry(attempt)

    def committed_offsets(self, group_id: str) -> dict[TopicPartitionKey, int]:
        """The group's committed offset of every partition it has committed to."""
        def attempt(deadline: Deadline) -> dict[TopicPartitionKey, int]:
            futures = self._client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id)],
                                                               request_timeout=deadline.remaining())
            listed = self._wait(futures[group_id], deadline)
            committed: dict[TopicPartitionKey, int] = {}
            for tp in listed.topic_partitions or ():
                if tp.error is not None:
                    raise AdminError.from_kafka(tp.error)
                if tp.offset >= 0:
                    committed[(tp.topic, tp.partition)] = int(tp.offset)
            return dict(sorted(committed.items()))
        return self._retry(attempt)

    def alter_group_offsets(self, group_id: str, offsets: Mapping[TopicPartitionKey, int]) -> None:
        """Set a group's committed offsets (a reset). The group must be empty: NON_EMPTY_GROUP otherwise."""
        if not offsets:
            return
        request = ConsumerGroupTopicPartitions(group_id, [TopicPartition(t, p, o) for (t, p), o in offsets.items()])

        def attempt(deadline: Deadline) -> None:
            futures = self._client.alter_consumer_group_offsets([request], request_timeout=deadline.remaining())
            try:
                altered = self._wait(futures[group_id], deadline)
                failures = [AdminError.from_kafka(tp.error) for tp in altered.topic_partitions or () if tp.error]
            except AdminError as exc:
                failures = [exc]
            if not failures:
                return
            error = failures[0]
            if error.code in _GROUP_HAS_MEMBERS:
                raise AdminError("NON_EMPTY_GROUP", f"group {group_id!r} has active members: its offsets can be "
                                 f"altered only while it is empty (broker said {error.code})") from None
            raise error
        self._retry(attempt)

    # ------------------------------------------------------------------ ACLs

    def acls(self) -> list[AclSpec]:
        """Every ACL in the cluster (DescribeAcls with a match-anything filter)."""
        # None is librdkafka's "any" for a filter's names (its stubs say str).
        match_all = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,  # type: ignore[arg-type]
                                     KafkaAclOperation.ANY, AclPermissionType.ANY)

        def attempt(deadline: Deadline) -> list[AclSpec]:
            found = self._wait(self._client.describe_acls(match_all, request_timeout=deadline.remaining()),
                               deadline)
            return sorted(_acl_spec(binding) for binding in found)
        return self._retry(attempt)

    def create_acls(self, specs: Iterable[AclSpec]) -> dict[AclSpec, AdminError | None]:
        wanted = {_acl_binding(spec): spec for spec in dict.fromkeys(specs)}
        if not wanted:
            return {}

        def attempt(deadline: Deadline) -> dict[AclSpec, AdminError | None]:
            futures = self._client.create_acls(list(wanted), request_timeout=deadline.remaining())
            return {wanted[binding]: error for binding, _, error in self._outcomes(futures, deadline)}
        return self._once(attempt)

    def delete_acls(self, specs: Iterable[AclSpec]) -> dict[AclSpec, AdminError | None]:
        """Delete exactly these ACLs (each filter names every field, so nothing else matches)."""
        wanted = {_acl_binding(spec, filter_=True): spec for spec in dict.fromkeys(specs)}
        if not wanted:
            return {}

        def attempt(deadline: Deadline) -> dict[AclSpec, AdminError | None]:
            futures = self._client.delete_acls(list(wanted), request_timeout=deadline.remaining())
            return {wanted[binding]: error for binding, _, error in self._outcomes(futures, deadline)}
        return self._once(attempt)
