"""DeleteRecords."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as WireError

from dataplane.protocol.build import build
from dataplane.protocol.errors import KafkaError, OffsetOutOfRangeError
from dataplane.protocol.messages import Request
from dataplane.server.apis import api
from dataplane.server.broker import ZERO, wire

if TYPE_CHECKING:
    from dataplane.server.broker import Broker

HIGH_WATERMARK = -1  # DeleteRecords' "everything up to the high watermark"


@api(21, "DeleteRecords", 0, 2)
async def delete_records(broker: Broker, request: Request) -> Any:
    topics = []
    for topic_req in request.body.topics:
        partitions = []
        for part in topic_req.partitions:
            entry: dict[str, Any] = {"partition_index": part.partition_index, "low_watermark": -1,
                                     "error_code": WireError.none}
            try:
                _, runtime = broker.leader_runtime(topic_req.name, part.partition_index)
                partition_log = runtime.log
                # Followers move their log start up to this when they next fetch (it travels in Fetch).
                high_watermark = runtime.high_watermark
                offset = high_watermark if part.offset == HIGH_WATERMARK else part.offset
                if not 0 <= offset <= high_watermark:
                    raise OffsetOutOfRangeError(f"Cannot delete records before offset {part.offset}: "
                                                f"the high watermark is {high_watermark}.")
                low = await asyncio.to_thread(partition_log.delete_records_before, offset)
                entry["low_watermark"] = low
            except KafkaError as exc:
                entry["error_code"] = wire(exc.code)
            partitions.append(entry)
        topics.append({"name": topic_req.name, "partitions": partitions})
    return build(load_response_schema(21, request.api_version), {"throttle_time": ZERO, "topics": topics})
