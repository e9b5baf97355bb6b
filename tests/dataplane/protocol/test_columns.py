"""The compiled Fetch decoder (``_columns``) against the pure-Python reference (``records.decode_batch``).

Generated batches cover null and present keys/values, headers, both timestamp types, every codec, control
batches, offset gaps (compaction) and a truncated tail; random and cut bytes must raise a clear error, never
crash the interpreter.
"""

from __future__ import annotations

import contextlib
import struct
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataplane.client.spark.columns import to_record_batch
from dataplane.protocol import _columns  # built by the install (setup.py); its absence is a failure
from dataplane.protocol.errors import KafkaError
from dataplane.protocol.records import (
    CONTROL_MASK,
    Compression,
    Record,
    RecordHeader,
    TimestampType,
    build_batch,
    decode_batch,
    iter_batch_headers,
)

decode_columns = _columns.decode_columns

blobs = st.none() | st.binary(max_size=40)
headers = st.lists(st.builds(RecordHeader, st.text(max_size=8), blobs), max_size=3).map(tuple)


@st.composite
def batches(draw: Any, base: int) -> tuple[bytes, int]:
    """One batch at ``base`` (its bytes, the next free offset): gaps between records, any codec and type."""
    n = draw(st.integers(1, 8))
    offsets, at = [], base
    for _ in range(n):
        at += draw(st.integers(0, 3)) if offsets else 0
        offsets.append(at)
        at += 1
    ts0 = draw(st.integers(0, 2**40))
    records = [Record(o, ts0 + draw(st.integers(-1000, 1000)), draw(blobs), draw(blobs), draw(headers))
               for o in offsets]
    tail_gap = draw(st.integers(0, 2))  # compaction keeps a batch's last offset delta
    kind = draw(st.sampled_from([TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME]))
    control = draw(st.integers(0, 9)) == 0
    data = build_batch(records, base_offset=base, compression=draw(st.sampled_from(list(Compression))),
                       timestamp_type=kind, last_offset_delta=offsets[-1] - base + tail_gap, is_control=control,
                       max_timestamp=ts0 + 5000 if kind == TimestampType.LOG_APPEND_TIME else None,
                       is_transactional=control, producer_id=7 if control else -1)
    return data, offsets[-1] + tail_gap + 1


@st.composite
def fetches(draw: Any) -> bytes:
    """Concatenated batches as a Fetch response carries them, maybe cut inside the last one."""
    out, at = b"", draw(st.integers(0, 1000))
    for _ in range(draw(st.integers(1, 4))):
        data, at = draw(batches(at))
        out += data
    if out and draw(st.booleans()):
        out += draw(batches(at))[0][: draw(st.integers(0, 70))]
    return out


def reference(records: bytes, start: int, end: int) -> list[dict[str, Any]]:
    """The same rows through ``decode_batch``: whole batches only, control batches skipped, range applied."""
    rows = []
    for pos, header in iter_batch_headers(records, allow_partial_tail=True):
        if header.attributes & CONTROL_MASK:
            continue
        kind = int(header.timestamp_type)
        for r in decode_batch(records, pos, verify_crc=False).records:
            if start <= r.offset < end:
                rows.append({"key": r.key, "value": r.value, "offset": r.offset, "timestamp": r.timestamp * 1000,
                             "timestampType": kind,
                             "headers": [{"key": h.key, "value": h.value} for h in r.headers] or None})
    return rows


def compiled(records: bytes, start: int, end: int) -> list[dict[str, Any]]:
    found = decode_columns(records, start, end, include_headers=True)
    rows = to_record_batch(found, "t", 0, include_headers=True).to_pylist()
    for row in rows:
        del row["topic"], row["partition"]
        row["timestamp"] = int(pa.scalar(row["timestamp"], pa.timestamp("us", tz="UTC")).value)
    return rows


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(fetches(), st.integers(-5, 40), st.integers(0, 60))
def test_compiled_decoder_equals_the_reference(records: bytes, skip: int, width: int) -> None:
    start = max(0, (struct.unpack_from(">q", records)[0] if records else 0) + skip)  # near the first batch
    end = start + width
    assert compiled(records, start, end) == reference(records, start, end)


@settings(max_examples=100)
@given(fetches())
def test_next_offset_passes_every_whole_batch(records: bytes) -> None:
    found = decode_columns(records, 0, 2**62)
    whole = list(iter_batch_headers(records, allow_partial_tail=True))
    assert found.next_offset == (whole[-1][1].next_offset if whole else 0)
    assert not found.done


def test_the_range_end_stops_at_the_batch_that_reaches_it() -> None:
    first = build_batch([Record(o, 1, b"k", b"v") for o in range(0, 5)])
    second = build_batch([Record(o, 1, b"k", b"v") for o in range(5, 10)])
    found = decode_columns(first + second, 2, 4)
    assert (found.count, found.next_offset, found.done) == (2, 5, True)
    assert decode_columns(first + second, 0, 10).done


def test_timestamps_in_milliseconds_when_asked() -> None:
    found = decode_columns(build_batch([Record(0, 1234, None, b"v")]), 0, 1, micros=False)
    assert struct.unpack("<q", found.timestamps) == (1234,)


def test_aborted_transactions_are_skipped_until_their_marker() -> None:
    """read_committed: a transactional batch of an aborted producer is dropped, as Kafka's consumer does."""
    def tx(base: int, pid: int) -> bytes:
        return build_batch([Record(base, 1, None, b"%d" % base)], is_transactional=True, producer_id=pid)

    abort = build_batch([Record(2, 1, struct.pack(">hh", 0, 0), b"")], is_transactional=True, is_control=True,
                        producer_id=5)
    data = tx(0, 5) + tx(1, 6) + abort + tx(3, 5)
    found = decode_columns(data, 0, 10, aborted=[(5, 0)])
    assert struct.unpack(f"<{found.count}q", found.offsets) == (1, 3)
    assert decode_columns(data, 0, 10).count == 3  # read_uncommitted: everything but the marker


@pytest.mark.parametrize("codec", list(Compression))
def test_truncated_batches_are_ignored_or_refused_never_read_past(codec: Compression) -> None:
    data = build_batch([Record(o, 1, b"key", b"v" * 50, (RecordHeader("h", b"x"),)) for o in range(20)],
                       compression=codec)
    for cut in range(len(data)):
        assert decode_columns(data[:cut], 0, 100).count == 0  # a cut last batch is not there yet
    # The batch frame is whole but its records are cut: the batch length lies, which is an error.
    for cut in range(61, len(data)):
        lying = bytearray(data[:cut])
        lying[8:12] = struct.pack(">i", cut - 12)
        with pytest.raises(KafkaError):
            decode_columns(bytes(lying), 0, 100)


@settings(max_examples=500)
@given(st.binary(max_size=300))
def test_random_bytes_raise_a_kafka_error_or_decode(data: bytes) -> None:
    with contextlib.suppress(KafkaError):
        decode_columns(data, 0, 2**62, include_headers=True)


@settings(max_examples=300)
@given(fetches(), st.data())
def test_corrupted_batches_raise_a_kafka_error_or_decode(records: bytes, data: st.DataObject) -> None:
    if not records:
        return
    spoiled = bytearray(records)
    for _ in range(data.draw(st.integers(1, 4))):
        spoiled[data.draw(st.integers(0, len(spoiled) - 1))] = data.draw(st.integers(0, 255))
    with contextlib.suppress(KafkaError):
        decode_columns(bytes(spoiled), 0, 2**62, include_headers=True)


def test_no_records_and_none() -> None:
    assert decode_columns(None, 5, 10).count == 0
    assert decode_columns(b"", 5, 10).next_offset == 5
