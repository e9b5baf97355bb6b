"""v3 records: single, concatenated, streaming (chunked, reports as each record is acknowledged) and batch
produce against a real service, read back with a Kafka consumer; Java-compatible key partitioning; errors."""

from __future__ import annotations

import base64
import http.client
import json
import socket
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.kafkarest.conftest import RestStack

pytestmark = pytest.mark.xdist_group("kafkarest")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _read(stack: RestStack, topic: str, partitions: int, count: int) -> list[Any]:
    consumer = Consumer({**stack.kafka, "group.id": f"read-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen: list[Any] = []
    deadline = time.monotonic() + 30
    try:
        while len(seen) < count and time.monotonic() < deadline:
            seen += [m for m in consumer.consume(500, timeout=0.5) if m.error() is None]
    finally:
        consumer.close()
    return seen


@pytest.fixture(scope="module")
def topic(rest_stack: RestStack) -> str:
    name = f"rec-{uuid.uuid4().hex[:8]}"
    rest_stack.create_topic(name, partitions=3)
    return name


def _records_path(stack: RestStack, topic: str) -> str:
    return f"/kafka/v3/clusters/{stack.cluster_id}/topics/{topic}/records"


def test_single_record_with_every_data_type_and_headers_lands_as_sent(rest_stack: RestStack, topic: str) -> None:
    answer = rest_stack.request("POST", _records_path(rest_stack, topic), {
        "partition_id": 1, "headers": [{"name": "trace", "value": _b64(b"abc")}, {"name": "empty", "value": None}],
        "key": {"type": "STRING", "data": "user-1"}, "value": {"type": "JSON", "data": {"n": 1, "s": "é"}},
        "timestamp": "2026-01-02T03:04:05.678Z"})
    assert answer.status == 200, answer.body
    report = answer.json()
    assert report["error_code"] == 200 and report["partition_id"] == 1 and report["topic_name"] == topic
    assert report["cluster_id"] == rest_stack.cluster_id
    assert report["timestamp"] == "2026-01-02T03:04:05.678Z"
    assert report["key"] == {"type": "STRING", "size": 6}
    binary = rest_stack.request("POST", _records_path(rest_stack, topic), {
        "partition_id": 1, "value": {"type": "BINARY", "data": _b64(b"\x00\xff raw")}})
    assert binary.status == 200 and binary.json()["offset"] == report["offset"] + 1
    got = [m for m in _read(rest_stack, topic, 3, 100) if m.partition() == 1][-2:]
    assert got[0].key() == b"user-1" and json.loads(got[0].value()) == {"n": 1, "s": "é"}
    assert got[0].headers() == [("trace", b"abc"), ("empty", None)]
    assert got[0].timestamp()[1] == 1767323045678
    assert got[1].value() == b"\x00\xff raw" and got[1].key() is None


def test_rest_and_java_partitioner_agree_for_10000_keys(rest_stack: RestStack, topic: str) -> None:
    from kafka.partitioner.default import murmur2  # kafka-python's port of the Java client's hash

    keys = [f"key-{i}".encode() for i in range(10_000)]
    entries = [{"id": str(i), "key": {"type": "BINARY", "data": _b64(k)}, "value": {"type": "STRING", "data": "v"}}
               for i, k in enumerate(keys)]
    landed: dict[bytes, int] = {}
    for start in range(0, len(entries), 1000):
        answer = rest_stack.request("POST", _records_path(rest_stack, topic) + ":batch",
                                    {"entries": entries[start:start + 1000]})
        assert answer.status == 207, answer.body[:300]
        body = answer.json()
        assert body["failures"] == []
        for success in body["successes"]:
            landed[keys[int(success["id"])]] = success["partition_id"]
    # The Java client's rule, toPositive(murmur2(key)) % partitions...
    assert all(landed[k] == (murmur2(k) & 0x7FFFFFFF) % 3 for k in keys)
    # ...and where a Kafka producer using it (kafka-python's default partitioner) really puts the same keys.
    from kafka import KafkaProducer

    producer = KafkaProducer(**rest_stack.kafka_python, linger_ms=5)
    try:
        futures = [(k, producer.send(topic, key=k, value=b"v")) for k in keys]
        producer.flush(60)
        assert all(future.get(30).partition == landed[k] for k, future in futures)
    finally:
        producer.close(10)


def test_concatenated_records_get_one_report_each_in_order(rest_stack: RestStack, topic: str) -> None:
    body = b"".join(json.dumps({"partition_id": 2, "value": {"type": "STRING", "data": f"c{i}"}}).encode()
                    for i in range(5))
    body += b'{"partition_id": 99, "value": {"type": "STRING", "data": "nowhere"}}'
    body += b'{"value": {"type": "BINARY", "data": "not base64!"}}'
    answer = rest_stack.request("POST", _records_path(rest_stack, topic), raw=body)
    assert answer.status == 200
    reports = [json.loads(line) for line in answer.body.splitlines()]
    assert [r["error_code"] for r in reports] == [200] * 5 + [40402, 42206]
    offsets = [r["offset"] for r in reports[:5]]
    assert offsets == list(range(offsets[0], offsets[0] + 5))


def _chunk(sock: socket.socket, data: bytes) -> None:
    sock.sendall(f"{len(data):x}\r\n".encode() + data + b"\r\n")


class _ChunkedReader:
    """Reads a chunked HTTP response incrementally from a raw socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.file = sock.makefile("rb")
        self.status = int(self.file.readline().split()[1])
        while self.file.readline() not in (b"\r\n", b""):
            pass
        self.buffer = b""

    def line(self) -> bytes:
        while b"\n" not in self.buffer:
            size = int(self.file.readline().strip(), 16)
            if size == 0:
                raise EOFError
            self.buffer += self.file.read(size)
            self.file.readline()
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line


def test_streaming_produce_reports_each_record_before_the_next_is_sent(rest_stack: RestStack, topic: str) -> None:
    """A true stream: the client waits for each report before sending the next record on the same request."""
    sock = socket.create_connection(("127.0.0.1", rest_stack.port), timeout=30)
    try:
        sock.sendall((f"POST {_records_path(rest_stack, topic)} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      f"Authorization: {RestStack.basic(rest_stack.key)}\r\nContent-Type: application/json\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n").encode())
        reader: _ChunkedReader | None = None
        offsets = []
        for i in range(20):
            _chunk(sock, json.dumps({"partition_id": 0, "value": {"type": "STRING", "data": f"s{i}"}}).encode())
            if reader is None:
                reader = _ChunkedReader(sock)
                assert reader.status == 200
            report = json.loads(reader.line())
            assert report["error_code"] == 200, report
            offsets.append(report["offset"])
        _chunk(sock, b'{"value": {"type": "NOPE", "data": 1}}')
        assert reader is not None and json.loads(reader.line())["error_code"] == 42206
        sock.sendall(b"0\r\n\r\n")
        with pytest.raises(EOFError):
            reader.line()
        assert offsets == list(range(offsets[0], offsets[0] + 20))
    finally:
        sock.close()


def test_streaming_a_large_body_in_pieces_produces_every_record(rest_stack: RestStack, topic: str) -> None:
    records = [json.dumps({"partition_id": 0, "key": {"type": "STRING", "data": f"k{i}"},
                           "value": {"type": "BINARY", "data": _b64(bytes([i % 256]) * 300)}}).encode()
               for i in range(3000)]
    data = b"\n".join(records)
    conn = http.client.HTTPConnection("127.0.0.1", rest_stack.port, timeout=60)
    conn.putrequest("POST", _records_path(rest_stack, topic))
    conn.putheader("Authorization", RestStack.basic(rest_stack.key))
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    for start in range(0, len(data), 7777):  # pieces that cut records (and base64) anywhere
        piece = data[start:start + 7777]
        conn.send(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
    conn.send(b"0\r\n\r\n")
    response = conn.getresponse()
    reports = [json.loads(line) for line in response.read().splitlines()]
    conn.close()
    assert len(reports) == 3000 and all(r["error_code"] == 200 for r in reports)
    offsets = [r["offset"] for r in reports]
    assert offsets == list(range(offsets[0], offsets[0] + 3000))


@pytest.mark.parametrize(("body", "status", "code"), [
    ({"value": {"type": "BINARY", "data": "%%%"}}, 422, 42206),
    ({"value": {"type": "AVRO", "data": {}}}, 400, 400),  # a type with a schema needs its schema (Confluent's 400)
    ({"value": {"type": "STRING", "data": 5}}, 422, 42206),
    ({"partition_id": -1, "value": None}, 422, 42206),
    ({"partition_id": 7, "value": None}, 404, 40402),
    ({"value": None, "timestamp": "yesterday"}, 422, 42206),
    ({"headers": [{"value": "eA=="}]}, 422, 42206),
])
def test_bad_records_get_confluent_error_codes(rest_stack: RestStack, topic: str, body: Any, status: int,
                                               code: int) -> None:
    answer = rest_stack.request("POST", _records_path(rest_stack, topic), body)
    assert (answer.status, answer.json()["error_code"]) == (status, code), answer.body


def test_request_level_errors(rest_stack: RestStack, topic: str) -> None:
    path = _records_path(rest_stack, topic)
    unknown = rest_stack.request("POST", _records_path(rest_stack, "no-such-topic"), {"value": None})
    assert (unknown.status, unknown.json()["error_code"]) == (404, 40401)
    other = rest_stack.request("POST", f"/kafka/v3/clusters/skc-0000000000000000/topics/{topic}/records",
                               {"value": None})
    assert (other.status, other.json()["error_code"]) == (404, 404)
    wrong_type = rest_stack.request("POST", path, raw=b"{}", headers={"Content-Type": "text/plain"})
    assert (wrong_type.status, wrong_type.json()["error_code"]) == (415, 415)
    anonymous = rest_stack.request("POST", path, {"value": None}, key=None)
    assert anonymous.status == 401 and anonymous.json()["error_code"] == 401
    bad_key = rest_stack.request("POST", path, {"value": None}, key="ABCDEFGHJKLMNPQR:" + "x" * 64)
    assert (bad_key.status, bad_key.json()["error_code"]) == (401, 401)
    viewer = rest_stack.new_key("viewer")
    refused = rest_stack.request("POST", path, {"value": None}, key=viewer)
    assert (refused.status, refused.json()["error_code"]) == (403, 403)
    truncated = rest_stack.request("POST", path, raw=b'{"value": {"type": "STRING", "data": "x"')
    assert truncated.json()["error_code"] == 42206
    not_object = rest_stack.request("POST", path, raw=b"[1, 2]")
    assert not_object.json()["error_code"] == 42206
    empty = rest_stack.request("POST", path, raw=b"  ")
    assert empty.json()["error_code"] == 42206


def test_batch_rules(rest_stack: RestStack, topic: str) -> None:
    path = _records_path(rest_stack, topic) + ":batch"
    mixed = rest_stack.request("POST", path, {"entries": [
        {"id": "a", "value": {"type": "STRING", "data": "ok"}},
        {"id": "b", "value": {"type": "BINARY", "data": "!!"}},
        {"id": "c", "partition_id": 9, "value": None}]})
    assert mixed.status == 207
    body = mixed.json()
    assert [s["id"] for s in body["successes"]] == ["a"]
    assert {f["id"]: f["error_code"] for f in body["failures"]} == {"b": 42206, "c": 40402}
    for bad in ({"entries": []}, {"entries": [{"id": "x"}, {"id": "x"}]}, {"entries": [{"value": None}]},
                {"nope": 1}, {"entries": [{"id": str(i)} for i in range(1001)]}):
        answer = rest_stack.request("POST", path, bad)
        assert (answer.status, answer.json()["error_code"]) == (422, 42208), (bad, answer.body[:200])


def test_oversized_payloads(rest_stack: RestStack) -> None:
    """A record over the topic's max.message.bytes is refused by the cluster (413, nothing written); a body
    announced over the request limit is refused before it is read."""
    name = f"small-{uuid.uuid4().hex[:6]}"
    rest_stack.create_topic(name, partitions=1, configs={"max.message.bytes": "2048"})
    path = _records_path(rest_stack, name)
    big = rest_stack.request("POST", path, {"value": {"type": "BINARY", "data": _b64(b"z" * 10_000)}})
    assert (big.status, big.json()["error_code"]) == (413, 413), big.body
    fits = rest_stack.request("POST", path, {"value": {"type": "BINARY", "data": _b64(b"z" * 100)}})
    assert fits.status == 200 and fits.json()["offset"] == 0
    # In a batch, the large record fails alone: the others are written, in order.
    mixed = rest_stack.request("POST", path + ":batch", {"entries": [
        {"id": "a", "value": {"type": "STRING", "data": "small"}},
        {"id": "b", "value": {"type": "BINARY", "data": _b64(b"z" * 10_000)}},
        {"id": "c", "value": {"type": "STRING", "data": "small"}}]})
    assert mixed.status == 207, mixed.body
    body = mixed.json()
    assert [(s["id"], s["offset"]) for s in body["successes"]] == [("a", 1), ("c", 2)]
    assert [(f["id"], f["error_code"]) for f in body["failures"]] == [("b", 413)]
    for batch in (False, True):
        sock = socket.create_connection(("127.0.0.1", rest_stack.port), timeout=30)
        try:
            sock.sendall((f"POST {path}{':batch' if batch else ''} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          f"Authorization: {RestStack.basic(rest_stack.key)}\r\nContent-Type: application/json\r\n"
                          f"Content-Length: {200 * 1024 * 1024}\r\n\r\n").encode())
            status = sock.makefile("rb").readline()
            assert status.split()[1] == b"413", status
        finally:
            sock.close()
