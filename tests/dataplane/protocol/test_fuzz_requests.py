"""``parse_request`` on hostile bytes: the only exception that may come out is RemoteProtocolError.

Anything else would escape the connection's handling, and a huge array count used to
abort the whole process inside kio's native reader (see ``protocol/bounds.py``).
``SLUICE_HYPOTHESIS_EXAMPLES=20000`` for a long run; the default keeps the suite fast.
"""

from __future__ import annotations

import os
import struct
import uuid

import kafka.protocol.consumer as kafka_consumer
import kafka.protocol.metadata as kafka_metadata
import kafka.protocol.producer as kafka_producer
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataplane.protocol.framing import RemoteProtocolError
from dataplane.protocol.messages import Request, UnsupportedRequest, parse_request
from tests.dataplane.protocol.test_messages import client_frame, record_batch

EXAMPLES = int(os.environ.get("SLUICE_HYPOTHESIS_EXAMPLES", "200"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _produce(version: int) -> bytes:
    data = kafka_producer.ProduceRequest.TopicProduceData
    return client_frame(kafka_producer.ProduceRequest[version](
        transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[data(name="t1", partition_data=[
            data.PartitionProduceData(index=0, records=record_batch(2)),
            data.PartitionProduceData(index=1, records=None)])]))[4:]


def _fetch(version: int) -> bytes:
    topic = kafka_consumer.FetchRequest.FetchTopic
    return client_frame(kafka_consumer.FetchRequest[version](
        replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, topics=[topic(topic="t1", partitions=[topic.FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=5, log_start_offset=-1,
            partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id=""))[4:]


def _metadata(version: int) -> bytes:
    topic = kafka_metadata.MetadataRequest.MetadataRequestTopic
    topics = [topic(name="t1", topic_id=uuid.UUID(int=0))] if version >= 10 else [topic(name="t1")]
    if version < 4:
        return client_frame(kafka_metadata.MetadataRequest[version](topics=topics))[4:]
    return client_frame(kafka_metadata.MetadataRequest[version](
        topics=topics, allow_auto_topic_creation=True, include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False))[4:]


SEEDS = [_produce(v) for v in (3, 8, 9)] + [_fetch(v) for v in (4, 11, 12)] + [_metadata(v) for v in (0, 4, 9, 12)]


def assert_only_protocol_errors(payload: bytes) -> None:
    try:
        parsed = parse_request(payload)
    except RemoteProtocolError:
        return
    assert isinstance(parsed, Request | UnsupportedRequest)


def test_seeds_are_valid_requests() -> None:
    assert all(isinstance(parse_request(seed), Request) for seed in SEEDS)


@FUZZ
@given(st.binary(max_size=512))
def test_random_bytes(payload: bytes) -> None:
    assert_only_protocol_errors(payload)


@FUZZ
@given(st.sampled_from([0, 1, 3, 18, 19]), st.integers(0, 12), st.binary(max_size=256))
def test_random_body_behind_a_served_header(api_key: int, version: int, rest: bytes) -> None:
    assert_only_protocol_errors(struct.pack(">hhi", api_key, version, 1) + rest)


_MUTATION = st.tuples(
    st.sampled_from(["set", "int32", "uvarint", "truncate", "insert", "delete"]),
    st.floats(0, 1, exclude_max=True),
    st.integers(0, 255),
    st.sampled_from([-2, -1, 0, 1, 127, 128, 2**15, 2**31 - 1, -(2**31)]),
    st.binary(min_size=1, max_size=8),
)


def mutate(seed: bytes, mutations: list[tuple[str, float, int, int, bytes]]) -> bytes:
    data = bytearray(seed)
    for kind, where, byte, number, blob in mutations:
        pos = int(where * (len(data) + 1))
        if kind == "set":
            data[pos:pos + 1] = bytes([byte])
        elif kind == "int32":  # a lying length or count
            data[pos:pos + 4] = struct.pack(">i", number)
        elif kind == "uvarint":  # a lying compact length or count
            data[pos:pos + 1] = b"\xff\xff\xff\xff\x0f" if number < 0 else bytes([number & 0x7F])
        elif kind == "truncate":
            del data[pos:]
        elif kind == "insert":
            data[pos:pos] = blob
        else:
            del data[pos:pos + len(blob)]
    return bytes(data)


@FUZZ
@given(st.sampled_from(SEEDS), st.lists(_MUTATION, min_size=1, max_size=4))
def test_mutated_valid_requests(seed: bytes, mutations: list[tuple[str, float, int, int, bytes]]) -> None:
    assert_only_protocol_errors(mutate(seed, mutations))


@pytest.mark.parametrize(("name", "payload"), [
    # Metadata v0 claiming 2**31 - 1 topics in 0 bytes: kio's reader would try to allocate 16 GiB and abort.
    ("huge legacy array", struct.pack(">hhih", 3, 0, 1, 3) + b"cli" + struct.pack(">i", 2**31 - 1)),
    # Metadata v12 (flexible): a compact array count of 2**32 - 2.
    ("huge compact array", struct.pack(">hhih", 3, 12, 1, 3) + b"cli" + b"\x00" + b"\xff\xff\xff\xff\x0f"),
    # Produce v3 with a records length far past the end.
    ("lying bytes length", struct.pack(">hhih", 0, 3, 1, -1) + struct.pack(">hhii", -1, -1, 1000, 1)
     + struct.pack(">h", 1) + b"t" + struct.pack(">iii", 1, 0, 2**31 - 1)),
    # ApiVersions v3 with an unknown tagged field in the body.
    ("unknown tagged field", struct.pack(">hhih", 18, 3, 1, 3) + b"cli" + b"\x00" + b"\x02kp\x021" + b"\x01\x63\x01x"),
    # a tagged-field count no frame could hold
    ("huge tag count", struct.pack(">hhih", 18, 3, 1, 3) + b"cli" + b"\x00" + b"\x02kp\x021" + b"\xff\xff\xff\x7f"),
])
def test_known_hostile_requests_are_protocol_errors(name: str, payload: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        parse_request(payload)
