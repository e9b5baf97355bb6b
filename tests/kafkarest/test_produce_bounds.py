"""Every REST produce input is bounded: nesting, number length, NaN and Infinity, lone surrogates, timestamps and
partition counts get Confluent's 4xx error body from a real service -- never a 500, never a dropped response --
on v3 ``records`` (whole and streamed), ``records:batch`` and v2 produce; and generated bodies, JSON-ish or not,
keep to that rule."""

from __future__ import annotations

import http.client
import json
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controlplane.kafkarest.errors import http_status
from controlplane.kafkarest.fastjson import MAX_DEPTH
from tests.kafkarest.conftest import Answer, RestStack
from tests.kafkarest.v2_helpers import BINARY, JSON

pytestmark = pytest.mark.xdist_group("kafkarest")

PARTITIONS = 2


@pytest.fixture(scope="module")
def topic(rest_stack: RestStack) -> str:
    name = f"bounds-{uuid.uuid4().hex[:8]}"
    rest_stack.create_topic(name, partitions=PARTITIONS)
    return name


def _records(stack: RestStack, topic: str) -> str:
    return f"/kafka/v3/clusters/{stack.cluster_id}/topics/{topic}/records"


def _v2(stack: RestStack, topic: str) -> str:
    return f"/kafka/v2/clusters/{stack.cluster_id}/topics/{topic}"


def _stream(stack: RestStack, path: str, chunks: list[bytes], content_type: str = "application/json") -> Answer:
    """A chunked (streamed) request, each chunk sent as one HTTP chunk; the whole answer, read to its end."""
    conn = http.client.HTTPConnection("127.0.0.1", stack.port, timeout=60)
    try:
        conn.putrequest("POST", path)
        conn.putheader("Authorization", RestStack.basic(stack.key))
        conn.putheader("Content-Type", content_type)
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        for chunk in chunks:
            if chunk:
                conn.send(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        conn.send(b"0\r\n\r\n")
        response = conn.getresponse()
        return Answer(response.status, dict(response.headers), response.read())
    finally:
        conn.close()


def _error(answer: Answer) -> tuple[int, int, str]:
    body = answer.json()
    assert set(body) == {"error_code", "message"} and isinstance(body["message"], str), answer.body[:300]
    return answer.status, body["error_code"], body["message"]


def _record(data: bytes) -> bytes:
    return b'{"value": {"type": "JSON", "data": ' + data + b"}}"


def _nested(depth: int, inner: bytes = b"1") -> bytes:
    """JSON data that makes a v3 record (two levels of its own) ``depth`` levels deep."""
    return b"[" * (depth - 2) + inner + b"]" * (depth - 2)


# JSON data no record may hold, and what the refusal says.
BAD_DATA = [
    pytest.param(_nested(5000), f"nests deeper than {MAX_DEPTH} levels", id="nested-5000"),
    pytest.param(b"9" * 5000, "longer than 1000 characters", id="integer-5000-digits"),
    pytest.param(b'"\\ud800"', "lone surrogate", id="lone-surrogate"),
    pytest.param(b'{"k\\udc00": 1}', "lone surrogate", id="lone-surrogate-key"),
    pytest.param(b"NaN", "NaN is not a JSON number", id="nan"),
    pytest.param(b"Infinity", "Infinity is not a JSON number", id="infinity"),
    pytest.param(b"-Infinity", "-Infinity is not a JSON number", id="minus-infinity"),
    pytest.param(b"1e400", "out of range", id="1e400"),
    pytest.param(b"[1, -1e400, 123456789012345678901234567890]", "out of range", id="1e400-long-integer"),
]


@pytest.mark.parametrize(("data", "reason"), BAD_DATA)
def test_v3_records_refuse_data_it_cannot_store_with_42206(rest_stack: RestStack, topic: str, data: bytes,
                                                         reason: str) -> None:
    path = _records(rest_stack, topic)
    status, code, message = _error(rest_stack.request("POST", path, raw=_record(data)))
    assert (status, code) == (422, 42206) and reason in message, message
    # Streamed: that record's report says why, and the stream goes on to the next record.
    good = b'{"value": {"type": "STRING", "data": "after"}}'
    streamed = _stream(rest_stack, path, [_record(data)[:7], _record(data)[7:] + good])
    assert streamed.status == 200, streamed.body[:300]
    reports = [json.loads(line) for line in streamed.body.splitlines()]
    assert [r["error_code"] for r in reports] == [42206, 200] and reason in reports[0]["message"], reports


@pytest.mark.parametrize(("data", "reason"), BAD_DATA)
def test_batch_and_v2_refuse_the_body_that_holds_it(rest_stack: RestStack, topic: str, data: bytes,
                                                   reason: str) -> None:
    batch = rest_stack.request("POST", _records(rest_stack, topic) + ":batch",
                               raw=b'{"entries": [{"id": "a", "value": {"type": "JSON", "data": ' + data + b"}}]}")
    status, code, message = _error(batch)
    assert (status, code) == (400, 400) and reason in message, message  # a body that is not JSON, as Confluent
    v2 = rest_stack.request("POST", _v2(rest_stack, topic), raw=b'{"records": [{"value": ' + data + b"}]}",
                            headers={"Content-Type": JSON})
    status, code, message = _error(v2)
    assert (status, code) == (422, 42206) and reason in message, message


def test_a_lone_surrogate_in_a_batch_id_is_refused(rest_stack: RestStack, topic: str) -> None:
    answer = rest_stack.request("POST", _records(rest_stack, topic) + ":batch",
                                raw=b'{"entries": [{"id": "\\ud800", "value": null}]}')
    status, code, message = _error(answer)
    assert (status, code) == (400, 400) and "lone surrogate" in message


def test_a_stream_nested_100000_levels_is_answered(rest_stack: RestStack, topic: str) -> None:
    deep = _record(_nested(100_000))
    answer = _stream(rest_stack, _records(rest_stack, topic), [deep[i:i + 65536] for i in range(0, len(deep), 65536)])
    assert answer.status == 200
    [report] = [json.loads(line) for line in answer.body.splitlines()]
    assert report["error_code"] == 42206 and "nests deeper" in report["message"]


def test_the_deepest_record_allowed_is_written_on_every_path(rest_stack: RestStack, topic: str) -> None:
    """At the bound, through the standard library's parse and writer too (a long integer sends it there)."""
    data = _nested(MAX_DEPTH, b"123456789012345678901234567890")
    path = _records(rest_stack, topic)
    single = rest_stack.request("POST", path, raw=_record(data))
    assert single.status == 200 and single.json()["error_code"] == 200, single.body[:300]
    streamed = _stream(rest_stack, path, [_record(data)])
    assert streamed.status == 200 and json.loads(streamed.body)["error_code"] == 200, streamed.body[:300]
    batch = rest_stack.request("POST", path + ":batch",  # the batch's own two levels leave two fewer for the data
                               raw=b'{"entries": [{"id": "a", "value": {"type": "JSON", "data": '
                               + data[2:-2] + b"}}]}")
    assert batch.status == 207 and len(batch.json()["successes"]) == 1, batch.body[:300]
    v2 = rest_stack.request("POST", _v2(rest_stack, topic), raw=b'{"records": [{"value": ' + data[1:-1] + b"}]}",
                            headers={"Content-Type": JSON})
    assert v2.status == 200 and v2.json()["offsets"][0]["error_code"] is None, v2.body[:300]


@pytest.mark.parametrize("stamp", ["0001-01-01T00:00:00Z", "1969-12-31T23:59:59.999Z", "0001-01-01T00:30:00+01:00",
                                   "1900-06-01T12:00:00"])
def test_timestamps_before_the_epoch_are_refused(rest_stack: RestStack, topic: str, stamp: str) -> None:
    path = _records(rest_stack, topic)
    status, code, message = _error(rest_stack.request("POST", path, {"value": None, "timestamp": stamp}))
    assert (status, code) == (422, 42206) and "before 1970" in message, message
    batch = rest_stack.request("POST", path + ":batch", {"entries": [{"id": "a", "value": None, "timestamp": stamp}]})
    assert batch.status == 207 and [f["error_code"] for f in batch.json()["failures"]] == [42206]


def test_the_edges_of_time_kafka_can_hold_are_written(rest_stack: RestStack, topic: str) -> None:
    path = _records(rest_stack, topic)
    for stamp, reported in (("1970-01-01T00:00:00Z", "1970-01-01T00:00:00.000Z"),
                            ("9999-12-31T23:59:59.999Z", "9999-12-31T23:59:59.999Z")):
        answer = rest_stack.request("POST", path, {"partition_id": 0, "value": None, "timestamp": stamp})
        assert answer.status == 200 and answer.json()["timestamp"] == reported, answer.body[:300]


@pytest.mark.parametrize("count", [-1, 0, 100_001, 2**31, 10**30])
def test_partition_counts_beyond_the_clusters_limit_are_refused(rest_stack: RestStack, topic: str,
                                                                count: int) -> None:
    base = f"/kafka/v3/clusters/{rest_stack.cluster_id}"
    created = rest_stack.request("POST", f"{base}/topics",
                                 {"topic_name": f"pc-{uuid.uuid4().hex[:8]}", "partitions_count": count})
    status, code, message = _error(created)
    assert (status, code) == (400, 40002) and "partitions_count must be between 1 and" in message, message
    grown = rest_stack.request("PATCH", f"{base}/topics/{topic}", {"partitions_count": count})
    status, code, message = _error(grown)
    assert (status, code) == (400, 40002) and "partition limit" in message, message
    assert len(rest_stack.request("GET", f"{base}/topics/{topic}/partitions").json()["data"]) == PARTITIONS


def test_replication_factor_beyond_the_brokers_and_json_the_parser_refuses(rest_stack: RestStack) -> None:
    base = f"/kafka/v3/clusters/{rest_stack.cluster_id}"
    refused = rest_stack.request("POST", f"{base}/topics", {"topic_name": f"rf-{uuid.uuid4().hex[:8]}",
                                                            "replication_factor": 10**6})
    assert _error(refused)[:2] == (400, 40002)
    for raw in (b'{"topic_name": ' + _nested(5000, b'"x"') + b"}", b'{"topic_name": "a", "partitions_count": NaN}',
                b'{"topic_name": "\\ud800"}'):
        assert _error(rest_stack.request("POST", f"{base}/topics", raw=raw))[:2] == (400, 400)


# ---------------------------------------------------------------- generated bodies: 4xx or 2xx, always answered

_text = st.text(st.characters(exclude_categories=()), max_size=8)  # surrogates included
_scalars = (st.none() | st.booleans() | st.integers(-(10**25), 10**25) | st.floats() | _text
            | st.sampled_from([2**64, -(2**63) - 1, 0.1, 1e308, -0.0]))
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
                       max_leaves=8)
_types = st.sampled_from(["BINARY", "JSON", "STRING", "binary", "AVRO", "", None, 3])
_specs = st.none() | _values | st.fixed_dictionaries({}, optional={
    "type": _types, "data": _values | st.sampled_from(["YWJj", "YQ==", "!!", ""]), "schema_id": st.just(1)})
_bodies = st.fixed_dictionaries({}, optional={
    "partition_id": st.none() | st.integers(-2, PARTITIONS + 1) | st.integers(2**31, 2**70) | _scalars,
    "key": _specs, "value": _specs,
    "headers": st.none() | st.lists(st.fixed_dictionaries({}, optional={"name": _text, "value": _values}),
                                    max_size=2) | _values,
    "timestamp": st.none() | st.sampled_from(["2024-01-02T03:04:05Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59",
                                              "1969-12-31T23:59:59+00:00", "yesterday", "2024-13-01"]) | _values,
    "id": _text | _scalars})


def _encode(value: Any, ascii_only: bool) -> bytes:
    return json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


@st.composite
def _documents(draw: st.DrawFn, wrap: str) -> bytes:
    """A body for one endpoint: a JSON document (NaN, Infinity and surrogates included), perhaps deeply nested,
    perhaps damaged; or arbitrary bytes."""
    kind = draw(st.sampled_from(["json", "json", "json", "nested", "damaged", "bytes"]))
    if kind == "bytes":
        return draw(st.binary(max_size=64))
    records = draw(st.lists(_bodies | _values, min_size=1, max_size=3))
    if wrap == "batch":
        document: Any = {"entries": records} if draw(st.booleans()) else draw(_values)
    elif wrap == "v2":
        document = {"records": records} if draw(st.booleans()) else draw(_values)
    else:
        document = records
    ascii_only = draw(st.booleans())
    data = (b"".join(_encode(r, ascii_only) for r in document) if wrap == "records"
            else _encode(document, ascii_only))
    if kind == "nested":
        depth = draw(st.sampled_from([MAX_DEPTH - 4, MAX_DEPTH - 1, MAX_DEPTH + 1, 1100, 5000]))
        deep = b"[" * depth + data + b"]" * depth
        data = {"records": _record(deep), "batch": b'{"entries": [{"id": "a", "value": {"type": "JSON", "data": '
                + deep + b"}}]}", "v2": b'{"records": [{"value": ' + deep + b"}]}"}[wrap]
    elif kind == "damaged":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(max_size=4) | st.sampled_from(
            [b"", b'"', b"\\", b"}", b"]", b"{", b"\\ud800", b"NaN", b"1e999", b"9" * 4400])) + data[at + 1:]
    return data


def _check(answer: Answer, what: str) -> None:
    """The rule: a 2xx, or a 4xx with Confluent's error body; never a 5xx."""
    assert answer.status < 500, (what, answer.status, answer.body[:300])
    if answer.status >= 400:
        _error(answer)
    else:
        assert answer.body, what


def _check_stream(answer: Answer) -> None:
    """As ``_check``, but a 200 streams one report per record: none for a stream that held no record."""
    assert answer.status < 500, ("stream", answer.status, answer.body[:300])
    if answer.status >= 400:
        _error(answer)
    else:
        for line in answer.body.splitlines():
            report = json.loads(line)
            assert isinstance(report["error_code"], int) and http_status(report["error_code"]) < 500, report


_FUZZ = settings(max_examples=120, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@_FUZZ
@given(body=_documents("records"), cuts=st.lists(st.integers(0, 1 << 16), max_size=4))
def test_generated_v3_records_bodies_are_answered_within_the_rule(rest_stack: RestStack, topic: str, body: bytes,
                                                                   cuts: list[int]) -> None:
    path = _records(rest_stack, topic)
    _check(rest_stack.request("POST", path, raw=body), "records")
    points = sorted(c % (len(body) + 1) for c in cuts)
    _check_stream(_stream(rest_stack, path, [body[a:b] for a, b in zip([0, *points], [*points, len(body)],
                                                                         strict=True)]))


@_FUZZ
@given(body=_documents("batch"))
def test_generated_batch_bodies_are_answered_within_the_rule(rest_stack: RestStack, topic: str, body: bytes) -> None:
    _check(rest_stack.request("POST", _records(rest_stack, topic) + ":batch", raw=body), "batch")


@_FUZZ
@given(body=_documents("v2"), binary=st.booleans())
def test_generated_v2_bodies_are_answered_within_the_rule(rest_stack: RestStack, topic: str, body: bytes,
                                                          binary: bool) -> None:
    answer = rest_stack.request("POST", _v2(rest_stack, topic), raw=body,
                                headers={"Content-Type": BINARY if binary else JSON})
    _check(answer, "v2")
    if answer.status == 200:
        assert all(o["error_code"] is None or http_status(o["error_code"]) < 500 for o in answer.json()["offsets"]), \
            answer.body
