"""OffsetForLeaderEpoch (followers truncating, KIP-101/279; consumers detecting truncation, KIP-320)
and ElectLeaders (preferred and unclean elections asked for by operators and the control plane)."""

from __future__ import annotations

from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as WireError

from dataplane.cluster.election import preferred, unclean_now
from dataplane.cluster.store import PartitionChange
from dataplane.protocol.answers import ZERO, wire
from dataplane.protocol.build import build
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.protocol.messages import Request
from dataplane.security.acl import AclOperation, ResourceType
from dataplane.server.apis import RequestContext, api
from dataplane.server.owners import Owners

PREFERRED, UNCLEAN = 0, 1


@api(23, "OffsetForLeaderEpoch", 2, 4)
async def offset_for_leader_epoch(owners: Owners, request: Request, context: RequestContext) -> Any:
    """Followers (replica id set, v3+) need CLUSTER_ACTION; consumers DESCRIBE on the topic (Kafka's checks)."""
    topics = []
    access = owners.access
    follower = getattr(request.body, "replica_id", -1) >= 0
    cluster_ok = not follower or access.allows_cluster(context, AclOperation.CLUSTER_ACTION)
    for topic_req in request.body.topics:
        partitions = []
        refused = (ErrorCode.CLUSTER_AUTHORIZATION_FAILED if not cluster_ok else
                   ErrorCode.TOPIC_AUTHORIZATION_FAILED
                   if not follower and not access.allows(context, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                                         topic_req.topic) else None)
        for part in topic_req.partitions:
            entry: dict[str, Any] = {"error_code": WireError.none, "partition": part.partition,
                                     "leader_epoch": -1, "end_offset": -1}
            try:
                if refused is not None:
                    raise KafkaError("Authorization failed.", code=refused)
                partition = owners.replicas.leader_partition(topic_req.topic, part.partition,
                                                             part.current_leader_epoch)
                found = partition.end_offset_for_epoch(part.leader_epoch)
                entry.update(leader_epoch=found.epoch, end_offset=found.end_offset)
            except KafkaError as exc:
                entry["error_code"] = wire(exc.code)
            partitions.append(entry)
        topics.append({"topic": topic_req.topic, "partitions": partitions})
    return build(load_response_schema(23, request.api_version), {"throttle_time": ZERO, "topics": topics})


@api(43, "ElectLeaders", 0, 2)
async def elect_leaders(owners: Owners, request: Request, context: RequestContext) -> Any:
    """Decided and written by the controller's rules, fenced by the controller epoch this broker holds.

    Any broker accepts the request, as with Kafka's forwarding; a broker that is not
    the controller answers NOT_CONTROLLER so the client retries elsewhere.
    """
    body, version = request.body, request.api_version
    election_type = getattr(body, "election_type", PREFERRED)
    values: dict[str, Any] = {"throttle_time": ZERO, "error_code": WireError.none, "replica_election_results": ()}
    if not owners.access.allows_cluster(context, AclOperation.ALTER):
        values["error_code"] = wire(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        return build(load_response_schema(43, version), values)
    if owners.metadata.controller_id != owners.config.node_id:
        values["error_code"] = wire(ErrorCode.NOT_CONTROLLER)
        return build(load_response_schema(43, version), values)
    await owners.admin.refresh_topics()
    live = set(owners.metadata.live_node_ids())
    if body.topic_partitions is None:  # every partition
        wanted = [(t.name, p.partition) for t in owners.metadata.topics.values() for p in t.partitions]
    else:
        wanted = [(t.topic, int(p)) for t in body.topic_partitions for p in t.partitions]
    changes: list[PartitionChange] = []
    results: dict[str, list[dict[str, Any]]] = {}
    for name, index in wanted:
        entry: dict[str, Any] = {"partition_id": index, "error_code": WireError.none, "error_message": None}
        results.setdefault(name, []).append(entry)
        try:
            topic, state = owners.metadata.partition(name, index)
        except KafkaError as exc:
            entry.update(error_code=wire(exc.code), error_message=str(exc))
            continue
        decided = preferred(state, live) if election_type == PREFERRED else unclean_now(state, live)
        if isinstance(decided, ErrorCode):
            if body.topic_partitions is not None or decided != ErrorCode.ELECTION_NOT_NEEDED:
                entry.update(error_code=wire(decided), error_message=decided.name.lower().replace("_", " "))
            continue
        changes.append(PartitionChange(topic.topic_id, index, state.partition_epoch, decided.leader, decided.isr,
                                       decided.leader_changed))
    if changes:
        try:
            await owners.admin.apply_partition_changes(owners.config.node_id, changes)
        except KafkaError as exc:
            values["error_code"] = wire(ErrorCode.NOT_CONTROLLER if exc.code == ErrorCode.STALE_CONTROLLER_EPOCH
                                        else exc.code)
        await owners.admin.refresh_topics()
    if body.topic_partitions is None:  # Kafka lists only partitions that changed or failed
        results = {n: [e for e in es if e["error_code"] != WireError.none or
                       any(c.partition == e["partition_id"] for c in changes)] for n, es in results.items()}
    values["replica_election_results"] = [{"topic": name, "partition_result": entries}
                                          for name, entries in results.items() if entries]
    return build(load_response_schema(43, version), values)


@api(45, "AlterPartitionReassignments", 0, 0)
async def alter_partition_reassignments(owners: Owners, request: Request, context: RequestContext) -> Any:
    """Start or cancel (replicas null) partition moves; the controller completes them (see ``election``)."""
    body = request.body
    values: dict[str, Any] = {"throttle_time": ZERO, "error_code": WireError.none, "error_message": None,
                              "responses": ()}
    if not owners.access.allows_cluster(context, AclOperation.ALTER):
        values.update(error_code=wire(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                      error_message="Cluster authorization failed.")
        return build(load_response_schema(45, request.api_version), values)
    if owners.metadata.controller_id != owners.config.node_id:
        values.update(error_code=wire(ErrorCode.NOT_CONTROLLER), error_message="this broker is not the controller")
        return build(load_response_schema(45, request.api_version), values)
    responses = []
    for topic_req in body.topics:
        partitions = []
        for part in topic_req.partitions:
            entry: dict[str, Any] = {"partition_index": part.partition_index, "error_code": WireError.none,
                                     "error_message": None}
            try:
                target = None if part.replicas is None else [int(r) for r in part.replicas]
                await owners.admin.reassign(owners.config.node_id, topic_req.name, part.partition_index, target)
            except KafkaError as exc:
                code = ErrorCode.NOT_CONTROLLER if exc.code == ErrorCode.STALE_CONTROLLER_EPOCH else exc.code
                entry.update(error_code=wire(code), error_message=str(exc))
            partitions.append(entry)
        responses.append({"name": topic_req.name, "partitions": partitions})
    await owners.admin.refresh_topics()
    values["responses"] = responses
    return build(load_response_schema(45, request.api_version), values)


@api(46, "ListPartitionReassignments", 0, 0)
async def list_partition_reassignments(owners: Owners, request: Request, context: RequestContext) -> Any:
    body = request.body
    if not owners.access.allows_cluster(context, AclOperation.DESCRIBE):
        return build(load_response_schema(46, request.api_version), {
            "throttle_time": ZERO, "error_code": wire(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
            "error_message": "Cluster authorization failed.", "topics": ()})
    await owners.admin.refresh_topics()
    wanted: dict[str, set[int] | None]
    if body.topics is None:
        wanted = dict.fromkeys(owners.metadata.topics)
    else:
        wanted = {t.name: {int(p) for p in t.partition_indexes} for t in body.topics}
    topics = []
    for name, indexes in wanted.items():
        topic = owners.metadata.topics.get(name)
        if topic is None:
            continue
        moving = [{"partition_index": p.partition, "replicas": p.replicas, "adding_replicas": p.adding,
                   "removing_replicas": p.removing}
                  for p in topic.partitions if (p.adding or p.removing) and (indexes is None or p.partition in indexes)]
        if moving:
            topics.append({"name": name, "partitions": moving})
    return build(load_response_schema(46, request.api_version), {
        "throttle_time": ZERO, "error_code": WireError.none, "error_message": None, "topics": topics})
