"""Chain selection, retention and garbage of the remote tier's metadata (pure functions)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataplane.storage.remote.layout import PartitionPath, RemoteSegment, parse_name, parse_topic_dir
from dataplane.storage.remote.metadata import (
    orphans,
    retention_victims,
    select_chain,
    split_listing,
)
from dataplane.storage.remote.store import ObjectInfo


def seg(base: int, end: int, *, epoch: int = 0, at: int = 0, uid: str = "", size: int = 100,
        ts: int = 1_000) -> RemoteSegment:
    return RemoteSegment(base, end, uid or f"{base:08x}{end:08x}{epoch:08x}{at:08x}", ts, end, size, epoch,
                         ((epoch, base),), at)


def test_metadata_round_trips_and_refuses_other_bytes() -> None:
    s = seg(10, 19, epoch=3)
    assert RemoteSegment.from_json(s.to_json()) == s
    for bad in (b"{}", b"[]", b"not json", b'{"version": 9}'):
        with pytest.raises(ValueError):
            RemoteSegment.from_json(bad)
    with pytest.raises(ValueError):
        RemoteSegment(10, 9, "x", -1, -1, 0, 0, (), 0)


def test_keys_parse_back() -> None:
    path = PartitionPath("pre/fix", "c1", "orders", "ab" * 16, 3)
    s = seg(42, 99)
    key = s.metadata_key(path)
    assert key.startswith("pre/fix/c1/orders-" + "ab" * 16 + "/3/")
    name = parse_name(key.rsplit("/", 1)[1])
    assert name is not None and (name.base_offset, name.upload_id, name.kind) == (42, s.upload_id, "json")
    assert parse_topic_dir("my-topic-" + "cd" * 16 + "/") == ("my-topic", "cd" * 16)
    assert parse_topic_dir("no-id") is None


def test_duplicates_and_overlaps_are_read_once() -> None:
    retry = seg(0, 99, at=5)          # a second upload of the same segment (a retry, another leader)
    first = seg(0, 99, at=1)
    wider = seg(0, 149, epoch=1)      # a new leader cut its segments elsewhere
    later = seg(100, 199)             # overlaps the wider one: read from 150 on
    chain, losers = select_chain([later, retry, first, wider])
    assert [(e.segment, e.start) for e in chain.entries] == [(wider, 0), (later, 150)]
    assert set(losers) == {first, retry}
    assert chain.highest_offset == 199 and chain.start_offset == 0
    assert chain.covering(150) == chain.entries[1] and chain.covering(200) is None


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 30), st.integers(0, 3)), min_size=1, max_size=12))
def test_any_set_of_segments_gives_a_chain_that_reads_each_offset_once(raw: list[tuple[int, int, int]]) -> None:
    segments = [seg(base, base + length, epoch=epoch, at=i) for i, (base, length, epoch) in enumerate(raw)]
    chain, losers = select_chain(segments)
    covered: list[int] = []
    for entry in chain.entries:
        covered += range(entry.start, entry.end + 1)
    assert covered == sorted(set(covered))  # never an offset twice
    every = {o for s in segments for o in range(s.base_offset, s.end_offset + 1)}
    assert set(covered) == every  # and nothing a segment holds is left out
    assert len(chain.entries) + len(losers) == len(segments)
    assert select_chain(reversed(segments))[0] == chain  # the same choice whatever the listing order


def test_retention_deletes_oldest_first_and_counts_local_bytes() -> None:
    chain, _ = select_chain([seg(0, 9, ts=100), seg(10, 19, ts=200), seg(20, 29, ts=300)])
    assert retention_victims(chain, log_start=0, now_ms=1_000, retention_ms=-1, retention_bytes=-1,
                             local_only_bytes=0) == []
    by_time = retention_victims(chain, log_start=0, now_ms=1_000, retention_ms=750, retention_bytes=-1,
                                local_only_bytes=0)
    assert [v.end for v in by_time] == [9, 19]
    # 300 remote + 150 local; 250 allowed: the oldest two go (each 100), leaving 100 + 150
    by_size = retention_victims(chain, log_start=0, now_ms=1_000, retention_ms=-1, retention_bytes=250,
                                local_only_bytes=150)
    assert [v.end for v in by_size] == [9, 19]
    by_start = retention_victims(chain, log_start=15, now_ms=1_000, retention_ms=-1, retention_bytes=-1,
                                 local_only_bytes=0)
    assert [v.end for v in by_start] == [9]


def test_orphans_are_data_without_metadata_older_than_the_grace() -> None:
    prefix = "p/"
    listing = split_listing([
        ObjectInfo(f"{prefix}{0:020d}-{'a' * 32}.log", 1, 0),
        ObjectInfo(f"{prefix}{0:020d}-{'a' * 32}.json", 1, 0),
        ObjectInfo(f"{prefix}{0:020d}-{'b' * 32}.log", 1, 0),        # an old upload that never committed
        ObjectInfo(f"{prefix}{0:020d}-{'b' * 32}.index", 1, 0),
        ObjectInfo(f"{prefix}{0:020d}-{'c' * 32}.log", 1, 9_000),    # maybe an upload in flight
        ObjectInfo(f"{prefix}junk", 1, 0),
    ], prefix)
    assert sorted(orphans(listing, 10_000, grace_ms=5_000)) == [f"{prefix}{0:020d}-{'b' * 32}.index",
                                                                f"{prefix}{0:020d}-{'b' * 32}.log"]
