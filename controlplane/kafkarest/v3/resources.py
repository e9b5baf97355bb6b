"""v3 resources in Confluent's shapes: read live through the Kafka admin API, changed through the
control plane's own services so the desired state (topics, ACLs) stays the truth reconcile keeps.

A topic created, grown, reconfigured or deleted here is first recorded as desired state (with its
audit record) and then applied to the cluster at once, so the REST client sees the change done when
the call returns, as with Confluent's REST Proxy; reconcile then finds nothing left to do.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from controlplane.audit.services import audit_record
from controlplane.clusters.models import Cluster
from controlplane.core.actors import Actor
from controlplane.core.errors import ApplicationError
from controlplane.kafkarest.access import Caller, ClusterAccess
from controlplane.kafkarest.errors import (
    BAD_REQUEST,
    CONSUMER_GROUP_NOT_FOUND,
    NOT_FOUND,
    PARTITION_NOT_FOUND,
    TOPIC_NOT_FOUND,
    TRANSACTION_NOT_FOUND,
    RestError,
)
from controlplane.kafkarest.kafka_admin import KAFKA_BAD_REQUEST, cluster_admin, rest_error_for_admin
from controlplane.resources import services as topics_service
from controlplane.resources.models import AclBinding, Topic
from dataplane.client.admin import (
    AdminError,
    ClusterAdmin,
    ConfigEntry,
    NewTopic,
    PartitionInfo,
    TopicInfo,
    TransactionInfo,
)
from dataplane.client.lag import compute_lag


@dataclass(frozen=True, slots=True)
class Links:
    """Builds the ``metadata.self`` URLs and ``crn`` resource names of one cluster's resources."""

    base: str
    cluster_id: str

    def url(self, *parts: object) -> str:
        tail = "/".join(str(p) for p in parts)
        return f"{self.base}/kafka/v3/clusters/{self.cluster_id}" + (f"/{tail}" if tail else "")

    def crn(self, *pairs: tuple[str, object]) -> str:
        return f"crn:///kafka={self.cluster_id}" + "".join(f"/{k}={v}" for k, v in pairs)

    def resource(self, kind: str, url: str, crn: str | None = None, **fields: Any) -> dict[str, Any]:
        return {"kind": kind, "metadata": {"self": url, "resource_name": crn}, "cluster_id": self.cluster_id,
                **fields}

    def collection(self, kind: str, url: str, data: list[dict[str, Any]]) -> dict[str, Any]:
        return {"kind": kind, "metadata": {"self": url, "next": None}, "data": data}


def related(url: str) -> dict[str, str]:
    return {"related": url}


# ---------------------------------------------------------------------------------------------- clusters, brokers


def cluster_body(links: Links, controller_id: int | None) -> dict[str, Any]:
    return links.resource(
        "KafkaCluster", links.url(), links.crn(),
        controller=related(links.url("brokers", controller_id)) if controller_id is not None and controller_id >= 0
        else None,
        acls=related(links.url("acls")), brokers=related(links.url("brokers")),
        broker_configs=related(links.url("broker-configs")), consumer_groups=related(links.url("consumer-groups")),
        topics=related(links.url("topics")),
        partition_reassignments=related(links.url("topics", "-", "partitions", "-", "reassignment")))


def clusters(caller: Caller, base: str) -> list[dict[str, Any]]:
    """Every cluster the caller reaches (controller links are read per cluster only on GET of one)."""
    tenant_ids = [tid for tid, _ in caller.roles]
    rows = Cluster.objects.filter(tenant_id__in=tenant_ids, deletion_requested_at__isnull=True).order_by("name")
    if caller.cluster_scope is not None:
        rows = rows.filter(kafka_cluster_id=caller.cluster_scope)
    return [cluster_body(Links(base, c.kafka_cluster_id), None) for c in rows]


def cluster(access: ClusterAccess, base: str) -> dict[str, Any]:
    with cluster_admin(access) as admin:
        info = admin.describe_cluster()
    return cluster_body(Links(base, access.kafka_cluster_id), info.controller_id)


def brokers(access: ClusterAccess, links: Links) -> list[dict[str, Any]]:
    with cluster_admin(access) as admin:
        info = admin.describe_cluster()
    return [links.resource("KafkaBroker", links.url("brokers", b.node_id), links.crn(("broker", b.node_id)),
                           broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack,
                           configs=related(links.url("brokers", b.node_id, "configs")),
                           partition_replicas=related(links.url("brokers", b.node_id, "partition-replicas")))
            for b in info.brokers]


def broker(access: ClusterAccess, links: Links, broker_id: int) -> dict[str, Any]:
    found = next((b for b in brokers(access, links) if b["broker_id"] == broker_id), None)
    if found is None:
        raise RestError(NOT_FOUND, f"Broker {broker_id} not found.")
    return found


# ---------------------------------------------------------------------------------------------- topics


def _topic_body(links: Links, topic: TopicInfo) -> dict[str, Any]:
    name = topic.name
    return links.resource(
        "KafkaTopic", links.url("topics", name), links.crn(("topic", name)), topic_name=name,
        is_internal=topic.internal,
        replication_factor=len(topic.partitions[0].replicas) if topic.partitions else 0,
        partitions_count=len(topic.partitions), partitions=related(links.url("topics", name, "partitions")),
        configs=related(links.url("topics", name, "configs")),
        partition_reassignments=related(links.url("topics", name, "partitions", "-", "reassignment")),
        authorized_operations=[])


def _described(admin: ClusterAdmin, name: str) -> TopicInfo:
    found = admin.topics(include_internal=True).get(name)
    if found is None:
        raise RestError(TOPIC_NOT_FOUND, "This server does not host this topic-partition.")
    return found


def topics(access: ClusterAccess, links: Links) -> list[dict[str, Any]]:
    with cluster_admin(access) as admin:
        found = admin.topics(include_internal=True)
    return [_topic_body(links, found[name]) for name in sorted(found)]


def topic(access: ClusterAccess, links: Links, name: str) -> dict[str, Any]:
    with cluster_admin(access) as admin:
        return _topic_body(links, _described(admin, name))


def _as_rest(exc: ApplicationError) -> RestError:
    code = KAFKA_BAD_REQUEST if exc.http_status in (400, 409) else exc.http_status
    return RestError(code, exc.message)


def _configs_list(value: Any) -> dict[str, str | None]:
    if value is None:
        return {}
    if not isinstance(value, list) or not all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in value):
        raise RestError(BAD_REQUEST, "configs must be a list of {name, value}.")
    return {c["name"]: None if c.get("value") is None else str(c["value"]) for c in value}


def create_topic(access: ClusterAccess, links: Links, actor: Actor, body: Any) -> dict[str, Any]:
    if not isinstance(body, dict) or not isinstance(body.get("topic_name"), str):
        raise RestError(BAD_REQUEST, "topic_name is required.")
    name = body["topic_name"]
    partitions = body.get("partitions_count")
    factor = body.get("replication_factor")
    for field, value in (("partitions_count", partitions), ("replication_factor", factor)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise RestError(BAD_REQUEST, f"{field} must be an integer.")
    configs = {k: v for k, v in _configs_list(body.get("configs")).items() if v is not None}
    if body.get("replicas_assignments"):
        raise RestError(BAD_REQUEST, "replicas_assignments is not supported: the control plane places replicas.")
    cluster_row = Cluster.objects.get(pk=access.cluster_pk)
    if partitions is not None:
        _check_partition_count(cluster_row, partitions)
    if factor is not None and not 1 <= factor <= cluster_row.broker_count:
        raise RestError(KAFKA_BAD_REQUEST, f"replication_factor must be between 1 and {cluster_row.broker_count}, "
                                           "the cluster's broker count.")
    with cluster_admin(access) as admin:
        if name in admin.topics(include_internal=True):
            raise RestError(KAFKA_BAD_REQUEST, f"Topic '{name}' already exists.")
        # The caller's own right to create it, asked of the cluster before the control plane records anything
        # (the reconcile, which acts with the control plane's access, would otherwise create it regardless).
        spec = NewTopic(name, partitions or 1, factor or min(3, cluster_row.broker_count), configs)
        error = admin.create_topics([spec], validate_only=True).get(name)
        if error is not None and (body.get("validate_only") or error.code.endswith("_AUTHORIZATION_FAILED")):
            raise rest_error_for_admin(error)
        if body.get("validate_only"):
            return _topic_body(links, TopicInfo(name, None, False, ()))
        try:
            row = topics_service.topic_create(cluster=cluster_row, name=name, actor=actor, partitions=partitions,
                                              replication_factor=factor, configs=configs)
        except ApplicationError as exc:
            raise _as_rest(exc) from exc
        error = admin.create_topics([NewTopic(name, row.partitions, row.replication_factor, dict(row.configs))]
                                    ).get(name)
        if error is not None and error.code != "TOPIC_ALREADY_EXISTS":  # reconcile may have been first
            raise rest_error_for_admin(error)
        return _topic_body(links, _created(admin, name, row.partitions, row.replication_factor))


CREATED_METADATA_SECONDS = 5.0


def _created(admin: ClusterAdmin, name: str, partitions: int, replication_factor: int) -> TopicInfo:
    """A topic just created, as the brokers' metadata describes it once it has caught up (a busy broker learns of
    a new topic a moment after CreateTopics answers); if it has not within CREATED_METADATA_SECONDS, as created
    (leaders not known yet) -- the creation succeeded, so never a 404."""
    deadline = time.monotonic() + CREATED_METADATA_SECONDS
    pause = 0.02
    while True:
        found = admin.topics(include_internal=True).get(name)
        if found is not None and len(found.partitions) == partitions:
            return found
        if time.monotonic() >= deadline:
            return TopicInfo(name, None, False, tuple(PartitionInfo(i, -1, (-1,) * replication_factor, ())
                                                      for i in range(partitions)))
        time.sleep(pause)
        pause = min(pause * 2, 0.5)


def _check_partition_count(cluster: Cluster, count: int) -> None:
    """A partition count within the cluster's partition limit, checked before the cluster is asked: the admin
    client raised (a 500) on a count below 1 or above 100,000, and no plan allows that many."""
    if not 1 <= count <= cluster.max_partitions:
        raise RestError(KAFKA_BAD_REQUEST, f"partitions_count must be between 1 and {cluster.max_partitions}, the "
                                           f"cluster's partition limit (all of its topics together), not {count}.")


def _row(access: ClusterAccess, name: str) -> Topic | None:
    return Topic.objects.filter(cluster_id=access.cluster_pk, name=name, deletion_requested_at__isnull=True).first()


def delete_topic(access: ClusterAccess, actor: Actor, name: str) -> None:
    with cluster_admin(access) as admin:
        _described(admin, name)
        # Deleted as the caller first (its ACLs decide); only then is the managed row's deletion requested.
        error = admin.delete_topics([name]).get(name)
        if error is not None and error.code not in ("UNKNOWN_TOPIC_OR_PART", "UNKNOWN_TOPIC_OR_PARTITION"):
            raise rest_error_for_admin(error)
        row = _row(access, name)
        if row is not None:
            topics_service.topic_delete(topic=row, actor=actor)


def update_partition_count(access: ClusterAccess, links: Links, actor: Actor, name: str, body: Any) -> dict[str, Any]:
    count = body.get("partitions_count") if isinstance(body, dict) else None
    if not isinstance(count, int) or isinstance(count, bool):
        raise RestError(BAD_REQUEST, "partitions_count (an integer) is required.")
    _check_partition_count(Cluster.objects.get(pk=access.cluster_pk), count)
    with cluster_admin(access) as admin:
        current = _described(admin, name)
        if count < len(current.partitions):
            raise RestError(KAFKA_BAD_REQUEST, f"Topic currently has {len(current.partitions)} partitions, which "
                                               f"is higher than the requested {count}.")
        # One transaction around the desired state and the caller's own change: if the cluster's ACLs refuse
        # the caller, the row is rolled back too (and no reconcile is asked for), so nothing half-made remains.
        with transaction.atomic():
            row = _row(access, name)
            if row is not None:
                try:
                    topics_service.topic_update(topic=row, actor=actor, partitions=count)
                except ApplicationError as exc:
                    raise _as_rest(exc) from exc
            if count > len(current.partitions):
                try:
                    admin.create_partitions(name, count)
                except AdminError as exc:
                    if exc.code != "INVALID_PARTITIONS" or len(_described(admin, name).partitions) != count:
                        raise
        return _topic_body(links, _described(admin, name))


# ---------------------------------------------------------------------------------------------- topic configs


def _config_body(links: Links, topic_name: str, entry: ConfigEntry) -> dict[str, Any]:
    return links.resource(
        "KafkaTopicConfig", links.url("topics", topic_name, "configs", entry.name),
        links.crn(("topic", topic_name), ("config", entry.name)), topic_name=topic_name, name=entry.name,
        value=None if entry.sensitive else entry.value, is_default=entry.is_default, is_read_only=entry.read_only,
        is_sensitive=entry.sensitive, source=entry.source,
        synonyms=[{"name": s.name, "value": None if entry.sensitive else s.value, "source": s.source}
                  for s in entry.synonyms])


def topic_configs(access: ClusterAccess, links: Links, names: Iterable[str] | None) -> list[dict[str, Any]]:
    with cluster_admin(access) as admin:
        wanted = list(names) if names is not None else sorted(admin.topics())
        for name in wanted if names is not None else ():
            _described(admin, name)
        configs = admin.topic_configs(wanted) if wanted else {}
    return [_config_body(links, topic_name, configs[topic_name][key])
            for topic_name in wanted for key in sorted(configs.get(topic_name, {}))]


def topic_config(access: ClusterAccess, links: Links, topic_name: str, name: str) -> dict[str, Any]:
    found = next((c for c in topic_configs(access, links, [topic_name]) if c["name"] == name), None)
    if found is None:
        raise RestError(NOT_FOUND, f"Config {name} not found.")
    return found


def alter_topic_configs(access: ClusterAccess, actor: Actor, topic_name: str,
                        changes: Mapping[str, str | None]) -> None:
    """Set (a value) or reset to default (None) each named config, as desired state and in the cluster."""
    with cluster_admin(access) as admin:
        _described(admin, topic_name)
        with transaction.atomic():  # as in update_partition_count: a refusal by the ACLs rolls the row back
            row = _row(access, topic_name)
            if row is not None:
                try:
                    topics_service.topic_update(topic=row, actor=actor, configs=dict(changes))
                except ApplicationError as exc:
                    raise _as_rest(exc) from exc
            admin.alter_topic_configs(topic_name, {k: v for k, v in changes.items() if v is not None},
                                      [k for k, v in changes.items() if v is None])


def parse_alter_batch(body: Any) -> dict[str, str | None]:
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise RestError(BAD_REQUEST, "data must be a list of {name, value, operation}.")
    changes: dict[str, str | None] = {}
    for item in data:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise RestError(BAD_REQUEST, "each entry needs a name.")
        operation = str(item.get("operation") or "SET").upper()
        if operation not in ("SET", "DELETE"):
            raise RestError(BAD_REQUEST, f"operation must be SET or DELETE, not {operation!r}.")
        changes[item["name"]] = None if operation == "DELETE" else \
            (None if item.get("value") is None else str(item["value"]))
        if operation == "SET" and changes[item["name"]] is None:
            raise RestError(BAD_REQUEST, f"{item['name']}: SET needs a value.")
    return changes


# ---------------------------------------------------------------------------------------------- partitions


def _partition_body(links: Links, topic_name: str, partition: Any) -> dict[str, Any]:
    base = ("topics", topic_name, "partitions", partition.partition)
    return links.resource(
        "KafkaPartition", links.url(*base), links.crn(("topic", topic_name), ("partition", partition.partition)),
        topic_name=topic_name, partition_id=partition.partition,
        leader=related(links.url(*base, "replicas", partition.leader)) if partition.leader >= 0 else None,
        replicas=related(links.url(*base, "replicas")), reassignment=related(links.url(*base, "reassignment")))


def partitions(access: ClusterAccess, links: Links, topic_name: str) -> list[dict[str, Any]]:
    with cluster_admin(access) as admin:
        found = _described(admin, topic_name)
    return [_partition_body(links, topic_name, p) for p in found.partitions]


def _partition(admin: ClusterAdmin, topic_name: str, partition_id: int) -> Any:
    found = _described(admin, topic_name)
    partition = next((p for p in found.partitions if p.partition == partition_id), None)
    if partition is None:
        raise RestError(PARTITION_NOT_FOUND, "Partition not found.")
    return partition


def partition(access: ClusterAccess, links: Links, topic_name: str, partition_id: int) -> dict[str, Any]:
    with cluster_admin(access) as admin:
        return _partition_body(links, topic_name, _partition(admin, topic_name, partition_id))


def partition_offsets(access: ClusterAccess, links: Links, topic_name: str, partition_id: int) -> dict[str, Any]:
    with cluster_admin(access) as admin:
        _partition(admin, topic_name, partition_id)
        key = (topic_name, partition_id)
        earliest = admin.offsets([key], "earliest")[key]
        latest = admin.offsets([key], "latest")[key]
    base = ("topics", topic_name, "partitions", partition_id)
    return links.resource("KafkaPartitionWithOffsets", links.url(*base, "offset"),
                          links.crn(("topic", topic_name), ("partition", partition_id)), topic_name=topic_name,
                          partition_id=partition_id, earliest_offset=earliest, latest_offset=latest)


def replicas(access: ClusterAccess, links: Links, topic_name: str, partition_id: int) -> list[dict[str, Any]]:
    with cluster_admin(access) as admin:
        found = _partition(admin, topic_name, partition_id)
    base = ("topics", topic_name, "partitions", partition_id, "replicas")
    return [links.resource("KafkaReplica", links.url(*base, broker_id),
                           links.crn(("topic", topic_name), ("partition", partition_id), ("replica", broker_id)),
                           topic_name=topic_name, partition_id=partition_id, broker_id=broker_id,
                           is_leader=broker_id == found.leader, is_in_sync=broker_id in found.isr,
                           broker=related(links.url("brokers", broker_id)))
            for broker_id in found.replicas]


# ---------------------------------------------------------------------------------------------- consumer groups


def _group_body(links: Links, group_id: str, state: str, protocol: str, simple: bool,
                coordinator: int | None = None) -> dict[str, Any]:
    base = ("consumer-groups", group_id)
    return links.resource(
        "KafkaConsumerGroup", links.url(*base), links.crn(("consumer-group", group_id)), consumer_group_id=group_id,
        is_simple=simple, partition_assignor=protocol, state=(state or "UNKNOWN").upper().replace(" ", "_"),
        type="CLASSIC", coordinator=related(links.url("brokers", coordinator)) if coordinator is not None else None,
        consumers=related(links.url(*base, "consumers")), lag_summary=related(links.url(*base, "lag-summary")))


def consumer_groups(access: ClusterAccess, links: Links) -> list[dict[str, Any]]:
    with cluster_admin(access) as admin:
        listed = admin.groups()
        out = []
        for group in sorted(listed, key=lambda g: g.group_id):
            described = admin.describe_group(group.group_id)
            out.append(_group_body(links, group.group_id, described.state, described.protocol,
                                   group.protocol_type == ""))
    return out


def _known_group(admin: ClusterAdmin, group_id: str) -> Any:
    if group_id not in {g.group_id for g in admin.groups()}:
        raise RestError(CONSUMER_GROUP_NOT_FOUND, "Consumer group id not found.")
    return admin.describe_group(group_id)


def consumer_group(access: ClusterAccess, links: Links, group_id: str) -> dict[str, Any]:
    with cluster_admin(access) as admin:
        described = _known_group(admin, group_id)
    return _group_body(links, group_id, described.state, described.protocol, not described.members and
                       not described.protocol)


def _consumer_body(links: Links, group_id: str, member: Any) -> dict[str, Any]:
    base = ("consumer-groups", group_id, "consumers", member.member_id)
    return links.resource("KafkaConsumer", links.url(*base),
                          links.crn(("consumer-group", group_id), ("consumer", member.member_id)),
                          consumer_group_id=group_id, consumer_id=member.member_id,
                          instance_id=member.group_instance_id, client_id=member.client_id,
                          assignments=related(links.url(*base, "assignments")))


def consumers(access: ClusterAccess, links: Links, group_id: str) -> list[dict[str, Any]]:
    with cluster_admin(access) as admin:
        described = _known_group(admin, group_id)
    return [_consumer_body(links, group_id, m) for m in described.members]


def _member(access: ClusterAccess, group_id: str, consumer_id: str) -> Any:
    with cluster_admin(access) as admin:
        described = _known_group(admin, group_id)
    member = next((m for m in described.members if m.member_id == consumer_id), None)
    if member is None:
        raise RestError(NOT_FOUND, f"Consumer {consumer_id} not found in group {group_id}.")
    return member


def consumer(access: ClusterAccess, links: Links, group_id: str, consumer_id: str) -> dict[str, Any]:
    return _consumer_body(links, group_id, _member(access, group_id, consumer_id))


def assignments(access: ClusterAccess, links: Links, group_id: str, consumer_id: str) -> list[dict[str, Any]]:
    member = _member(access, group_id, consumer_id)
    base = ("consumer-groups", group_id, "consumers", consumer_id, "assignments")
    return [links.resource("KafkaConsumerAssignment", links.url(*base, t, "partitions", p),
                           links.crn(("consumer-group", group_id), ("consumer", consumer_id),
                                     ("assignment", f"{t}-{p}")),
                           consumer_group_id=group_id, consumer_id=consumer_id, topic_name=t, partition_id=p,
                           partition=related(links.url("topics", t, "partitions", p)),
                           lag=related(links.url("consumer-groups", group_id, "lags", t, "partitions", p)))
            for t, p in member.assignment]


def lags(access: ClusterAccess, links: Links, group_id: str) -> list[dict[str, Any]]:
    with cluster_admin(access) as admin:
        described = _known_group(admin, group_id)
        committed = admin.committed_offsets(group_id)
        owned = {tp: m for m in described.members for tp in m.assignment}
        keys = sorted({*committed, *owned})
        ends = admin.offsets(keys, "latest") if keys else {}
    rows = compute_lag({tp: (offset, "") for tp, offset in committed.items()}, ends)
    out = []
    for row in rows:
        member = owned.get((row.topic, row.partition))
        current = row.committed_offset if row.committed_offset is not None else -1
        out.append(links.resource(
            "KafkaConsumerLag", links.url("consumer-groups", group_id, "lags", row.topic, "partitions", row.partition),
            links.crn(("consumer-group", group_id), ("lag", f"{row.topic}-{row.partition}")),
            consumer_group_id=group_id, topic_name=row.topic, partition_id=row.partition, current_offset=current,
            log_end_offset=row.log_end_offset, lag=row.lag if row.lag is not None else row.log_end_offset,
            consumer_id=member.member_id if member else "", instance_id=member.group_instance_id if member else None,
            client_id=member.client_id if member else ""))
    return out


def lag(access: ClusterAccess, links: Links, group_id: str, topic_name: str, partition_id: int) -> dict[str, Any]:
    found = next((r for r in lags(access, links, group_id)
                  if r["topic_name"] == topic_name and r["partition_id"] == partition_id), None)
    if found is None:
        raise RestError(NOT_FOUND, f"Group {group_id} has no offset for {topic_name}-{partition_id}.")
    return found


def lag_summary(access: ClusterAccess, links: Links, group_id: str) -> dict[str, Any]:
    rows = lags(access, links, group_id)
    top = max(rows, key=lambda r: r["lag"], default=None)
    return links.resource(
        "KafkaConsumerGroupLagSummary", links.url("consumer-groups", group_id, "lag-summary"),
        links.crn(("consumer-group", group_id), ("lag-summary", "")), consumer_group_id=group_id,
        max_lag_consumer_id=top["consumer_id"] if top else "", max_lag_instance_id=top["instance_id"] if top else None,
        max_lag_client_id=top["client_id"] if top else "", max_lag_topic_name=top["topic_name"] if top else "",
        max_lag_partition_id=top["partition_id"] if top else 0, max_lag=top["lag"] if top else 0,
        total_lag=sum(r["lag"] for r in rows),
        max_lag_consumer=related(links.url("consumer-groups", group_id, "consumers", top["consumer_id"]))
        if top and top["consumer_id"] else None,
        max_lag_partition=related(links.url("topics", top["topic_name"], "partitions", top["partition_id"]))
        if top else None)


# ---------------------------------------------------------------------------------------------- ACLs

ACL_FIELDS = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission")


def acl_body(links: Links, acl: AclBinding) -> dict[str, Any]:
    return links.resource("KafkaAcl", links.url("acls"), None, resource_type=acl.resource_type,
                          resource_name=acl.resource_name, pattern_type=acl.pattern_type, principal=acl.principal,
                          host=acl.host, operation=acl.operation, permission=acl.permission)


def acl_filter(access: ClusterAccess, query: Mapping[str, str]) -> list[AclBinding]:
    """Bindings matching a v3 filter: every field optional; ``ANY`` matches all; ``MATCH`` pattern type matches
    bindings whose pattern would apply to ``resource_name`` (literal, prefixed or ``*``)."""
    rows = list(AclBinding.objects.filter(cluster_id=access.cluster_pk))
    wanted = {f: query[f] for f in ACL_FIELDS if query.get(f) not in (None, "", "ANY")}
    pattern = wanted.pop("pattern_type", None)
    name = wanted.pop("resource_name", None)
    out = []
    for row in rows:
        if any(str(getattr(row, f)).upper() != v.upper() if f in ("resource_type", "operation", "permission")
               else getattr(row, f) != v for f, v in wanted.items()):
            continue
        if pattern == "MATCH":
            if name is not None and not (row.resource_name == "*" or (
                    row.pattern_type == "LITERAL" and row.resource_name == name) or (
                    row.pattern_type == "PREFIXED" and name.startswith(row.resource_name))):
                continue
        else:
            if pattern is not None and row.pattern_type != pattern.upper():
                continue
            if name is not None and row.resource_name != name:
                continue
        out.append(row)
    return out


def create_acl(access: ClusterAccess, actor: Actor, body: Any) -> AclBinding:
    if not isinstance(body, dict) or any(not isinstance(body.get(f), str) for f in ACL_FIELDS):
        raise RestError(BAD_REQUEST, f"An ACL needs string fields: {', '.join(ACL_FIELDS)}.")
    fields = {f: body[f].upper() if f in ("resource_type", "pattern_type", "operation", "permission") else body[f]
              for f in ACL_FIELDS}
    try:
        return topics_service.acl_create(cluster=Cluster.objects.get(pk=access.cluster_pk), actor=actor, **fields)
    except ApplicationError as exc:
        raise _as_rest(exc) from exc


def delete_acls(access: ClusterAccess, actor: Actor, query: Mapping[str, str]) -> list[AclBinding]:
    missing = [f for f in ("resource_type", "pattern_type", "operation", "permission") if not query.get(f)]
    if missing:
        raise RestError(BAD_REQUEST, f"A delete filter needs {', '.join(missing)} (ANY matches all).")
    doomed = acl_filter(access, query)
    for row in doomed:
        topics_service.acl_delete(acl=row, actor=actor)
    return doomed


# ---------------------------------------------------------------------------------------------- transactions
# Not in Confluent's REST Proxy: Kafka's ListTransactions/DescribeTransactions (KIP-664) in v3's shape, so the
# console and scripts see a cluster's open transactions; ``:abort`` fences a hung producer as a new instance would.


def _transaction_body(links: Links, txn: TransactionInfo, now_ms: int) -> dict[str, Any]:
    base = ("transactions", txn.transactional_id)
    return links.resource(
        "KafkaTransaction", links.url(*base), links.crn(("transaction", txn.transactional_id)),
        transactional_id=txn.transactional_id, state=txn.state, producer_id=txn.producer_id,
        producer_epoch=txn.producer_epoch, transaction_timeout_ms=txn.timeout_ms,
        transaction_start_time_ms=txn.start_time_ms,
        age_ms=max(0, now_ms - txn.start_time_ms) if txn.start_time_ms >= 0 else None,
        partitions=[{"topic_name": t, "partition_id": p} for t, p in txn.partitions],
        coordinator=related(links.url("brokers", txn.coordinator_id)))


def open_transactions(access: ClusterAccess, links: Links) -> list[dict[str, Any]]:
    """The cluster's open transactions the caller may describe (its TransactionalId ACLs decide, as in Kafka)."""
    with cluster_admin(access) as admin:
        found = admin.open_transactions()
    now_ms = time.time_ns() // 1_000_000
    return [_transaction_body(links, txn, now_ms) for txn in found]


def abort_transaction(access: ClusterAccess, actor: Actor, transactional_id: str) -> None:
    """Fence the id's producer and abort its open transaction (the caller needs WRITE on the TransactionalId)."""
    with cluster_admin(access) as admin:
        try:
            admin.abort_transaction(transactional_id)
        except AdminError as exc:
            if exc.code == "TRANSACTIONAL_ID_NOT_FOUND":
                raise RestError(TRANSACTION_NOT_FOUND, "Transactional id not found.") from exc
            raise
    cluster = Cluster.objects.select_related("tenant").get(pk=access.cluster_pk)
    audit_record(tenant=cluster.tenant, actor=actor, action="transaction.abort", target_type="transaction",
                 target_id=transactional_id, data={"cluster": str(cluster.pk)})
