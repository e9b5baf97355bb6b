"""The compiled produce encoder (``_encode``) against the pure-Python reference (``records.build_batch``).

Generated records (null, empty and present keys and values, headers with null values, timestamps going
backwards and up to 2**41) must decode back unchanged and be byte-for-byte what ``build_batch`` writes;
``murmur2`` must give the Java client's values; bad input must raise TypeError/ValueError, never crash.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataplane.protocol import _encode  # built by the install (setup.py); its absence is a failure
from dataplane.protocol.records import Record, RecordHeader, build_batch, decode_batch

blobs = st.none() | st.just(b"") | st.binary(min_size=1, max_size=300)
headers = st.none() | st.lists(st.tuples(st.text(max_size=8), blobs), max_size=3)
timestamps = st.integers(0, 2**41) | st.integers(-1, 1000)
records = st.lists(st.tuples(blobs, blobs, headers, timestamps), min_size=1, max_size=20)
producer = st.tuples(st.integers(-1, 2**63 - 1), st.integers(-1, 2**15 - 1), st.integers(-1, 2**31 - 1))


@given(records, producer)
def test_encode_batch_decodes_back_and_matches_build_batch(recs: list[Any], prod: tuple[int, int, int]) -> None:
    pid, epoch, seq = prod
    data = _encode.encode_batch(recs, pid, epoch, seq)

    batch = decode_batch(data)  # verifies the CRC
    h = batch.header
    assert (h.base_offset, h.partition_leader_epoch, h.magic, h.attributes) == (0, -1, 2, 0)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (pid, epoch, seq)
    assert (h.record_count, h.last_offset_delta) == (len(recs), len(recs) - 1)
    assert (h.base_timestamp, h.max_timestamp) == (recs[0][3], max(r[3] for r in recs))
    assert [r.offset for r in batch.records] == list(range(len(recs)))
    assert [(r.key, r.value, r.timestamp) for r in batch.records] == [(k, v, ts) for k, v, _, ts in recs]
    assert [[(x.key, x.value) for x in r.headers] for r in batch.records] == [hs or [] for _, _, hs, _ in recs]

    expected = [Record(i, ts, k, v, tuple(RecordHeader(n, hv) for n, hv in hs or ()))
                for i, (k, v, hs, ts) in enumerate(recs)]
    assert data == build_batch(expected, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def test_encode_batch_header_tuple_and_negative_timestamp_delta() -> None:
    data = _encode.encode_batch([(b"k", b"v", (("n", b"x"),), 2**41), (None, b"w", None, 5)], -1, -1, -1)
    first, second = decode_batch(data).records
    assert first.headers == (RecordHeader("n", b"x"),) and second.timestamp == 5
    assert decode_batch(data).header.max_timestamp == 2**41


# Kafka's UtilsTest.testMurmur2: the Java client's Utils.murmur2 of these bytes.
@pytest.mark.parametrize(("key", "expected"), [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
])
def test_murmur2_matches_java(key: bytes, expected: int) -> None:
    assert _encode.murmur2(key) == expected


def test_partition_for_key() -> None:
    assert _encode.partition_for_key(b"foobar", 10) == (-790332482 & 0x7FFFFFFF) % 10
    assert _encode.partition_for_key(b"", 1) == 0
    assert all(0 <= _encode.partition_for_key(bytes([i]), 7) < 7 for i in range(256))


@pytest.mark.parametrize(("args", "error"), [
    ((b"k", 0), ValueError),
    ((b"k", -3), ValueError),
    ((b"k", 2**40), ValueError),
    ((b"k", "3"), TypeError),
    ((None, 3), TypeError),
    (("k", 3), TypeError),
    ((bytearray(b"k"), 3), TypeError),
])
def test_partition_for_key_bad_input(args: tuple[Any, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        _encode.partition_for_key(*args)


@pytest.mark.parametrize("key", [None, "abc", bytearray(b"abc"), memoryview(b"abc"), 5])
def test_murmur2_bad_input(key: Any) -> None:
    with pytest.raises(TypeError):
        _encode.murmur2(key)


OK = (b"k", b"v", None, 0)


@pytest.mark.parametrize(("records", "producer", "error"), [
    ([], (1, 1, 1), ValueError),  # empty
    (None, (1, 1, 1), TypeError),
    ((OK,), (1, 1, 1), TypeError),  # a tuple of records, not a list
    ([OK, [b"k", b"v", None, 0]], (1, 1, 1), TypeError),  # a record that is not a tuple
    ([(b"k", b"v", None)], (1, 1, 1), ValueError),  # wrong length
    ([(b"k", b"v", None, 0, 0)], (1, 1, 1), ValueError),
    ([(1, b"v", None, 0)], (1, 1, 1), TypeError),  # non-bytes key
    ([("k", b"v", None, 0)], (1, 1, 1), TypeError),
    ([(bytearray(b"k"), b"v", None, 0)], (1, 1, 1), TypeError),
    ([(b"k", memoryview(b"v"), None, 0)], (1, 1, 1), TypeError),
    ([(b"k", b"v", None, 1.5)], (1, 1, 1), TypeError),  # timestamps
    ([(b"k", b"v", None, None)], (1, 1, 1), TypeError),
    ([(b"k", b"v", None, 2**63)], (1, 1, 1), ValueError),
    ([(b"k", b"v", None, -(2**63)), (b"k", b"v", None, 2**63 - 1)], (1, 1, 1), ValueError),  # delta overflow
    ([(b"k", b"v", {"a": b"b"}, 0)], (1, 1, 1), TypeError),  # headers
    ([(b"k", b"v", [("a",)], 0)], (1, 1, 1), ValueError),
    ([(b"k", b"v", [["a", b"b"]], 0)], (1, 1, 1), TypeError),
    ([(b"k", b"v", [(b"a", b"b")], 0)], (1, 1, 1), TypeError),
    ([(b"k", b"v", [("a", "b")], 0)], (1, 1, 1), TypeError),
    ([(b"k", b"v", [("\ud800", b"b")], 0)], (1, 1, 1), ValueError),  # not UTF-8 encodable
    ([OK], ("1", 1, 1), TypeError),  # producer fields
    ([OK], (2**63, 1, 1), ValueError),
    ([OK], (1, 2**15, 1), ValueError),
    ([OK], (1, 1, 2**31), ValueError),
])
def test_encode_batch_bad_input(records: Any, producer: tuple[Any, Any, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        _encode.encode_batch(records, *producer)
