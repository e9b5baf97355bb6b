"""CreateTopics, DeleteTopics and CreatePartitions."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as WireError

from dataplane.cluster.store import TopicState
from dataplane.config.tiering import check_tiering
from dataplane.config.topic import validate_topic_configs
from dataplane.protocol.answers import ZERO, wire
from dataplane.protocol.build import build
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.protocol.messages import Request
from dataplane.security.acl import AclOperation, ResourceType
from dataplane.server.apis import RequestContext, api
from dataplane.server.owners import Owners


@api(19, "CreateTopics", 2, 7)
async def create_topics(owners: Owners, request: Request, context: RequestContext) -> Any:
    body = request.body
    results = []
    created = False
    for item in body.topics:
        partitions = owners.config.num_partitions if item.num_partitions == -1 else item.num_partitions
        replication = (owners.config.default_replication_factor if item.replication_factor == -1
                       else item.replication_factor)
        entry: dict[str, Any] = {"name": item.name, "topic_id": None, "error_code": WireError.none,
                                 "error_message": None, "topic_config_error_code": 0,
                                 "num_partitions": -1, "replication_factor": -1, "configs": ()}
        try:
            if not owners.access.may_create_topic(context, item.name):
                raise KafkaError("Authorization failed.", code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            layout = _manual_layout(item)
            if layout is not None:
                partitions, replication = len(layout), len(layout[0])
            configs = {c.name: c.value for c in item.configs if c.value is not None}
            check_tiering(validate_topic_configs(configs), owners.metadata.cluster_defaults,
                          remote_storage_configured=owners.config.remote_storage)
            topic = await owners.admin.create_topic(item.name, partitions, replication, configs,
                                                    validate_only=body.validate_only, assignments=layout,
                                                    refresh=False)
            created = created or not body.validate_only
            entry.update(topic_id=topic.topic_id, num_partitions=len(topic.partitions),
                         replication_factor=len(topic.partitions[0].replicas) if topic.partitions else -1)
        except KafkaError as exc:
            entry.update(error_code=wire(exc.code), error_message=str(exc))
        results.append(entry)
    if created:  # once for the whole request: a refresh reads every topic
        await owners.admin.refresh_topics()
    return build(load_response_schema(19, request.api_version), {"throttle_time": ZERO, "topics": results})


def _manual_layout(item: Any) -> list[list[int]] | None:
    """CreateTopics' replica assignments as one replica list per partition, in partition order (Kafka's checks)."""
    if not item.assignments:
        return None
    if item.num_partitions != -1 or item.replication_factor != -1:
        raise KafkaError("Both numPartitions or replicationFactor and replicasAssignments were set. "
                         "Both cannot be used at the same time.", code=ErrorCode.INVALID_REQUEST)
    ordered = sorted(item.assignments, key=lambda a: int(a.partition_index))
    if [int(a.partition_index) for a in ordered] != list(range(len(ordered))):
        raise KafkaError("Partitions should be 0-based and consecutive.", code=ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    layout = [[int(b) for b in a.broker_ids] for a in ordered]
    if not all(layout):
        raise KafkaError("Every partition needs at least one replica.", code=ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    return layout


@api(20, "DeleteTopics", 1, 6)
async def delete_topics(owners: Owners, request: Request, context: RequestContext) -> Any:
    body, version = request.body, request.api_version
    # v6 names topics by name or by id; older versions by name only.
    wanted: list[tuple[str | None, uuid.UUID | None]] = (
        [(t.name, t.topic_id) for t in body.topics] if version >= 6 else [(name, None) for name in body.topic_names])
    results = []
    deleted: list[TopicState] = []
    for name, topic_id in wanted:
        entry: dict[str, Any] = {"name": name, "topic_id": topic_id, "error_code": WireError.none,
                                 "error_message": None}
        try:
            if (topic_id is None) == (name is None):
                raise KafkaError("Name a topic by exactly one of name and topic id.", code=ErrorCode.INVALID_REQUEST)
            # By id, the name the id resolves to decides (an unknown id stays unknown below).
            target = name if name is not None else owners.metadata.topic_name(topic_id) if topic_id else None
            if target is not None and not owners.access.allows(context, AclOperation.DELETE, ResourceType.TOPIC,
                                                               target):
                raise KafkaError("Topic authorization failed.", code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            topic = await owners.admin.delete_topic(name, topic_id=topic_id)
            entry.update(name=topic.name, topic_id=topic.topic_id)
            deleted.append(topic)
        except KafkaError as exc:
            entry.update(error_code=wire(exc.code), error_message=str(exc))
        results.append(entry)
    if deleted:
        await owners.admin.refresh_topics()
        await owners.replicas.delete_logs(deleted)
    return build(load_response_schema(20, version), {"throttle_time": ZERO, "responses": results})


@api(37, "CreatePartitions", 0, 3)
async def create_partitions(owners: Owners, request: Request, context: RequestContext) -> Any:
    body = request.body
    seen = Counter(item.name for item in body.topics)
    results = []
    changed = False
    for item in body.topics:
        entry: dict[str, Any] = {"name": item.name, "error_code": WireError.none, "error_message": None}
        try:
            if seen[item.name] > 1:
                raise KafkaError("Duplicate topic in request.", code=ErrorCode.INVALID_REQUEST)
            if not owners.access.allows(context, AclOperation.ALTER, ResourceType.TOPIC, item.name):
                raise KafkaError("Topic authorization failed.", code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            assignments = None if item.assignments is None else [a.broker_ids for a in item.assignments]
            await owners.admin.create_partitions(item.name, item.count, assignments=assignments,
                                                 validate_only=body.validate_only)
            changed = changed or not body.validate_only
        except KafkaError as exc:
            entry.update(error_code=wire(exc.code), error_message=str(exc))
        results.append(entry)
    if changed:
        await owners.admin.refresh_topics()
    return build(load_response_schema(37, request.api_version), {"throttle_time": ZERO, "results": results})
