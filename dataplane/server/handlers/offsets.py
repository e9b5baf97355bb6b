"""ListOffsets, v1 to v10 (Kafka 4.0's range).

The special timestamps: -1 latest (the high watermark), -2 earliest, -3 the record
with the highest timestamp (KIP-734, v7+), -4 earliest *local* (v8+, KIP-1005) and
-5 latest *tiered* (v9+): the first offset on the leader's local disk, and the last offset the remote tier
holds (decision 0032). Without tiering the local log is the whole log, so earliest-local is the log start
offset and nothing is tiered: -5 answers offset -1. A timestamp lookup on a tiered log searches the remote
tier first (its segments' metadata says which may hold the time), then the local log; v10's timeout for remote
lookups is not applied (the lookup runs on the fetch executor and answers when it has read what it needs).
"""

from __future__ import annotations

from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as WireError

from dataplane.protocol.answers import ZERO, wire
from dataplane.protocol.build import build
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.protocol.messages import Request
from dataplane.security.acl import AclOperation, ResourceType
from dataplane.server.apis import RequestContext, api
from dataplane.server.owners import Owners
from dataplane.storage import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP

EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5


@api(2, "ListOffsets", 1, 10)
async def list_offsets(owners: Owners, request: Request, context: RequestContext) -> Any:
    topics = []
    committed = int(getattr(request.body, "isolation_level", 0)) == 1
    for topic_req in request.body.topics:
        partitions = []
        allowed = owners.access.allows(context, AclOperation.DESCRIBE, ResourceType.TOPIC, topic_req.name)
        for part in topic_req.partitions:
            entry: dict[str, Any] = {"partition_index": part.partition_index, "error_code": WireError.none,
                                     "timestamp": -1, "offset": -1, "leader_epoch": -1, "old_style_offsets": ()}
            try:
                if not allowed:
                    raise KafkaError("Topic authorization failed.", code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                partition = owners.replicas.leader_partition(topic_req.name, part.partition_index,
                                                             getattr(part, "current_leader_epoch", -1))
                if part.timestamp == LATEST_TIMESTAMP:  # consumers see up to the high watermark (read_committed: LSO)
                    end = partition.last_stable_offset if committed else partition.high_watermark
                    entry.update(offset=end, leader_epoch=partition.leader_epoch)
                elif part.timestamp == EARLIEST_TIMESTAMP:
                    entry.update(offset=partition.log.log_start_offset, leader_epoch=partition.leader_epoch)
                elif part.timestamp == EARLIEST_LOCAL_TIMESTAMP:
                    entry.update(offset=partition.log.local_log_start_offset, leader_epoch=partition.leader_epoch)
                elif part.timestamp == LATEST_TIERED_TIMESTAMP:  # -1 when nothing is tiered, as Kafka answers
                    tiered = partition.log.highest_remote_offset
                    entry.update(offset=tiered, leader_epoch=partition.leader_epoch if tiered >= 0 else -1)
                else:
                    found = await partition.offset_for_timestamp(part.timestamp)
                    if found is not None:
                        entry.update(timestamp=found.timestamp, offset=found.offset, leader_epoch=found.leader_epoch)
            except KafkaError as exc:
                entry["error_code"] = wire(exc.code)
            partitions.append(entry)
        topics.append({"name": topic_req.name, "partitions": partitions})
    return build(load_response_schema(2, request.api_version), {"throttle_time": ZERO, "topics": topics})
