"""DeleteRecords."""

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

HIGH_WATERMARK = -1  # DeleteRecords' "everything up to the high watermark"


@api(21, "DeleteRecords", 0, 2)
async def delete_records(owners: Owners, request: Request, context: RequestContext) -> Any:
    topics = []
    for topic_req in request.body.topics:
        partitions = []
        allowed = owners.access.allows(context, AclOperation.DELETE, ResourceType.TOPIC, topic_req.name)
        for part in topic_req.partitions:
            entry: dict[str, Any] = {"partition_index": part.partition_index, "low_watermark": -1,
                                     "error_code": WireError.none}
            try:
                if not allowed:
                    raise KafkaError("Topic authorization failed.", code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                partition = owners.replicas.leader_partition(topic_req.name, part.partition_index)
                offset = partition.high_watermark if part.offset == HIGH_WATERMARK else part.offset
                entry["low_watermark"] = await partition.delete_records(offset)
            except KafkaError as exc:
                entry["error_code"] = wire(exc.code)
            partitions.append(entry)
        topics.append({"name": topic_req.name, "partitions": partitions})
    return build(load_response_schema(21, request.api_version), {"throttle_time": ZERO, "topics": topics})
