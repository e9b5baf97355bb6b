"""The pure parts of the Spark source: option parsing, offset resolution, range splitting, trigger limits."""

from __future__ import annotations

import itertools

import pytest

from dataplane.client.spark.offsets import resolve
from dataplane.client.spark.options import (
    Assign,
    Bound,
    DataLossError,
    SparkSourceError,
    Subscribe,
    SubscribePattern,
    parse_source_options,
)
from dataplane.client.spark.plan import OffsetRange, limit_ends, offsets_from_json, offsets_to_json, split_ranges
from dataplane.client.spark.produce import check_sink_columns

BOOT = {"kafka.bootstrap.servers": "h:9092"}


def test_options_as_sparks_kafka_source_names_them() -> None:
    o = parse_source_options({**BOOT, "subscribe": "a, b,a", "kafka.client.id": "me", "minPartitions": "4",
                              "includeHeaders": "TRUE", "startingOffsets": '{"a": {"0": 5, "1": -2}}'},
                             streaming=False)
    assert o.selector == Subscribe(("a", "b"))
    assert o.client == {"bootstrap.servers": "h:9092", "client.id": "me"}
    assert o.starting == Bound("offsets", ((("a", 0), 5), (("a", 1), -2))) and o.ending == Bound("latest")
    assert o.min_partitions == 4 and o.include_headers and o.fail_on_data_loss
    assert parse_source_options({"bootstrap.servers": "x", "assign": '{"t": [1, 0]}'}, streaming=True).selector == \
        Assign((("t", 0), ("t", 1)))
    pattern = parse_source_options({**BOOT, "subscribePattern": "ord.*"}, streaming=True)
    assert isinstance(pattern.selector, SubscribePattern) and pattern.selector.matches("orders")
    assert pattern.starting == Bound("latest")  # streaming's default, as Spark
    timed = parse_source_options({**BOOT, "subscribe": "a", "startingTimestamp": "1000", "startingOffsets": "latest",
                                  "startingOffsetsByTimestamp": '{"a": {"0": 7}}'}, streaming=True)
    assert timed.starting == Bound("timestamps", ((("a", 0), 7),))  # by-timestamp JSON wins, then timestamp


@pytest.mark.parametrize(("options", "message"), [
    ({"subscribe": "a"}, "bootstrap.servers"),
    ({**BOOT}, "exactly one of"),
    ({**BOOT, "subscribe": "a", "subscribePattern": "b"}, "got 'subscribe', 'subscribePattern'"),
    ({**BOOT, "assign": "[1]"}, "'assign' must be a JSON object"),
    ({**BOOT, "subscribe": "a", "startingOffsets": '{"a": {"0": "x"}}'}, "a-0 must be an integer"),
    ({**BOOT, "subscribe": "a", "startingOffsets": '{"a": {"0": -3}}'}, "use -2 .earliest."),
    ({**BOOT, "subscribe": "a", "endingOffsets": "earliest"}, "'endingOffsets': earliest"),
    ({**BOOT, "subscribe": "a", "minPartitions": "0"}, "'minPartitions' must be at least 1"),
    ({**BOOT, "subscribe": "a", "failOnDataLoss": "maybe"}, "true or false"),
    ({**BOOT, "subscribe": "a", "kafka.auto.offset.reset": "earliest"}, "use startingOffsets"),
    ({**BOOT, "subscribePattern": "("}, "not a valid regular expression"),
])
def test_bad_options_name_the_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(SparkSourceError, match=message) as caught:
        parse_source_options(options, streaming=False)
    assert "\n" not in str(caught.value)


def test_streaming_refuses_ending_offsets() -> None:
    with pytest.raises(SparkSourceError, match="not valid for streaming"):
        parse_source_options({**BOOT, "subscribe": "a", "endingOffsets": "latest"}, streaming=True)


def test_resolve_applies_data_loss_and_timestamp_rules() -> None:
    tps = [("a", 0), ("a", 1)]
    lo, hi = {("a", 0): 10, ("a", 1): 0}, {("a", 0): 50, ("a", 1): 5}

    def go(bound: Bound, **kw: object) -> dict[tuple[str, int], int]:
        args: dict[str, object] = {"earliest": lo, "latest": hi, "by_time": {}, "starting": True,
                                   "fail_on_data_loss": True, **kw}
        return resolve(bound, tps, **args)  # type: ignore[arg-type]

    assert go(Bound("earliest")) == lo and go(Bound("latest")) == hi
    assert go(Bound("offsets", ((("a", 1), 3),))) == {("a", 0): 10, ("a", 1): 3}  # unnamed: the default
    with pytest.raises(DataLossError, match="offset 2 of a-0 was deleted"):
        go(Bound("offsets", ((("a", 0), 2),)))
    assert go(Bound("offsets", ((("a", 0), 2),)), fail_on_data_loss=False)[("a", 0)] == 10
    with pytest.raises(SparkSourceError, match="does not read: b-0"):
        go(Bound("offsets", ((("b", 0), 2),)))
    assert go(Bound("timestamp", timestamp=9), by_time={("a", 0): 30, ("a", 1): -1}, strategy="latest") == \
        {("a", 0): 30, ("a", 1): 5}
    with pytest.raises(SparkSourceError, match="a-1 has a timestamp at or after 9"):
        go(Bound("timestamp", timestamp=9), by_time={("a", 0): 30, ("a", 1): -1})
    assert go(Bound("timestamp", timestamp=9), by_time={("a", 0): 30, ("a", 1): -1}, starting=False) == \
        {("a", 0): 30, ("a", 1): 5}  # an ending timestamp past the last record: the end


def test_split_ranges_cover_every_offset_exactly_once() -> None:
    ranges = [OffsetRange("t", 0, 0, 900), OffsetRange("t", 1, 5, 105), OffsetRange("t", 2, 7, 7)]
    assert split_ranges(ranges) == ranges[:2]  # one task per partition with data
    parts = split_ranges(ranges, min_partitions=8)
    assert len(parts) == 8
    for tp, r in ((0, ranges[0]), (1, ranges[1])):
        mine = [p for p in parts if p.partition == tp]
        assert mine[0].start == r.start and mine[-1].end == r.end
        assert all(a.end == b.start for a, b in itertools.pairwise(mine))
    capped = split_ranges(ranges, max_records=40)
    assert max(p.size for p in capped) <= 40 and sum(p.size for p in capped) == 1000


def test_limit_ends_share_the_trigger_by_backlog() -> None:
    start = {("t", 0): 0, ("t", 1): 10}
    end = {("t", 0): 90, ("t", 1): 20, ("t", 2): 0}
    limited = limit_ends(start, end, 50)
    assert sum(limited[tp] - start.get(tp, 0) for tp in end) == 50
    assert limited[("t", 0)] - 0 > limited[("t", 1)] - 10 > 0 and limited[("t", 2)] == 0
    assert limit_ends(start, end, 1000) == end
    assert offsets_from_json(offsets_to_json(end)) == end
    assert offsets_to_json(end) == {"t": {"0": 90, "1": 20, "2": 0}}


def test_sink_columns_as_sparks_kafka_sink() -> None:
    check_sink_columns({"value": "binary", "topic": "string"}, topic_option=None)
    check_sink_columns({"value": "string", "key": "string", "partition": "int",
                        "headers": "array<struct<key:string,value:binary>>"}, topic_option="t")
    with pytest.raises(SparkSourceError, match="needs a 'value' column"):
        check_sink_columns({"key": "binary"}, topic_option="t")
    with pytest.raises(SparkSourceError, match="no topic to write to"):
        check_sink_columns({"value": "binary"}, topic_option=None)
    with pytest.raises(SparkSourceError, match="column 'partition' must be int, not bigint"):
        check_sink_columns({"value": "binary", "partition": "bigint"}, topic_option="t")
