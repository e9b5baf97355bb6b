"""CreateTopics."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as WireError

from dataplane.protocol.build import build
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.protocol.messages import Request
from dataplane.server.apis import api
from dataplane.server.broker import ZERO, wire

if TYPE_CHECKING:
    from dataplane.server.broker import Broker


@api(19, "CreateTopics", 2, 7)
async def create_topics(broker: Broker, request: Request) -> Any:
    body = request.body
    results = []
    for item in body.topics:
        partitions = broker.config.num_partitions if item.num_partitions == -1 else item.num_partitions
        replication = (broker.config.default_replication_factor if item.replication_factor == -1
                       else item.replication_factor)
        entry: dict[str, Any] = {"name": item.name, "topic_id": None, "error_code": WireError.none,
                                 "error_message": None, "topic_config_error_code": 0,
                                 "num_partitions": -1, "replication_factor": -1, "configs": ()}
        try:
            if item.assignments:
                raise KafkaError("manual replica assignment is not supported yet", code=ErrorCode.INVALID_REQUEST)
            topic = await broker.create_topic(item.name, partitions, replication,
                                              {c.name: c.value for c in item.configs if c.value is not None},
                                              validate_only=body.validate_only)
            entry.update(topic_id=topic.topic_id, num_partitions=len(topic.partitions),
                         replication_factor=len(topic.partitions[0].replicas) if topic.partitions else -1)
        except KafkaError as exc:
            entry.update(error_code=wire(exc.code), error_message=str(exc))
        results.append(entry)
    return build(load_response_schema(19, request.api_version), {"throttle_time": ZERO, "topics": results})
