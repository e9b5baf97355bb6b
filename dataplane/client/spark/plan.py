"""Planning reads: offset ranges, how they split into Spark tasks, how a trigger's limit spreads (pure).

Splitting follows Spark's ``KafkaOffsetRangeCalculator``: one task per topic-partition with data,
unless ``minPartitions`` asks for more (each range is cut into parts in proportion to its size)
or ``maxRecordsPerPartition`` caps a task's size. Cuts are plain offsets, so on a compacted topic a
part may hold fewer records than its width (or none); every offset still belongs to exactly one part.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True, order=True)
class OffsetRange:
    """Offsets ``[start, end)`` of one topic-partition: what one Spark task fetches."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def split_ranges(ranges: Iterable[OffsetRange], *, min_partitions: int | None = None,
                 max_records: int | None = None) -> list[OffsetRange]:
    """The tasks for ``ranges``: empty ranges dropped, then cut for ``min_partitions`` and ``max_records``."""
    nonempty = sorted(r for r in ranges if r.size > 0)
    if min_partitions is not None and min_partitions > len(nonempty):
        total = sum(r.size for r in nonempty)
        nonempty = [part for r in nonempty  # rounding half up, as Scala's math.round in Spark's calculator
                    for part in _cut(r, max(1, int(r.size / total * min_partitions + 0.5)))]
    if max_records is not None:
        nonempty = [part for r in nonempty for part in _cut(r, -(-r.size // max_records))]
    return nonempty


def _cut(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """``parts`` near-equal consecutive pieces of ``r`` (the first ones one larger when it does not divide)."""
    parts = min(parts, r.size)
    if parts <= 1:
        return [r]
    base, extra = divmod(r.size, parts)
    pieces, start = [], r.start
    for i in range(parts):
        end = start + base + (1 if i < extra else 0)
        pieces.append(OffsetRange(r.topic, r.partition, start, end))
        start = end
    return pieces


def limit_ends(starts: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int],
               max_records: int) -> dict[TopicPartition, int]:
    """Ends that admit at most ``max_records`` in all, shared in proportion to each partition's backlog.

    As Spark's ``maxOffsetsPerTrigger``: a partition with more waiting gets more; rounding leftovers go
    to the partitions in order so the whole allowance is used when there is that much to read, and every
    partition with a backlog moves by at least one when the allowance allows, so none starves.
    """
    backlog = {tp: max(0, ends[tp] - starts.get(tp, ends[tp])) for tp in ends}
    total = sum(backlog.values())
    if total <= max_records:
        return dict(ends)
    share = {tp: min(b, max_records * b // total) for tp, b in backlog.items()}
    left = max_records - sum(share.values())
    for tp in sorted(backlog):
        if left <= 0:
            break
        extra = min(left, backlog[tp] - share[tp])
        share[tp] += extra
        left -= extra
    return {tp: starts.get(tp, ends[tp]) + share[tp] for tp in ends}


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark's Kafka offset JSON shape, ``{"topic": {"0": 12}}``: what a streaming checkpoint stores."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def offsets_from_json(data: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    return {(topic, int(partition)): int(offset)
            for topic, parts in data.items() for partition, offset in parts.items()}


def stream_ranges(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int],
                  earliest: Mapping[TopicPartition, int]) -> Sequence[OffsetRange]:
    """A micro-batch's ranges; a partition new since ``start`` is read from its earliest offset, as Spark does."""
    return [OffsetRange(t, p, start.get((t, p), earliest.get((t, p), 0)), e) for (t, p), e in sorted(end.items())]
