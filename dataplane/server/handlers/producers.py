"""DescribeProducers (KIP-664): the producers a partition leader holds state for, with their open transactions.

What ``kafka-transactions.sh find-hanging`` and ``abort --start-offset`` read: a
producer whose transaction is open in a partition (``current_txn_start_offset``)
while its coordinator knows no such transaction is a hanging one. Needs READ on
the topic, as in Kafka; only the partition's leader answers.
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


@api(61, "DescribeProducers", 0, 0)
async def describe_producers(owners: Owners, request: Request, context: RequestContext) -> Any:
    topics = []
    for topic in request.body.topics:
        readable = owners.access.allows(context, AclOperation.READ, ResourceType.TOPIC, topic.name)
        partitions = []
        for index in topic.partition_indexes:
            entry: dict[str, Any] = {"partition_index": index, "error_code": WireError.none, "error_message": None,
                                     "active_producers": ()}
            try:
                if not readable:
                    raise KafkaError(f"Not authorized to read topic {topic.name}.",
                                     code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                partition = owners.replicas.leader_partition(topic.name, int(index))
                entry["active_producers"] = [
                    {"producer_id": p.producer_id, "producer_epoch": p.producer_epoch,
                     "last_sequence": p.last_sequence, "last_timestamp": p.last_timestamp,
                     "coordinator_epoch": p.coordinator_epoch, "current_txn_start_offset": p.txn_start_offset}
                    for p in partition.log.active_producers()]
            except KafkaError as exc:
                entry.update(error_code=wire(exc.code), error_message=str(exc))
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return build(load_response_schema(61, request.api_version), {"throttle_time": ZERO, "topics": topics})
