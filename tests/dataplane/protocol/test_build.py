"""One version-agnostic description builds every version of a response, and clients decode each."""

from __future__ import annotations

import datetime
import uuid

import kafka.protocol.metadata as kafka_metadata
import pytest
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode

from dataplane.protocol.build import build
from dataplane.protocol.messages import encode_response

TOPIC_ID = uuid.uuid4()
METADATA = {
    "throttle_time": datetime.timedelta(0),
    "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}],
    "cluster_id": "cluster-1",
    "controller_id": 1,
    "cluster_authorized_operations": -2147483648,
    "topics": [{
        "error_code": ErrorCode.none, "name": "orders", "topic_id": TOPIC_ID, "is_internal": False,
        "topic_authorized_operations": -2147483648,
        "partitions": [{"error_code": ErrorCode.none, "partition_index": 0, "leader_id": 1, "leader_epoch": 3,
                        "replica_nodes": (1,), "isr_nodes": (1,), "offline_replicas": ()}],
    }],
}


@pytest.mark.parametrize("version", range(0, 13))
def test_metadata_every_version_from_one_description(version: int) -> None:
    response = build(load_response_schema(3, version), METADATA)
    wire = b"".join(encode_response(5, response))
    decoded = kafka_metadata.MetadataResponse.decode(wire, version=version, header=True, framed=True)
    assert decoded.brokers[0].port == 9092
    topic = decoded.topics[0]
    assert topic.name == "orders" and topic.partitions[0].leader_id == 1
    if version >= 7:
        assert topic.partitions[0].leader_epoch == 3
    if version >= 10:
        assert topic.topic_id == TOPIC_ID
    if version >= 2:
        assert decoded.cluster_id == "cluster-1"


def test_missing_required_fields_are_named() -> None:
    with pytest.raises(TypeError, match="'brokers'"):
        build(load_response_schema(3, 12), {"throttle_time": datetime.timedelta(0), "topics": ()})
