"""Tiered storage on a managed cluster, end to end from `sluice up`: the embedded object store, the agent writing
the broker's remote settings, a topic made tiered through the management API, closed segments uploaded under the
cluster's own prefix and gone from the broker's disk, and every record read back from offset 0."""

from __future__ import annotations

import uuid
from pathlib import Path

import boto3
from botocore.config import Config
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.kafkarest.conftest import RestStack
from tests.support.polling import wait_until

SEGMENT = 4096
COUNT = 600


def _objects(stack: RestStack) -> list[str]:
    store = stack.var / "objectstore"
    key = (store / "access-key").read_text().strip()
    s3 = boto3.client("s3", endpoint_url=(store / "endpoint").read_text().strip(), region_name="us-east-1",
                      aws_access_key_id=key, aws_secret_access_key=key,
                      config=Config(s3={"addressing_style": "path"}, request_checksum_calculation="when_required",
                                    response_checksum_validation="when_required"))
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket="sluice-tier"):
        keys += [item["Key"] for item in page.get("Contents", [])]
    return keys


def _local_segments(stack: RestStack, topic: str) -> list[Path]:
    return sorted(stack.var.glob(f"clusters/{stack.cluster_id}/*/data/{topic}-0/*.log"))


def test_a_tiered_topic_uploads_to_its_clusters_prefix_and_reads_back_from_offset_zero(rest_stack: RestStack) -> None:
    topic = f"tiered-{uuid.uuid4().hex[:8]}"
    rest_stack.api("POST", f"/clusters/{rest_stack.cluster_pk}/topics", {"name": topic, "partitions": 1, "configs": {
        "remote.storage.enable": "true", "segment.bytes": str(SEGMENT), "local.retention.bytes": str(2 * SEGMENT)}})
    rest_stack.wait_for_leaders(topic, 1)
    producer = Producer({**rest_stack.kafka, "acks": "all", "linger.ms": 1, "batch.size": 1024})
    sent = [(f"k{i}".encode(), f"v{i:06d}".encode().ljust(200, b".")) for i in range(COUNT)]
    for key, value in sent:
        producer.produce(topic, value, key)
    assert producer.flush(60) == 0

    def tiered() -> list[str]:
        mine = [k for k in _objects(rest_stack) if f"/{rest_stack.cluster_id}/" in f"/{k}" and f"/{topic}-" in k]
        return mine if any(k.endswith(".json") for k in mine) else []

    uploaded = wait_until(tiered, "segments uploaded under the cluster's prefix", 60)
    assert all(k.split("/")[0] == rest_stack.cluster_id or f"/{rest_stack.cluster_id}/" in k for k in uploaded)
    # Local retention (two segments' worth) removed the uploaded segments from the broker's disk.
    wait_until(lambda: _local_segments(rest_stack, topic) and _local_segments(rest_stack, topic)[0].stem != "0" * 20,
               "the first segment to leave local disk", 60)

    # The management API reports what the remote tier holds for the topic (the console's topics list shows it).
    listed = rest_stack.api("GET", f"/clusters/{rest_stack.cluster_pk}/topics/{topic}")
    assert listed["remote_size_bytes"] and listed["remote_size_bytes"] >= SEGMENT, listed

    consumer = Consumer({**rest_stack.kafka, "group.id": f"g-{topic}", "enable.auto.commit": False,
                         "max.partition.fetch.bytes": 16384})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[tuple[bytes, bytes]] = []
    try:
        def drained() -> bool:
            for message in consumer.consume(200, 1):
                assert message.error() is None, message.error()
                got.append((message.key(), message.value()))
            return len(got) >= COUNT
        wait_until(drained, f"{COUNT} records from offset 0", 90)
    finally:
        consumer.close()
    assert got == sent
