"""Remote reads give the bytes a local read gives, whatever the offset and size, through chunks and read-ahead
(a real S3-compatible server: the session's s3rver)."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from dataplane.protocol.records import Record, decode_batches
from dataplane.storage.config import LogConfig
from dataplane.storage.log import Log
from dataplane.storage.remote.reader import ReaderSettings, RemoteLogReader, SegmentObjects
from dataplane.storage.remote.store import S3ObjectStore, S3Settings
from sluice.objectstore import ObjectStoreServer
from tests.dataplane.conftest import make_batch

OpenLog = Callable[..., Log]


def test_remote_reads_equal_local_reads(open_log: OpenLog, object_store: ObjectStoreServer) -> None:
    log = open_log(LogConfig(segment_bytes=1 << 20, index_interval_bytes=512))
    for i in range(200):
        log.append_as_leader(make_batch(1 + i % 7, value_size=20 + i % 90, ts=1_700_000_000_000 + 10 * i), 0)
    log.roll()
    store = S3ObjectStore(S3Settings(object_store.endpoint, object_store.bucket, object_store.region,
                                     object_store.access_key, object_store.secret_key))
    prefix = f"reader-{uuid.uuid4().hex}/"
    data = (log.dir / f"{0:020d}.log").read_bytes()
    store.put_bytes(prefix + "s.log", data)
    store.put_bytes(prefix + "s.index", (log.dir / f"{0:020d}.index").read_bytes())
    store.put_bytes(prefix + "s.txnindex", b"")
    store.put_bytes(prefix + "s.timeindex", (log.dir / f"{0:020d}.timeindex").read_bytes())
    assert len(log.segment_base_offsets) == 2  # one sealed segment holds everything
    end = log.log_end_offset - 1
    seg = SegmentObjects(prefix + "s.log", prefix + "s.index", prefix + "s.txnindex", prefix + "s.timeindex", 0, end,
                         len(data))
    reader = RemoteLogReader(store, ReaderSettings(chunk_bytes=4096, read_ahead_chunks=2, cache_bytes=16384))
    try:
        for offset in range(0, end + 1, 37):
            for max_bytes in (1, 700, 5000, 1 << 20):
                local = log.read(offset, max_bytes).read_bytes()
                remote, next_offset = reader.read(seg, offset, max_bytes, end + 1)
                assert remote == local, (offset, max_bytes)
                assert next_offset > offset
        # Below an upper bound: nothing at or past it is returned.
        remote, _ = reader.read(seg, 0, 1 << 20, 10)
        assert remote == log.read(0, 1 << 20, 10).read_bytes()
        # By time: the same record a local lookup finds, from any lower bound; None past the last.
        for ts in range(1_700_000_000_000 - 5, 1_700_000_000_000 + 2_010, 23):
            for min_offset in (0, 101, 400):
                local_found = log.offset_for_timestamp(ts)
                expected = None if local_found is None else (local_found.timestamp, local_found.offset)
                if min_offset:
                    hits = [(t, o) for t, o in ((r.timestamp, r.offset) for r in _records(log))
                            if t >= ts and o >= min_offset]
                    expected = hits[0] if hits else None
                assert reader.offset_for_timestamp(seg, ts, min_offset) == expected, (ts, min_offset)
    finally:
        reader.close()


def _records(log: Log) -> list[Record]:
    return [r for b in decode_batches(log.read(0, 1 << 30).read_bytes()) for r in b.records]
