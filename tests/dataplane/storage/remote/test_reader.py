"""Remote reads give the bytes a local read gives, whatever the offset and size, through chunks and read-ahead
(a real S3-compatible server: the session's s3rver)."""

from __future__ import annotations

import uuid
from collections.abc import Callable

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
        log.append_as_leader(make_batch(1 + i % 7, value_size=20 + i % 90), 0)
    log.roll()
    store = S3ObjectStore(S3Settings(object_store.endpoint, object_store.bucket, object_store.region,
                                     object_store.access_key, object_store.secret_key))
    prefix = f"reader-{uuid.uuid4().hex}/"
    data = (log.dir / f"{0:020d}.log").read_bytes()
    store.put_bytes(prefix + "s.log", data)
    store.put_bytes(prefix + "s.index", (log.dir / f"{0:020d}.index").read_bytes())
    store.put_bytes(prefix + "s.txnindex", b"")
    assert len(log.segment_base_offsets) == 2  # one sealed segment holds everything
    end = log.log_end_offset - 1
    seg = SegmentObjects(prefix + "s.log", prefix + "s.index", prefix + "s.txnindex", 0, end, len(data))
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
    finally:
        reader.close()
