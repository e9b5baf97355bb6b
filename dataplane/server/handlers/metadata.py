"""ApiVersions and Metadata."""

from __future__ import annotations

import functools
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as WireError

from dataplane.protocol.answers import ZERO, wire
from dataplane.protocol.build import build
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.protocol.messages import Request
from dataplane.security.acl import AclOperation, ResourceType
from dataplane.server.apis import RequestContext, api, api_version_entries
from dataplane.server.authorized import NOT_REQUESTED
from dataplane.server.owners import Owners


@api(18, "ApiVersions", 0, 4)
async def api_versions(owners: Owners, request: Request, context: RequestContext) -> Any:
    return _api_versions_response(request.api_version)


@functools.cache
def _api_versions_response(version: int) -> Any:
    """Built once per version: the table is fixed once the handlers are registered (~90 µs to build)."""
    return build(load_response_schema(18, version), {
        "error_code": WireError.none, "throttle_time": ZERO, "api_keys": api_version_entries()})


def _topic_error(name: str, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": wire(code), "name": name, "topic_id": None, "is_internal": False,
            "topic_authorized_operations": NOT_REQUESTED, "partitions": ()}


@api(3, "Metadata", 0, 13)  # v13: a top-level error code (KIP-1102), always NONE from a broker that answers
async def metadata(owners: Owners, request: Request, context: RequestContext) -> Any:
    body, version = request.body, request.api_version
    access = owners.access
    await owners.fresh_metadata.current_metadata()
    every_topic = body.topics is None or (version == 0 and not body.topics)
    if every_topic:  # only the topics the caller may describe, as Kafka lists them
        wanted = [n for n in sorted(owners.metadata.topics)
                  if access.allows(context, AclOperation.DESCRIBE, ResourceType.TOPIC, n, audit=False)]
    else:
        wanted = [t.name for t in body.topics if t.name is not None]
    allow_create = version < 4 or body.allow_auto_topic_creation
    live = {b.node_id: b for b in owners.metadata.live_brokers()}
    want_operations = getattr(body, "include_topic_authorized_operations", False)
    entries = []
    for name in wanted:
        if not every_topic and not access.allows(context, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            entries.append(_topic_error(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            continue
        try:
            topic = owners.metadata.topic(name)
            if topic is None and allow_create:
                topic = await owners.admin.topic_or_autocreate(
                    name, may_create=owners.access.may_create_topic(context, name))
            elif topic is None:
                await owners.admin.refresh_topics()  # created through another broker a moment ago?
                topic = owners.metadata.topic(name)
        except KafkaError as exc:
            entries.append(_topic_error(name, exc.code))
            continue
        if topic is None:
            entries.append(_topic_error(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            continue
        entries.append({
            "error_code": WireError.none, "name": topic.name, "topic_id": topic.topic_id,
            "is_internal": topic.internal,
            "topic_authorized_operations": access.operations(context, ResourceType.TOPIC, name, want_operations),
            "partitions": [{
                "error_code": wire(ErrorCode.LEADER_NOT_AVAILABLE) if p.leader < 0 else WireError.none,
                "partition_index": p.partition, "leader_id": p.leader,
                "leader_epoch": p.leader_epoch, "replica_nodes": p.replicas, "isr_nodes": p.isr,
                "offline_replicas": tuple(r for r in p.replicas if r not in live)} for p in topic.partitions],
        })
    return build(load_response_schema(3, version), {
        "throttle_time": ZERO, "error_code": WireError.none, "cluster_id": owners.config.cluster_id,
        "controller_id": owners.metadata.known_controller(),
        "brokers": [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                    for b in live.values()],
        "cluster_authorized_operations": access.cluster_operations(
            context, getattr(body, "include_cluster_authorized_operations", False)), "topics": entries,
    })


MAX_PARTITIONS_PER_DESCRIBE = 2000  # Kafka's max.request.partition.size.limit


@api(75, "DescribeTopicPartitions", 0, 0)
async def describe_topic_partitions(owners: Owners, request: Request, context: RequestContext) -> Any:
    """KIP-966: Metadata's topic part, paginated by partitions with a cursor, topics in name order.

    No topics named means every topic. The answer holds at most ``response_partition_limit``
    partitions (capped at 2,000); where it stops, ``next_cursor`` names the topic and partition
    to ask from next. Eligible leader replicas are not kept (ELR is off), so those fields are null.
    """
    body = request.body
    metadata = await owners.fresh_metadata.current_metadata()
    cursor = body.cursor
    requested = sorted({t.name for t in body.topics})
    if cursor is not None and requested and cursor.topic_name not in requested:
        # Kafka's answer to an invalid request of this API: the error on every topic asked for.
        return build(load_response_schema(75, request.api_version), {"throttle_time": ZERO, "next_cursor": None,
            "topics": [_topic_error(name, ErrorCode.INVALID_REQUEST) for name in requested]})
    access = owners.access
    names = requested or [n for n in sorted(metadata.topics)
                          if access.allows(context, AclOperation.DESCRIBE, ResourceType.TOPIC, n, audit=False)]
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    budget = max(0, min(int(body.response_partition_limit), MAX_PARTITIONS_PER_DESCRIBE))
    live = {b.node_id for b in metadata.live_brokers()}
    entries: list[dict[str, Any]] = []
    next_cursor: dict[str, Any] | None = None
    for position, name in enumerate(names):
        if requested and not access.allows(context, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            entries.append(_topic_error(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            continue
        topic = metadata.topic(name)
        if topic is None:
            entries.append(_topic_error(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            continue
        if budget == 0:
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        remaining = [p for p in topic.partitions if p.partition >= start]
        chosen, left = remaining[:budget], remaining[budget:]
        budget -= len(chosen)
        entries.append({
            "error_code": WireError.none, "name": name, "topic_id": topic.topic_id, "is_internal": topic.internal,
            "topic_authorized_operations": access.operations(context, ResourceType.TOPIC, name, True),
            "partitions": [{"error_code": wire(ErrorCode.LEADER_NOT_AVAILABLE) if p.leader < 0 else WireError.none,
                            "partition_index": p.partition, "leader_id": p.leader, "leader_epoch": p.leader_epoch,
                            "replica_nodes": p.replicas, "isr_nodes": p.isr, "eligible_leader_replicas": None,
                            "last_known_elr": None,
                            "offline_replicas": tuple(r for r in p.replicas if r not in live)} for p in chosen]})
        if left:
            next_cursor = {"topic_name": name, "partition_index": left[0].partition}
            break
        if budget == 0 and position + 1 < len(names):
            next_cursor = {"topic_name": names[position + 1], "partition_index": 0}
            break
    return build(load_response_schema(75, request.api_version), {
        "throttle_time": ZERO, "topics": entries, "next_cursor": next_cursor})
