from __future__ import annotations

import itertools
from collections.abc import Callable

from dataplane.protocol.records import Compression, Record, build_batch
from dataplane.storage.config import LogConfig
from dataplane.storage.log import Log
from tests.dataplane.conftest import Clock

OpenLog = Callable[..., Log]
_SEQUENCES = itertools.count()  # one idempotent producer's sequences: each batch follows the last


def kv_batch(
    pairs: list[tuple[bytes, bytes | None]], ts: int, codec: Compression = Compression.NONE
) -> bytes:
    recs = [Record(i, ts + i, k, v) for i, (k, v) in enumerate(pairs)]
    first = next(_SEQUENCES)
    for _ in pairs[1:]:
        next(_SEQUENCES)
    return build_batch(recs, compression=codec, producer_id=42, producer_epoch=3, base_sequence=first)


def test_compaction_keeps_latest_per_key_with_offsets(open_log: OpenLog, clock: Clock) -> None:
    cfg = LogConfig(cleanup_policy="compact", segment_bytes=600, delete_retention_ms=10**12)
    log = open_log(cfg)
    expected: dict[bytes, tuple[int, bytes | None]] = {}
    codecs = list(Compression)
    for i in range(30):
        pairs = [(b"key%d" % ((i * 3 + j) % 7), b"v%d-%d" % (i, j)) for j in range(3)]
        info = log.append_as_leader(kv_batch(pairs, clock.now, codecs[i % 5]), leader_epoch=0)
        for j, (k, v) in enumerate(pairs):
            expected[k] = (info.first_offset + j, v)
    active_base = log.segment_base_offsets[-1]
    before_active = [r for r in log.read_records(active_base)]
    leo = log.log_end_offset
    result = log.compact()
    assert result is not None and result.bytes_after < result.bytes_before
    recs = list(log.read_records(0))
    sealed = [r for r in recs if r.offset < active_base]
    # every sealed record is the newest for its key among all records below the active base
    latest_below: dict[bytes, int] = {}
    for k, (off, _) in expected.items():
        latest_below[k] = off
    for r in sealed:
        assert r.key is not None
        assert all(not (o > r.offset and o < active_base and k == r.key) for k, (o, _) in expected.items())
    assert [r for r in recs if r.offset >= active_base] == before_active
    assert log.log_end_offset == leo
    offsets = [r.offset for r in recs]
    assert offsets == sorted(offsets)
    for b in log.read_batches(0):
        assert (b.header.producer_id, b.header.producer_epoch) == (42, 3)
    # reading any offset (including compacted-away ones) returns the next surviving batch
    for off in range(leo):
        region = log.read(off, 1)
        assert region.length > 0 or off >= leo
    # idempotent: nothing more to clean
    assert log.compact() is None
    log.close()
    log2 = open_log(cfg)
    assert list(log2.read_records(0)) == recs


def test_tombstones_dropped_after_delete_retention(open_log: OpenLog, clock: Clock) -> None:
    cfg = LogConfig(cleanup_policy="compact", segment_bytes=200, delete_retention_ms=1000)
    log = open_log(cfg)
    log.append_as_leader(kv_batch([(b"a", b"1"), (b"b", b"1")], clock.now), leader_epoch=0)
    log.append_as_leader(kv_batch([(b"a", None)], clock.now), leader_epoch=0)
    log.roll()
    log.append_as_leader(kv_batch([(b"c", b"1")], clock.now), leader_epoch=0)
    log.compact()
    got = [(r.key, r.value) for r in log.read_records(0)]
    assert got == [(b"b", b"1"), (b"a", None), (b"c", b"1")]
    clock.advance(5000)
    log.append_as_leader(kv_batch([(b"d", b"1")], clock.now), leader_epoch=0)
    log.roll()
    # the dirty section is empty, so force a pass by appending a new dirty segment
    log.append_as_leader(kv_batch([(b"e", b"1")], clock.now), leader_epoch=0)
    log.roll()
    log.compact()
    got = [(r.key, r.value) for r in log.read_records(0)]
    assert (b"a", None) not in got and (b"b", b"1") in got


def test_delete_policy_log_is_not_compacted(open_log: OpenLog, clock: Clock) -> None:
    log = open_log(LogConfig(segment_bytes=200))
    for _ in range(5):
        log.append_as_leader(kv_batch([(b"a", b"1")], clock.now), leader_epoch=0)
    assert log.compact() is None


def test_compacted_topic_rejects_null_keys(open_log: OpenLog, clock: Clock) -> None:
    from dataplane.protocol.errors import ErrorCode, InvalidRecordError

    log = open_log(LogConfig(cleanup_policy="compact"))
    recs = [Record(0, clock.now, b"k", b"v"), Record(1, clock.now, None, b"v")]
    try:
        log.append_as_leader(build_batch(recs, compression=Compression.SNAPPY), leader_epoch=0)
    except InvalidRecordError as exc:
        assert exc.code == ErrorCode.INVALID_RECORD
    else:
        raise AssertionError("null key accepted by a compacted topic")
    assert log.log_end_offset == 0
    log.append_as_leader(kv_batch([(b"a", b"1")], clock.now), leader_epoch=0)
    assert log.log_end_offset == 1


def test_bounded_key_map_cleans_in_several_passes(open_log: OpenLog, clock: Clock) -> None:
    log = open_log(LogConfig(cleanup_policy="compact", segment_bytes=120, delete_retention_ms=10**13))
    for rnd in range(3):
        for k in range(6):
            log.append_as_leader(kv_batch([(b"key%d" % k, b"v%d" % rnd)], clock.now), leader_epoch=0)
    log.roll()
    active_base = log.segment_base_offsets[-1]
    passes = 0
    while log.compact(max_map_keys=2) is not None:
        passes += 1
        assert passes < 50
    assert passes > 1
    survivors = {r.key: r.value for r in log.read_records(0)}
    assert survivors == {b"key%d" % k: b"v2" for k in range(6)}
    assert sum(1 for _ in log.read_records(0)) == 6
    assert log.segment_base_offsets[-1] == active_base
