"""Committed offsets: OffsetCommit, OffsetFetch (single and batched groups) and OffsetDelete."""

from __future__ import annotations

from typing import Any

from kio.index import load_response_schema

from dataplane.coordinator.manager import CommitRequest, TopicPartition
from dataplane.protocol.answers import ZERO, wire
from dataplane.protocol.build import build
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.protocol.messages import Request
from dataplane.security.acl import AclOperation, ResourceType
from dataplane.server.apis import RequestContext, api
from dataplane.server.owners import Owners

NO_LEADER_EPOCH = -1


def _known(owners: Owners, topic: str, partition: int) -> bool:
    found = owners.metadata.topics.get(topic)
    return found is not None and 0 <= partition < len(found.partitions)


def _by_topic(errors: dict[TopicPartition, ErrorCode], order: list[TopicPartition]) -> list[dict[str, Any]]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for topic, partition in order:
        topics.setdefault(topic, []).append({"partition_index": partition,
                                             "error_code": wire(errors[(topic, partition)])})
    return [{"name": name, "partitions": parts} for name, parts in topics.items()]


@api(8, "OffsetCommit", 2, 9)  # v10 names topics by id
async def offset_commit(owners: Owners, request: Request, context: RequestContext) -> Any:
    body = request.body
    order = [(t.name, p.partition_index) for t in body.topics for p in t.partitions]
    errors: dict[TopicPartition, ErrorCode] = {}
    offsets: dict[TopicPartition, tuple[int, int, str | None]] = {}
    access = owners.access
    for topic in body.topics:
        readable = access.allows(context, AclOperation.READ, ResourceType.TOPIC, topic.name)
        for part in topic.partitions:
            tp = (topic.name, part.partition_index)
            if not readable:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif not _known(owners, *tp):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                offsets[tp] = (part.committed_offset, getattr(part, "committed_leader_epoch", NO_LEADER_EPOCH),
                               part.committed_metadata)
    try:
        if not body.group_id:
            raise KafkaError("the group id must not be empty", code=ErrorCode.INVALID_GROUP_ID)
        if not access.allows(context, AclOperation.READ, ResourceType.GROUP, body.group_id):
            raise KafkaError("Group authorization failed.", code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        if offsets:
            errors.update(await owners.groups.commit(CommitRequest(
                body.group_id, body.generation_id_or_member_epoch, body.member_id,
                getattr(body, "group_instance_id", None), offsets)))
    except KafkaError as exc:
        errors.update(dict.fromkeys(order, exc.code))
    return build(load_response_schema(8, request.api_version), {"throttle_time": ZERO,
                                                                "topics": _by_topic(errors, order)})


async def _fetch_group(owners: Owners, context: RequestContext, group_id: str,
                       topics: Any, require_stable: bool = False) -> tuple[ErrorCode, list[dict[str, Any]]]:
    """(group error, topics with partitions) for one group of an OffsetFetch.

    Kafka's checks: DESCRIBE on the group; topics named but not describable answer
    TOPIC_AUTHORIZATION_FAILED, and when all are asked for they are left out. ``require_stable`` (KIP-447, v7+):
    a partition with a transactional commit not yet decided answers UNSTABLE_OFFSET_COMMIT.
    """
    access = owners.access
    wanted = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    try:
        if not access.allows(context, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            raise KafkaError("Group authorization failed.", code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        fetched = await owners.groups.fetch_committed(group_id, wanted, require_stable=require_stable)
        found = {tp: None if f.error != ErrorCode.NONE else f.value for tp, f in fetched.items()}
        unstable = {tp for tp, f in fetched.items() if f.error != ErrorCode.NONE}
        error = ErrorCode.NONE
    except KafkaError as exc:
        error, found, unstable = exc.code, dict.fromkeys(wanted or []), set()
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), value in found.items():
        topic_error = ErrorCode.UNSTABLE_OFFSET_COMMIT if (topic, partition) in unstable else error
        if error is ErrorCode.NONE and not access.allows(context, AclOperation.DESCRIBE, ResourceType.TOPIC, topic,
                                                         audit=wanted is not None):
            if wanted is None:
                continue
            topic_error, value = ErrorCode.TOPIC_AUTHORIZATION_FAILED, None
        by_topic.setdefault(topic, []).append({
            "partition_index": partition, "committed_offset": -1 if value is None else value.offset,
            "committed_leader_epoch": NO_LEADER_EPOCH if value is None else value.leader_epoch,
            "metadata": "" if value is None else value.metadata,
            "error_code": wire(topic_error)})
    return error, [{"name": name, "partitions": parts} for name, parts in by_topic.items()]


@api(9, "OffsetFetch", 1, 9)  # v10 names topics by id
async def offset_fetch(owners: Owners, request: Request, context: RequestContext) -> Any:
    body, version = request.body, request.api_version
    schema = load_response_schema(9, version)
    if version >= 8:  # batched groups (KIP-709)
        groups = []
        for group in body.groups:
            error, topics = await _fetch_group(owners, context, group.group_id, group.topics,
                                               bool(body.require_stable))
            groups.append({"group_id": group.group_id, "topics": topics, "error_code": wire(error)})
        return build(schema, {"throttle_time": ZERO, "groups": groups})
    error, topics = await _fetch_group(owners, context, body.group_id, body.topics,
                                       bool(getattr(body, "require_stable", False)))
    return build(schema, {"throttle_time": ZERO, "topics": topics, "error_code": wire(error)})


@api(47, "OffsetDelete", 0, 0)
async def offset_delete(owners: Owners, request: Request, context: RequestContext) -> Any:
    body = request.body
    order = [(t.name, p.partition_index) for t in body.topics for p in t.partitions]
    access = owners.access
    errors = {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in order
              if not access.allows(context, AclOperation.READ, ResourceType.TOPIC, tp[0])}
    errors.update({tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for tp in order
                   if tp not in errors and not _known(owners, *tp)})
    top = ErrorCode.NONE
    try:
        if not body.group_id:
            raise KafkaError("the group id must not be empty", code=ErrorCode.INVALID_GROUP_ID)
        if not access.allows(context, AclOperation.DELETE, ResourceType.GROUP, body.group_id):
            raise KafkaError("Group authorization failed.", code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        errors.update(await owners.groups.delete_offsets(body.group_id, [tp for tp in order
                                                                               if tp not in errors]))
    except KafkaError as exc:
        top = exc.code
        errors = dict.fromkeys(order, ErrorCode.NONE)  # Kafka: the group error alone
    return build(load_response_schema(47, 0), {"throttle_time": ZERO, "error_code": wire(top),
                                               "topics": _by_topic(errors, order) if top is ErrorCode.NONE else ()})
