"""Safety checks over a history, in the spirit of Jepsen's Kafka queue checker.

All functions are pure: they take the ops (and, for replicas, extracted batch
metadata) and say what went wrong in words a human can act on. The final
``read`` ops, taken after the cluster healed, are the ground truth every
acknowledgement and every consumer observation is held against.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from tests.chaos.history import Op, Read

Position = tuple[int, int]  # (partition, offset)


@dataclass
class CheckResult:
    """``ok`` is false iff there is at least one problem; ``counts`` also carries info-only tallies."""

    ok: bool = True
    problems: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, problem: str) -> None:
        self.problems.append(problem)
        self.ok = False

    def merge(self, other: CheckResult) -> None:
        self.problems.extend(other.problems)
        self.ok = self.ok and other.ok
        for key, value in other.counts.items():
            self.counts[key] = self.counts.get(key, 0) + value

    def __str__(self) -> str:
        head = f"{'OK' if self.ok else 'FAILED'} {self.counts}"
        return "\n".join([head, *(f"  - {p}" for p in self.problems)])


def _sends(ops: Iterable[Op], outcome: str) -> list[Op]:
    return [op for op in ops if op.f == "send" and op.outcome == outcome and op.value is not None]


def _final_reads(ops: Iterable[Op]) -> list[Read]:
    return [r for op in ops if op.f == "read" and op.outcome == "ok" for r in op.reads]


def _poll_reads(ops: Iterable[Op]) -> list[Read]:
    return [r for op in ops if op.f == "poll" and op.outcome == "ok" for r in op.reads]


def _final_index(ops: Sequence[Op]) -> tuple[dict[Position, str], dict[str, list[Position]]]:
    by_position: dict[Position, str] = {}
    by_value: dict[str, list[Position]] = defaultdict(list)
    for partition, offset, value in _final_reads(ops):
        by_position.setdefault((partition, offset), value)
        by_value[value].append((partition, offset))
    return by_position, by_value


def check_lost(ops: Sequence[Op]) -> CheckResult:
    """Every acknowledged send is in the final read at exactly the offset the broker acknowledged."""
    result = CheckResult()
    by_position, by_value = _final_index(ops)
    lost = 0
    for op in _sends(ops, "ok"):
        value = op.value
        assert value is not None
        where = by_value.get(value, [])
        if op.partition is not None and op.offset is not None:
            if by_position.get((op.partition, op.offset)) == value:
                continue
            found = by_position.get((op.partition, op.offset))
            detail = f"final read has {found!r} there" if found is not None else "nothing there"
            detail += f"; value found at {where}" if where else "; value absent"
            result.add(f"lost: {value!r} acked at partition {op.partition} offset {op.offset} ({op.process}), {detail}")
        elif where:
            continue
        else:
            result.add(f"lost: {value!r} acked ({op.process}) but absent from the final read")
        lost += 1
    result.counts["lost"] = lost
    return result


def check_duplicates(ops: Sequence[Op]) -> CheckResult:
    """The idempotent producer must never land one value twice in the log."""
    result = CheckResult()
    _, by_value = _final_index(ops)
    duplicated = 0
    for value, positions in sorted(by_value.items()):
        if len(positions) > 1:
            duplicated += 1
            result.add(f"duplicate: {value!r} appears at {sorted(positions)}")
    result.counts["duplicated"] = duplicated
    return result


def check_inconsistent_offsets(ops: Sequence[Op]) -> CheckResult:
    """No (partition, offset) is ever seen holding two different values, by anyone."""
    result = CheckResult()
    seen: dict[Position, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for op in _sends(ops, "ok"):
        if op.partition is not None and op.offset is not None and op.value is not None:
            seen[(op.partition, op.offset)][op.value].append(f"ack to {op.process}")
    for op in ops:
        if op.f in ("poll", "read") and op.outcome == "ok":
            for partition, offset, value in op.reads:
                seen[(partition, offset)][value].append(f"{op.f} by {op.process}")
    inconsistent = 0
    for (partition, offset), values in sorted(seen.items()):
        if len(values) > 1:
            inconsistent += 1
            shown = "; ".join(f"{v!r} ({', '.join(sorted(set(who)))})" for v, who in sorted(values.items()))
            result.add(f"inconsistent offset: partition {partition} offset {offset} held {shown}")
    result.counts["inconsistent"] = inconsistent
    return result


def check_nonmonotonic(ops: Sequence[Op]) -> CheckResult:
    """Each consumer's offsets per partition strictly increase, in poll completion order, until it resets."""
    result = CheckResult()
    events = sorted((op for op in ops if op.f in ("poll", "reset") and op.outcome == "ok" and op.end is not None),
                    key=lambda op: (op.end or 0.0, op.id))
    last: dict[str, dict[int, int]] = defaultdict(dict)
    nonmonotonic = 0
    for op in events:
        if op.f == "reset":
            last.pop(op.process, None)
            continue
        mine = last[op.process]
        for partition, offset, value in op.reads:
            previous = mine.get(partition)
            if previous is not None and offset <= previous:
                nonmonotonic += 1
                result.add(f"nonmonotonic: {op.process} read partition {partition} offset {offset} ({value!r}) "
                           f"after offset {previous}")
            mine[partition] = offset
    result.counts["nonmonotonic"] = nonmonotonic
    return result


def check_disappeared(ops: Sequence[Op]) -> CheckResult:
    """A value a consumer saw must still be in the final log at the same place."""
    result = CheckResult()
    by_position, by_value = _final_index(ops)
    disappeared = 0
    for partition, offset, value in sorted(set(_poll_reads(ops))):
        if by_position.get((partition, offset)) == value:
            continue
        disappeared += 1
        found = by_position.get((partition, offset))
        there = f"final read has {found!r} there" if found is not None else "nothing there"
        elsewhere = f"; value now at {by_value[value]}" if value in by_value else ""
        result.add(f"disappeared: {value!r} polled at partition {partition} offset {offset}, {there}{elsewhere}")
    result.counts["disappeared"] = disappeared
    return result


def check_unexpected(ops: Sequence[Op]) -> CheckResult:
    """Nobody reads a value that no producer ever tried to send."""
    result = CheckResult()
    sent = {op.value for op in ops if op.f == "send" and op.value is not None}
    unexpected = sorted({value for _, _, value in [*_poll_reads(ops), *_final_reads(ops)]} - sent)
    for value in unexpected:
        result.add(f"unexpected: {value!r} was read but never sent")
    result.counts["unexpected"] = len(unexpected)
    return result


def summarize(ops: Sequence[Op]) -> CheckResult:
    """Info-only tallies. A failed send that landed is legal (the client may give up on a write that succeeded)."""
    _, by_value = _final_index(ops)
    failed = _sends(ops, "failed")
    unknown = _sends(ops, "unknown")
    return CheckResult(counts={
        "acked": len(_sends(ops, "ok")),
        "failed": len(failed),
        "unknown": len(unknown),
        "pending": sum(1 for op in ops if op.pending),
        "read": len(by_value),
        "polled": len({value for _, _, value in _poll_reads(ops)}),
        "failed_present": sum(1 for op in failed if op.value in by_value),
        "unknown_present": sum(1 for op in unknown if op.value in by_value),
    })


def check(ops: Sequence[Op]) -> CheckResult:
    """Run every check; without a final read nothing can be verified, which is itself a problem."""
    result = summarize(ops)
    if not any(op.f == "read" and op.outcome == "ok" for op in ops):
        result.add("no successful final read: nothing to check acknowledgements against")
    for part in (check_lost, check_duplicates, check_inconsistent_offsets, check_nonmonotonic,
                 check_disappeared, check_unexpected):
        result.merge(part(ops))
    return result


Batch = tuple[int, int, int, int]  # (base_offset, last_offset, partition_leader_epoch, crc)


def compare_replicas(batches_by_broker: dict[int, list[Batch]]) -> list[str]:
    """Every replica of a partition holds the same batches; report where each one first departs from the reference.

    The reference is the lowest broker id among those with the longest log, so a lagging or truncated replica is
    reported as missing batches rather than the others as having extra ones.
    """
    if len(batches_by_broker) < 2:
        return []
    reference = min(batches_by_broker, key=lambda b: (-len(batches_by_broker[b]), b))
    expected = batches_by_broker[reference]
    problems: list[str] = []
    for broker in sorted(batches_by_broker):
        if broker == reference:
            continue
        actual = batches_by_broker[broker]
        for index, (want, got) in enumerate(zip(expected, actual, strict=False)):
            if want != got:
                problems.append(f"broker {broker} diverges from broker {reference} at batch {index}: "
                                f"{_fmt(got)} vs {_fmt(want)}")
                break
        else:
            if len(actual) != len(expected):
                missing = expected[len(actual)]
                problems.append(f"broker {broker} has {len(actual)} batches, broker {reference} has {len(expected)}: "
                                f"first missing is {_fmt(missing)}")
    return problems


def _fmt(batch: Batch) -> str:
    base, last, epoch, crc = batch
    return f"offsets {base}-{last} epoch {epoch} crc {crc:#010x}"
