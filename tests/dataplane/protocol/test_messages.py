"""Requests encoded by kafka-python decode with kio; our responses decode in kafka-python."""

from __future__ import annotations

import datetime
import struct
import uuid

import kafka.protocol.consumer as kafka_consumer
import kafka.protocol.metadata as kafka_metadata
import kafka.protocol.producer as kafka_producer
import pytest
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder
from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v3.response import ApiVersion, ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.response import FetchableTopicResponse, FetchResponse, PartitionData

from dataplane.protocol.framing import RemoteProtocolError
from dataplane.protocol.messages import Request, UnsupportedRequest, encode_response, parse_request

ZERO = datetime.timedelta(0)


def client_frame(message: object, correlation_id: int = 7) -> bytes:
    message.with_header(correlation_id=correlation_id, client_id="cli")  # type: ignore[attr-defined]
    return bytes(message.encode(header=True, framed=True))  # type: ignore[attr-defined]


def record_batch(count: int = 3) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for i in range(count):
        builder.append(timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=b"v" * 100, headers=[("h", b"x")])
    builder.close()
    return bytes(builder.buffer())


def test_api_versions_v3_round_trip_uses_response_header_v0() -> None:
    request = kafka_metadata.ApiVersionsRequest[3](client_software_name="kafka-python",
                                                   client_software_version="3.0")
    parsed = parse_request(client_frame(request, 42)[4:])
    assert isinstance(parsed, Request)
    assert (parsed.api_key, parsed.api_version, parsed.correlation_id, parsed.client_id) == (18, 3, 42, "cli")
    response = ApiVersionsResponse(error_code=ErrorCode.none, throttle_time=ZERO,
                                   api_keys=(ApiVersion(api_key=18, min_version=0, max_version=4),))
    wire = b"".join(encode_response(42, response))
    assert struct.unpack_from(">i", wire)[0] == len(wire) - 4
    decoded = kafka_metadata.ApiVersionsResponse.decode(wire, version=3, header=True, framed=True)
    assert decoded.error_code == 0 and decoded.api_keys[0].max_version == 4


def test_produce_records_arrive_as_the_exact_bytes_sent() -> None:
    batch = record_batch()
    request = kafka_producer.ProduceRequest[9](
        transactional_id=None, acks=-1, timeout_ms=30000,
        topic_data=[kafka_producer.ProduceRequest.TopicProduceData(name="t1", partition_data=[
            kafka_producer.ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=batch)])])
    parsed = parse_request(client_frame(request)[4:])
    assert isinstance(parsed, Request)
    assert parsed.body.topic_data[0].partition_data[0].records == batch


def test_fetch_response_carries_records_without_copying_them() -> None:
    batch = record_batch()
    response = FetchResponse(throttle_time=ZERO, error_code=ErrorCode.none, session_id=0, responses=(
        FetchableTopicResponse(topic="t1", partitions=(PartitionData(
            partition_index=0, error_code=ErrorCode.none, high_watermark=3, last_stable_offset=3,
            log_start_offset=0, aborted_transactions=None, records=batch),)),))
    chunks = encode_response(99, response)
    assert any(chunk is batch for chunk in chunks)
    decoded = kafka_consumer.FetchResponse.decode(b"".join(chunks), version=12, header=True, framed=True)
    records = decoded.responses[0].partitions[0].records
    assert [r.key for b in MemoryRecords(bytes(records)) for r in b] == [b"k0", b"k1", b"k2"]


def test_metadata_v12_request_decodes() -> None:
    request = kafka_metadata.MetadataRequest[12](
        topics=[kafka_metadata.MetadataRequest.MetadataRequestTopic(name="t1", topic_id=uuid.UUID(int=0))],
        allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    parsed = parse_request(client_frame(request)[4:])
    assert isinstance(parsed, Request) and parsed.body.topics[0].name == "t1"


def test_unsupported_api_versions_version_keeps_the_correlation_id() -> None:
    raw = struct.pack(">hhih", 18, 99, 123, 3) + b"cli" + b"\x00" + b"\x03kp\x03v1\x00"
    parsed = parse_request(raw)
    assert parsed == UnsupportedRequest(api_key=18, api_version=99, correlation_id=123)
    reply = ApiVersionsResponseV0(error_code=ErrorCode.unsupported_version,
                                  api_keys=(ApiVersionV0(api_key=18, min_version=0, max_version=4),))
    decoded = kafka_metadata.ApiVersionsResponse.decode(b"".join(encode_response(123, reply)), version=0,
                                                        header=True, framed=True)
    assert decoded.error_code == 35


@pytest.mark.parametrize("payload", [
    b"\x00",  # shorter than a header
    struct.pack(">hhih", 3, 12, 1, 3) + b"cl",  # truncated client id
])
def test_malformed_requests_raise_protocol_errors(payload: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        parse_request(payload)


def test_trailing_bytes_are_ignored_as_kafka_does() -> None:
    request = kafka_metadata.MetadataRequest[12](topics=None, allow_auto_topic_creation=False,
                                                 include_topic_authorized_operations=False)
    parsed = parse_request(client_frame(request)[4:] + b"junk")
    assert isinstance(parsed, Request) and parsed.body.topics is None


def test_unknown_api_key_is_unsupported_not_a_crash() -> None:
    parsed = parse_request(struct.pack(">hhih", 999, 0, 5, -1))
    assert parsed == UnsupportedRequest(api_key=999, api_version=0, correlation_id=5)
