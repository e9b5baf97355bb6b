"""``to_batch``'s column building (no broker, no Spark): its fast paths give the same columns as a row-by-row
reference, with gaps in offsets and every timestamp type. Messages are confluent-kafka's own objects."""

from __future__ import annotations

import pyarrow as pa
import pytest
from confluent_kafka import Message

from dataplane.client.spark.fetch import ARROW_SCHEMA, to_batch


def _reference(messages: list[Message], topic: str, partition: int) -> pa.RecordBatch:
    rows = []
    for m in messages:
        kind, ms = m.timestamp()
        rows.append({"key": m.key(), "value": m.value(), "topic": topic, "partition": partition,
                     "offset": m.offset(), "timestamp": None if kind == 0 else ms * 1000, "timestampType": kind - 1})
    return pa.RecordBatch.from_pylist(rows, schema=ARROW_SCHEMA)


@pytest.mark.parametrize(("offsets", "kinds"), [
    (range(100, 110), [1] * 10),                      # contiguous, CreateTime
    (range(0, 5), [2] * 5),                           # LogAppendTime
    ([3, 4, 7, 8, 20], [1] * 5),                      # gaps (compaction, transaction markers)
    ([1, 2, 3, 4], [1, 2, 0, 1]),                     # mixed types, one without a timestamp
    ([9], [0]),                                       # none at all
])
def test_columns_match_a_row_by_row_reference(offsets: list[int], kinds: list[int]) -> None:
    messages = [Message(topic="t", partition=3, offset=o, key=None if o % 3 == 0 else b"k%d" % o,
                        value=b"v" * o, timestamp=(k, 1_700_000_000_000 + o)) for o, k in zip(offsets, kinds,
                                                                                         strict=True)]
    built = to_batch(messages, "t", 3, include_headers=False)
    assert built.schema == ARROW_SCHEMA
    assert built.to_pylist() == _reference(messages, "t", 3).to_pylist()
