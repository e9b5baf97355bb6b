"""The client codec wired to the broker's own codec in memory, checked against kafka-python's bytes too."""

from __future__ import annotations

import datetime
import struct
import uuid
from typing import Any

import kafka.protocol.metadata as kafka_metadata
import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersion, ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.fetch.v12.response import FetchableTopicResponse, FetchResponse, PartitionData
from kio.schema.metadata.v8.request import MetadataRequest as MetadataRequestV8
from kio.schema.metadata.v8.request import MetadataRequestTopic as MetadataRequestTopicV8
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse, MetadataResponseTopic
from kio.schema.produce.v8.request import PartitionProduceData as PartitionProduceDataV8
from kio.schema.produce.v8.request import ProduceRequest as ProduceRequestV8
from kio.schema.produce.v8.request import TopicProduceData as TopicProduceDataV8
from kio.schema.produce.v8.response import PartitionProduceResponse as PartitionProduceResponseV8
from kio.schema.produce.v8.response import ProduceResponse as ProduceResponseV8
from kio.schema.produce.v8.response import TopicProduceResponse as TopicProduceResponseV8
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from dataplane.protocol.client import (
    BadResponse,
    ClientCodec,
    CorrelationMismatch,
    Response,
    decode_response,
    encode_request,
)
from dataplane.protocol.framing import RemoteProtocolError
from dataplane.protocol.messages import Request, encode_response, parse_request
from dataplane.protocol.records import Record, build_batch

ZERO = datetime.timedelta(0)
TIMEOUT = i32Timedelta.parse(datetime.timedelta(seconds=30))


def metadata_v12(topic: str = "t1") -> MetadataRequest:
    return MetadataRequest(topics=(MetadataRequestTopic(name=TopicName(topic), topic_id=uuid.UUID(int=7)),),
                           allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def produce_v9(acks: int) -> ProduceRequest:
    data = PartitionProduceData(index=i32(0), records=build_batch([Record(0, 0, b"k", b"v")]))
    return ProduceRequest(transactional_id=None, acks=i16(acks), timeout=TIMEOUT,
                          topic_data=(TopicProduceData(name=TopicName("t1"), partition_data=(data,)),))


def fetch_v12() -> FetchRequest:
    return FetchRequest(
        cluster_id=None, replica_id=BrokerId(2), max_wait=i32Timedelta.parse(ZERO), min_bytes=i32(1),
        max_bytes=i32(1 << 20), isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1),
        topics=(FetchTopic(topic=TopicName("t1"), partitions=(FetchPartition(
            partition=i32(0), current_leader_epoch=i32(3), fetch_offset=i64(10), last_fetched_epoch=i32(2),
            log_start_offset=i64(-1), partition_max_bytes=i32(1 << 20)),)),),
        forgotten_topics_data=(), rack_id="east")


REQUESTS: dict[str, Any] = {
    "metadata v12 (flexible: request header v2)": metadata_v12(),
    "metadata v8 (request header v1)": MetadataRequestV8(
        topics=(MetadataRequestTopicV8(name=TopicName("t1")),), allow_auto_topic_creation=True,
        include_cluster_authorized_operations=False, include_topic_authorized_operations=False),
    "api versions v3": ApiVersionsRequest(client_software_name="sluice", client_software_version="1"),
    "produce v9 with records": produce_v9(-1),
    "produce v8": ProduceRequestV8(transactional_id=None, acks=i16(1), timeout=TIMEOUT, topic_data=(
        TopicProduceDataV8(name=TopicName("t1"), partition_data=(
            PartitionProduceDataV8(index=i32(0), records=build_batch([Record(0, 0, None, b"x")])),)),)),
    "fetch v12": fetch_v12(),
}


@pytest.mark.parametrize("request_", REQUESTS.values(), ids=REQUESTS.keys())
def test_requests_round_trip_through_the_broker_parser(request_: Any) -> None:
    frame = encode_request(request_, 77, "cli")
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    parsed = parse_request(frame[4:])
    assert parsed == Request(request_.__api_key__, request_.__version__, 77, "cli", request_)


def test_request_headers_match_kafka_python_byte_for_byte() -> None:
    """An independent codec picks the header version too: v2 for a flexible version, v1 before."""
    theirs = kafka_metadata.MetadataRequest[12](
        topics=[kafka_metadata.MetadataRequest.MetadataRequestTopic(name="t1", topic_id=uuid.UUID(int=7))],
        allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    theirs.with_header(correlation_id=5, client_id="cli")
    assert encode_request(metadata_v12(), 5, "cli") == bytes(theirs.encode(header=True, framed=True))
    old = kafka_metadata.MetadataRequest[8](
        topics=[kafka_metadata.MetadataRequest.MetadataRequestTopic(name="t1")], allow_auto_topic_creation=True,
        include_cluster_authorized_operations=False, include_topic_authorized_operations=False)
    old.with_header(correlation_id=6, client_id=None)
    assert encode_request(REQUESTS["metadata v8 (request header v1)"], 6, None) == bytes(
        old.encode(header=True, framed=True))


def test_a_version_other_than_the_entitys_is_refused() -> None:
    with pytest.raises(ValueError, match="is version 12, not 11"):
        encode_request(fetch_v12(), 1, "cli", api_version=11)
    with pytest.raises(ValueError, match="is version 12, not 11"):
        ClientCodec("cli").send(fetch_v12(), 11)


RESPONSES: dict[str, tuple[Any, Any]] = {
    "api versions v3 (flexible, yet response header v0)": (
        ApiVersionsRequest(client_software_name="sluice", client_software_version="1"),
        ApiVersionsResponse(error_code=ErrorCode.none, throttle_time=ZERO,
                            api_keys=(ApiVersion(api_key=i16(18), min_version=i16(0), max_version=i16(4)),))),
    "metadata v12 (response header v1)": (metadata_v12(), MetadataResponse(
        throttle_time=ZERO, brokers=(), cluster_id="c", controller_id=BrokerId(1), topics=(MetadataResponseTopic(
            error_code=ErrorCode.unknown_topic_or_partition, name=TopicName("t1"), topic_id=uuid.UUID(int=7),
            is_internal=False, partitions=(), topic_authorized_operations=i32(-(2**31))),))),
    "fetch v12 with records": (fetch_v12(), FetchResponse(
        throttle_time=ZERO, error_code=ErrorCode.none, session_id=i32(0), responses=(FetchableTopicResponse(
            topic=TopicName("t1"), partitions=(PartitionData(
                partition_index=i32(0), error_code=ErrorCode.none, high_watermark=i64(1), last_stable_offset=i64(1),
                log_start_offset=i64(0), aborted_transactions=None,
                records=build_batch([Record(0, 0, None, b"v")])),)),))),
    "produce v8 (response header v0)": (REQUESTS["produce v8"], ProduceResponseV8(
        throttle_time=ZERO, responses=(TopicProduceResponseV8(name=TopicName("t1"), partition_responses=(
            PartitionProduceResponseV8(index=i32(0), error_code=ErrorCode.none, base_offset=i64(4),
                                       log_append_time=None, log_start_offset=i64(0), record_errors=(),
                                       error_message=None),)),))),
}


def answer(frame: bytes, response: Any, correlation_id: int | None = None) -> bytes:
    """The broker's side: parse the request, encode ``response`` to it."""
    parsed = parse_request(frame[4:])
    assert isinstance(parsed, Request)
    cid = parsed.correlation_id if correlation_id is None else correlation_id
    return b"".join(chunk for chunk in encode_response(cid, response) if isinstance(chunk, bytes))


@pytest.mark.parametrize(("request_", "response"), RESPONSES.values(), ids=RESPONSES.keys())
def test_responses_round_trip_from_the_broker_encoder(request_: Any, response: Any) -> None:
    codec = ClientCodec("cli")
    correlation_id, frame = codec.send(request_)
    assert codec.in_flight == 1
    assert codec.receive(answer(frame, response)) == [
        Response(request_.__api_key__, request_.__version__, correlation_id, response)]
    assert codec.in_flight == 0


def test_a_response_encoded_by_kafka_python_decodes() -> None:
    theirs = kafka_metadata.ApiVersionsResponse[3](error_code=0, api_keys=[(18, 0, 4)], throttle_time_ms=0)
    theirs.with_header(correlation_id=1)
    codec = ClientCodec("cli")
    codec.send(ApiVersionsRequest(client_software_name="sluice", client_software_version="1"))
    [response] = codec.receive(bytes(theirs.encode(header=True, framed=True)))
    assert response.correlation_id == 1 and response.body.api_keys[0].max_version == 4


def test_pipelined_responses_come_back_in_order_from_any_split_of_the_bytes() -> None:
    codec = ClientCodec("cli")
    wire = b""
    for name in ("api versions v3 (flexible, yet response header v0)", "metadata v12 (response header v1)",
                 "fetch v12 with records"):
        request_, response = RESPONSES[name]
        wire += answer(codec.send(request_)[1], response)
    received = [r for i in range(len(wire)) for r in codec.receive(wire[i:i + 1])]
    assert [(r.correlation_id, r.api_key) for r in received] == [(1, 18), (2, 3), (3, 1)]


def test_produce_with_acks_0_expects_no_response() -> None:
    codec = ClientCodec("cli")
    codec.send(produce_v9(0))
    assert codec.in_flight == 0
    codec.send(produce_v9(1))
    assert codec.in_flight == 1


def test_correlation_ids_wrap_to_zero_after_int32_max() -> None:
    codec = ClientCodec("cli", first_correlation_id=2**31 - 1)
    assert [codec.send(metadata_v12())[0] for _ in range(2)] == [2**31 - 1, 0]


def test_a_correlation_mismatch_is_named() -> None:
    codec = ClientCodec("cli")
    request_, response = RESPONSES["metadata v12 (response header v1)"]
    _, frame = codec.send(request_)
    with pytest.raises(CorrelationMismatch, match="correlation id 9, expected 1") as raised:
        codec.receive(answer(frame, response, correlation_id=9))
    assert isinstance(raised.value, RemoteProtocolError)  # a connection-closing protocol error, like the broker's


def test_a_response_without_a_request_is_refused() -> None:
    _, response = RESPONSES["metadata v12 (response header v1)"]
    with pytest.raises(BadResponse, match="no request outstanding"):
        ClientCodec("cli").receive(b"".join(c for c in encode_response(1, response) if isinstance(c, bytes)))


def good_response_payload() -> bytes:
    request_, response = RESPONSES["metadata v12 (response header v1)"]
    return answer(ClientCodec("cli").send(request_)[1], response)[4:]


BAD_PAYLOADS = {
    "shorter than a header": (b"\x00\x00", "shorter than any response header"),
    "cut short": (good_response_payload()[:-3], "malformed response api_key=3 v12"),
    "trailing bytes": (good_response_payload() + b"junk", "4 bytes past its end"),
    # A broker array of 2**31 - 1 entries, announced as a compact count: refused before kio allocates.
    "absurd array count": (struct.pack(">i", 1) + b"\x00" + struct.pack(">i", 0) + b"\xff\xff\xff\xff\x07",
                           "malformed response api_key=3 v12"),
}


@pytest.mark.parametrize(("payload", "message"), BAD_PAYLOADS.values(), ids=BAD_PAYLOADS.keys())
def test_bad_response_frames_raise_bad_response(payload: bytes, message: str) -> None:
    codec = ClientCodec("cli")
    codec.send(metadata_v12())
    with pytest.raises(BadResponse, match=message):
        codec.receive(struct.pack(">i", len(payload)) + payload)


def test_decode_response_alone_checks_the_frame_too() -> None:
    assert decode_response(good_response_payload(), 3, 12).correlation_id == 1
    with pytest.raises(BadResponse, match="past its end"):
        decode_response(good_response_payload() + b"\x00", 3, 12)


def test_bad_frame_sizes_are_protocol_errors() -> None:
    codec = ClientCodec("cli", max_frame_bytes=1024)
    codec.send(metadata_v12())
    with pytest.raises(RemoteProtocolError, match="negative frame size"):
        codec.receive(struct.pack(">i", -1))
    with pytest.raises(RemoteProtocolError, match="exceeds the limit"):
        ClientCodec("cli", max_frame_bytes=1024).receive(struct.pack(">i", 1025))
