"""Where a read starts and ends: the selected partitions and their offsets, asked of the cluster.

Runs on the Spark driver (planning, and each micro-batch's ``latestOffset``). The cluster is asked
through ``ClusterAdmin`` (librdkafka's ListOffsets and metadata); ``resolve`` is the pure part that
turns a ``Bound`` into offsets given what the cluster answered, with Spark's rules: a starting offset
below the log start or beyond the end is data loss (an error with ``failOnDataLoss``, else clamped),
a timestamp with no record at or after it is the end (or, when starting, an error unless
``startingOffsetsByTimestampStrategy`` is ``latest``).

An ``OffsetLookup`` belongs to one reader on the driver and is used from one thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from dataplane.client.admin import AdminError, ClusterAdmin
from dataplane.client.spark.options import (
    EARLIEST,
    LATEST,
    Assign,
    Bound,
    DataLossError,
    SourceOptions,
    SparkSourceError,
    Subscribe,
    TopicPartition,
)
from dataplane.client.spark.plan import OffsetRange

CLIENT_ID = "sluice-spark"


def _name(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def resolve(bound: Bound, partitions: Sequence[TopicPartition], *, earliest: Mapping[TopicPartition, int],
            latest: Mapping[TopicPartition, int], by_time: Mapping[TopicPartition, int], starting: bool,
            fail_on_data_loss: bool, strategy: str = "error", option: str = "startingOffsets") -> dict[
                TopicPartition, int]:
    """Each partition's offset for ``bound``; ``by_time`` holds ListOffsets' answers for the timestamp(s)."""
    wanted = set(partitions)
    named = bound.as_dict()
    unknown = sorted(set(named) - wanted)
    if unknown:
        raise SparkSourceError(f"option '{option}' names partitions the query does not read: "
                               f"{', '.join(_name(tp) for tp in unknown)}")
    out: dict[TopicPartition, int] = {}
    for tp in partitions:
        lo, hi = earliest[tp], latest[tp]
        if bound.kind == "earliest":
            out[tp] = lo
        elif bound.kind == "latest":
            out[tp] = hi
        elif bound.kind in ("timestamp", "timestamps"):
            if bound.kind == "timestamps" and tp not in named:
                out[tp] = lo if starting else hi  # not named: the default bound, as Spark's own JSON options
                continue
            found = by_time.get(tp, -1)
            if found >= 0:
                out[tp] = found
            elif starting and strategy == "error":
                ts = named[tp] if bound.kind == "timestamps" else bound.timestamp
                raise SparkSourceError(f"no record in {_name(tp)} has a timestamp at or after {ts} ms; "
                                       "set startingOffsetsByTimestampStrategy=latest to start at the end instead")
            else:
                out[tp] = hi
        else:
            offset = named.get(tp, EARLIEST if starting else LATEST)
            offset = lo if offset == EARLIEST else hi if offset == LATEST else offset
            if starting and offset < lo:
                if fail_on_data_loss:
                    raise DataLossError(f"{option}: offset {offset} of {_name(tp)} was deleted (the log now "
                                        f"starts at {lo}); set failOnDataLoss=false to read from {lo}")
                offset = lo
            if offset > hi:
                if fail_on_data_loss:
                    raise DataLossError(f"{option}: offset {offset} of {_name(tp)} is beyond its end {hi}; "
                                        "set failOnDataLoss=false to stop at the end")
                offset = hi
            out[tp] = offset
    return out


class OffsetLookup:
    """The cluster's view for one query: which partitions it reads, and their earliest/latest/timed offsets."""

    def __init__(self, options: SourceOptions, *, timeout: float = 30.0) -> None:
        self.options = options
        config = {"client.id": CLIENT_ID, **options.client}
        bootstrap = config.pop("bootstrap.servers")
        try:
            self._admin = ClusterAdmin(bootstrap, timeout=timeout, config=config)
        except AdminError as e:
            raise SparkSourceError(f"cannot reach {bootstrap}: {e.message}") from None
        self._bootstrap = bootstrap

    def close(self) -> None:
        self._admin.close()

    def partitions(self) -> list[TopicPartition]:
        """The partitions the selector names, sorted; an unknown topic or partition is an error."""
        selector = self.options.selector
        try:
            # Internal topics (__consumer_offsets) are read when named, as Kafka's consumer reads them; a
            # pattern skips them (the consumer's exclude.internal.topics default).
            described = self._admin.topics(include_internal=True)
        except AdminError as e:
            raise SparkSourceError(f"cannot list topics of {self._bootstrap}: {e.message}") from None
        topics = {name: len(info.partitions) for name, info in described.items()}
        if isinstance(selector, Subscribe):
            missing = [t for t in selector.topics if t not in topics]
            if missing:
                raise SparkSourceError(f"unknown topic {', '.join(map(repr, missing))} (option 'subscribe') "
                                       f"on {self._bootstrap}")
            return sorted((t, p) for t in selector.topics for p in range(topics[t]))
        if isinstance(selector, Assign):
            absent = [tp for tp in selector.partitions if tp[1] >= topics.get(tp[0], 0)]
            if absent:
                raise SparkSourceError(f"unknown topic or partition {', '.join(_name(tp) for tp in absent)} "
                                       f"(option 'assign') on {self._bootstrap}")
            return list(selector.partitions)
        return sorted((t, p) for t, n in topics.items() if selector.matches(t) and not described[t].internal
                      for p in range(n))

    def offsets(self, partitions: Iterable[TopicPartition], spec: str | int) -> dict[TopicPartition, int]:
        tps = list(partitions)
        if not tps:
            return {}
        try:
            return self._admin.offsets(tps, spec)  # type: ignore[arg-type]
        except AdminError as e:
            raise SparkSourceError(f"cannot list offsets on {self._bootstrap}: {e.message}") from None

    def by_time(self, bound: Bound, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        if bound.kind == "timestamp":
            return self.offsets(partitions, bound.timestamp)
        found: dict[TopicPartition, int] = {}
        for tp, ts in bound.offsets:
            if tp in partitions:
                found.update(self.offsets([tp], ts))
        return found

    def bound(self, bound: Bound, partitions: Sequence[TopicPartition], *, starting: bool,
              earliest: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int]) -> dict[
                  TopicPartition, int]:
        by_time = self.by_time(bound, partitions) if bound.kind in ("timestamp", "timestamps") else {}
        option = ("starting" if starting else "ending") + (
            "OffsetsByTimestamp" if bound.kind == "timestamps" else "Timestamp" if bound.kind == "timestamp"
            else "Offsets")
        return resolve(bound, partitions, earliest=earliest, latest=latest, by_time=by_time, starting=starting,
                       fail_on_data_loss=self.options.fail_on_data_loss, strategy=self.options.strategy,
                       option=option)

    def batch_ranges(self) -> list[OffsetRange]:
        """A batch query's range for every selected partition (possibly empty), before splitting."""
        tps = self.partitions()
        earliest, latest = self.offsets(tps, "earliest"), self.offsets(tps, "latest")
        start = self.bound(self.options.starting, tps, starting=True, earliest=earliest, latest=latest)
        end = self.bound(self.options.ending, tps, starting=False, earliest=earliest, latest=latest)
        for tp in tps:
            if end[tp] < start[tp]:
                raise SparkSourceError(f"{_name(tp)}: the ending offset {end[tp]} is before the starting offset "
                                       f"{start[tp]}")
        return [OffsetRange(t, p, start[(t, p)], end[(t, p)]) for t, p in tps]
