"""Fetch: long poll, whole batches, record data never copied into Python objects."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as WireError

from dataplane.protocol.answers import ZERO, wire
from dataplane.protocol.build import build
from dataplane.protocol.errors import ErrorCode, KafkaError, UnsupportedCompressionTypeError
from dataplane.protocol.messages import Deferred, Request
from dataplane.protocol.records import uses_zstd
from dataplane.replication.manager import FetchPass
from dataplane.security.acl import AclOperation, ResourceType
from dataplane.server.apis import RequestContext, api
from dataplane.server.leader_hints import LeaderHints
from dataplane.server.owners import Owners

if TYPE_CHECKING:
    from dataplane.replication.partition import Partition


@api(1, "Fetch", 4, 17)  # v13+ name topics by id; v15+ carry the replica id in replica_state
async def fetch(owners: Owners, request: Request, context: RequestContext) -> Any:
    """A long poll: answer once ``min_bytes`` are there or ``max_wait`` has passed (the replica manager's
    delayed fetch runs the passes and the wait between them)."""
    body = request.body
    if _replica_id(body) >= 0 and not owners.access.allows_cluster(context, AclOperation.CLUSTER_ACTION):
        # Only brokers fetch as replicas: a client forging a replica id is refused and changes nothing.
        return _refused(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    hints = LeaderHints(owners.metadata)
    to_log_end = _replica_id(body) >= 0

    async def read_once() -> FetchPass[list[dict[str, Any]]]:
        nonlocal hints
        hints = LeaderHints(owners.metadata)
        return await _fetch_once(owners, context, body, hints, zstd_allowed=request.api_version >= 10)

    responses = await owners.replicas.delayed_fetch(read_once, min_bytes=body.min_bytes,
                                                    max_wait=body.max_wait.total_seconds(), to_log_end=to_log_end,
                                                    committed=_committed(body))
    if _replica_id(body) < 0:  # what consumers are sent (the last pass's answer), for the throughput history
        for topic_response in responses:
            for entry in topic_response["partitions"]:
                records = entry["records"]
                if isinstance(records, Deferred) and topic_response["topic"]:
                    owners.traffic.sent(topic_response["topic"], records.length)
    return build(load_response_schema(1, request.api_version), {
        "throttle_time": ZERO, "error_code": WireError.none, "session_id": 0, "responses": responses,
        "node_endpoints": hints.node_endpoints()})


def _refused(request: Request, code: ErrorCode) -> Any:
    """The whole fetch refused: the error at the top and on every partition asked for, nothing read."""
    body = request.body
    responses = [{"topic": getattr(t, "topic", None), "topic_id": getattr(t, "topic_id", None), "partitions": [
        {"partition_index": p.partition, "error_code": wire(code), "high_watermark": -1, "last_stable_offset": -1,
         "log_start_offset": -1, "aborted_transactions": None, "preferred_read_replica": -1, "records": b""}
        for p in t.partitions]} for t in body.topics]
    return build(load_response_schema(1, request.api_version), {
        "throttle_time": ZERO, "error_code": wire(code), "session_id": 0, "responses": responses,
        "node_endpoints": ()})


def _committed(body: Any) -> bool:
    """A consumer in read_committed (isolation level 1): it reads below the last stable offset only."""
    return _replica_id(body) < 0 and int(getattr(body, "isolation_level", 0)) == 1


def _replica_id(body: Any) -> int:
    """The fetching follower's id, -1 for a consumer (v15+ carry it in ``replica_state``)."""
    return int(body.replica_state.replica_id if hasattr(body, "replica_state") else body.replica_id)


async def _fetch_once(owners: Owners, context: RequestContext, body: Any, hints: LeaderHints, *,
                      zstd_allowed: bool) -> FetchPass[list[dict[str, Any]]]:
    """One pass over the partitions asked for: the responses, the bytes found, and the partitions read
    with the end of what was visible in each.

    Followers (replica id set) read to the log end and report their progress;
    consumers read below the high watermark only.
    """
    total = 0
    budget = body.max_bytes if body.max_bytes > 0 else 2**31 - 1
    replica = _replica_id(body)
    committed = _committed(body)
    # A consumer under a byte-rate quota gets about one quota window's worth per response (still one whole
    # batch at least), so it is held near its rate by many short throttles rather than a few long ones.
    quota_bound = None if replica >= 0 else owners.quotas.fetch_bytes_bound(context.principal, context.client_id)
    if quota_bound is not None:
        budget = min(budget, quota_bound)
    responses = []
    read: list[tuple[Partition, int]] = []
    for topic_req in body.topics:
        partitions = []
        by_id = hasattr(topic_req, "topic_id")
        name = owners.metadata.topic_name(topic_req.topic_id) if by_id else topic_req.topic
        # Followers were checked for CLUSTER_ACTION already; consumers need READ on each topic.
        readable = replica >= 0 or name is None or owners.access.allows(context, AclOperation.READ,
                                                                        ResourceType.TOPIC, name)
        for part in topic_req.partitions:
            entry: dict[str, Any] = {"partition_index": part.partition, "error_code": WireError.none,
                                     "high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1,
                                     "aborted_transactions": None, "preferred_read_replica": -1, "records": None}
            partition = None
            try:
                if name is None:
                    raise KafkaError(f"topic id {topic_req.topic_id} is not known to this broker",
                                     code=ErrorCode.UNKNOWN_TOPIC_ID)
                if not readable:
                    raise KafkaError(f"Not authorized to read topic {name}.",
                                     code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                partition = owners.replicas.leader_partition(name, part.partition,
                                                             getattr(part, "current_leader_epoch", -1))
                if replica >= 0:
                    owners.replicas.on_follower_fetch(partition, replica, part.fetch_offset)
                if quota_bound is not None and total and budget <= 0:  # the quota's share is full: no more reads
                    entry.update(high_watermark=partition.high_watermark,
                                 last_stable_offset=partition.last_stable_offset,
                                 log_start_offset=partition.log.log_start_offset, records=b"")
                    partitions.append(entry)
                    continue
                # At least one whole batch for the first partition with data, as Kafka does.
                limit = min(part.partition_max_bytes, budget) if total or quota_bound else part.partition_max_bytes
                found = await partition.read(part.fetch_offset, limit, to_log_end=replica >= 0, committed=committed)
                if not zstd_allowed and (found.region is not None or found.data is not None) and uses_zstd(
                        found.data if found.data is not None else found.region.read_bytes()):  # type: ignore[union-attr]
                    raise UnsupportedCompressionTypeError("zstd-compressed data needs Fetch v10 or later (KIP-110)")
                read.append((partition, found.visible_end))
                records: bytes | Deferred
                if found.data is not None:  # from the remote tier: bytes in memory
                    records, length = found.data, len(found.data)
                elif found.region is not None:
                    records, length = Deferred(found.region, found.region.length), found.region.length
                else:
                    records, length = b"", 0
                total += length
                budget -= length
                entry.update(high_watermark=found.high_watermark, last_stable_offset=found.last_stable_offset,
                             log_start_offset=found.log_start_offset, records=records)
                if found.aborted is not None:  # read_committed: the transactions to skip in what is sent
                    entry["aborted_transactions"] = [{"producer_id": pid, "first_offset": first}
                                                     for pid, first in found.aborted]
            except KafkaError as exc:
                # Empty records, never null, as Kafka sends them (librdkafka cannot parse a null); out of range,
                # the real watermarks too, so the client's auto.offset.reset knows where the log is.
                entry.update(error_code=wire(exc.code), records=b"")
                leader = hints.for_error(name, part.partition, exc.code) if name is not None else None
                if leader is not None:
                    entry["current_leader"] = leader  # KIP-951, v12+ (tagged)
                if exc.code in (ErrorCode.OFFSET_OUT_OF_RANGE, ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE) \
                        and partition is not None:
                    entry.update(high_watermark=partition.high_watermark,
                                 last_stable_offset=partition.last_stable_offset,
                                 log_start_offset=partition.log.log_start_offset)
            partitions.append(entry)
        responses.append({"topic": name, "topic_id": topic_req.topic_id if by_id else None,
                          "partitions": partitions})
    return FetchPass(responses, total, read)
