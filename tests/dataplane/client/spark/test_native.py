"""The native fetch engine (own client, compiled decoder) against the librdkafka engine, on a real broker."""

from __future__ import annotations

from typing import Any

import pytest

from dataplane.client.spark.fetch import fetch_range, native_engine
from dataplane.client.spark.options import DataLossError, SparkSourceError, parse_source_options
from dataplane.client.spark.plan import OffsetRange
from tests.dataplane.client.spark.conftest import produce
from tests.dataplane.client.spark.test_read import _delete

pytestmark = pytest.mark.xdist_group("spark")


def test_the_native_engine_is_here() -> None:
    """The install builds the compiled decoder; without it every read here would silently be librdkafka's."""
    assert native_engine({"bootstrap.servers": "x:1"}) is not None


def _read(kafka: str, r: OffsetRange, engine: str, **kw: Any) -> list[dict[str, Any]]:
    return [row for b in fetch_range({"bootstrap.servers": kafka}, r, engine=engine, **kw) for row in b.to_pylist()]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_both_engines_give_the_same_rows(kafka: str, new_topic: Any, codec: str) -> None:
    topic = new_topic(1)
    records = [(0, None if i % 7 == 0 else b"k%d" % i, None if i % 11 == 0 else b"v" * (i % 40)) for i in range(400)]
    headers = [[("h", b"%d" % i), ("n", None)] if i % 4 == 0 else [] for i in range(400)]
    produce(kafka, topic, records, headers=headers, **{"compression.type": codec, "batch.num.messages": 33})
    for r in (OffsetRange(topic, 0, 0, 400), OffsetRange(topic, 0, 17, 250)):  # starts and ends inside batches
        native = _read(kafka, r, "native", include_headers=True)
        assert native == _read(kafka, r, "librdkafka", include_headers=True)
        assert [row["offset"] for row in native] == list(range(r.start, r.end))


def test_one_arrow_batch_per_fetch_of_many_records(kafka: str, new_topic: Any) -> None:
    topic = new_topic(1)
    produce(kafka, topic, [(0, b"k", b"v" * 100) for _ in range(3000)], **{"linger.ms": 50})
    batches = list(fetch_range({"bootstrap.servers": kafka}, OffsetRange(topic, 0, 0, 3000)))
    assert sum(b.num_rows for b in batches) == 3000 and len(batches) < 10


def test_errors_read_as_the_librdkafka_engines(kafka: str, new_topic: Any) -> None:
    with pytest.raises(SparkSourceError, match="unknown topic or partition no-such-topic-0"):
        _read(kafka, OffsetRange("no-such-topic", 0, 0, 5), "native", poll_timeout_ms=5000)
    topic = new_topic(1)
    produce(kafka, topic, [(0, None, b"%d" % i) for i in range(50)])
    with pytest.raises(SparkSourceError, match=f"unknown topic or partition {topic}-3"):
        _read(kafka, OffsetRange(topic, 3, 0, 5), "native", poll_timeout_ms=5000)
    _delete(kafka, topic, 20)
    with pytest.raises(DataLossError, match=f"offset 5 of {topic}-0 is no longer available"):
        _read(kafka, OffsetRange(topic, 0, 5, 30), "native")
    assert [row["offset"] for row in _read(kafka, OffsetRange(topic, 0, 5, 30), "native",
                                           fail_on_data_loss=False)] == list(range(20, 30))
    # An end the partition never reached (planned before a truncation): data loss, or a stop without it.
    with pytest.raises(DataLossError, match=f"{topic}-0 ends at 50, before the planned end 60"):
        _read(kafka, OffsetRange(topic, 0, 40, 60), "native")
    assert len(_read(kafka, OffsetRange(topic, 0, 40, 60), "native", fail_on_data_loss=False)) == 10


def test_engine_option_and_fallbacks() -> None:
    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    assert parse_source_options(base, streaming=False).engine == "native"
    assert parse_source_options({**base, "fetch.engine": "librdkafka"}, streaming=False).engine == "librdkafka"
    with pytest.raises(SparkSourceError, match=r"option 'fetch\.engine' must be native or librdkafka"):
        parse_source_options({**base, "fetch.engine": "fast"}, streaming=False)
    # Authentication our client does not speak goes to librdkafka.
    assert native_engine({"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL",
                          "sasl.mechanisms": "GSSAPI"}) is None
    assert native_engine({"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL",
                          "sasl.mechanisms": "SCRAM-SHA-512"}) is not None


def test_a_compacted_topic_reads_alike(kafka: str, new_topic: Any) -> None:
    from tests.dataplane.client.spark.test_read import _compacted

    topic = new_topic(1, **{"cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.99"})
    produce(kafka, topic, [(0, b"k%d" % (i % 10), b"v%03d" % i) for i in range(300)], **{"batch.num.messages": 5})
    seen = _compacted(kafka, topic)
    for r in (OffsetRange(topic, 0, 0, 300), OffsetRange(topic, 0, 28, 200)):
        assert [row["offset"] for row in _read(kafka, r, "native", poll_timeout_ms=3000)] == \
            [s.offset for s in seen if r.start <= s.offset < r.end]
