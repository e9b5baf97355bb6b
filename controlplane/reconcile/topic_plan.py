"""Decide what a cluster's topics need: a pure ``plan_topics(desired, observed) -> actions``.

The desired side is the control plane's topic rows; the observed side is what
the cluster's admin API reports. Managed topics are created, grown, reconfigured
and deleted to match their spec. A difference on a managed topic whose spec has
already been applied (``generation == observed_generation``) is drift: a Kafka
client changed it. Drift is put back or only reported, by the cluster's policy.
Topics a client created appear as unmanaged rows and follow the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class DesiredTopic:
    name: str
    partitions: int
    replication_factor: int
    configs: Mapping[str, str]
    managed: bool = True
    deleting: bool = False
    applied: bool = False  # this spec generation has been carried out before (so a difference is drift)


@dataclass(frozen=True, slots=True)
class ObservedTopic:
    name: str
    partitions: int
    replication_factor: int
    configs: Mapping[str, str] = field(default_factory=dict)  # dynamic overrides only


@dataclass(frozen=True, slots=True)
class CreateTopic:
    name: str
    partitions: int
    replication_factor: int
    configs: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class AddPartitions:
    name: str
    total: int


@dataclass(frozen=True, slots=True)
class AlterConfigs:
    name: str
    set: Mapping[str, str]
    delete: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DeleteTopic:
    name: str


@dataclass(frozen=True, slots=True)
class Forget:
    """Remove the row: the cluster has no such topic any more."""

    name: str


@dataclass(frozen=True, slots=True)
class Adopt:
    """Record a topic a Kafka client created (unmanaged), or refresh an unmanaged row."""

    topic: ObservedTopic


@dataclass(frozen=True, slots=True)
class Drift:
    name: str
    detail: str


TopicAction = CreateTopic | AddPartitions | AlterConfigs | DeleteTopic | Forget | Adopt | Drift


def config_diff(desired: Mapping[str, str], observed: Mapping[str, str]) -> tuple[dict[str, str], tuple[str, ...]]:
    """What to set and what to delete so the observed overrides become the desired ones."""
    to_set = {k: v for k, v in desired.items() if observed.get(k) != v}
    to_delete = tuple(sorted(k for k in observed if k not in desired))
    return to_set, to_delete


def plan_topics(desired: Sequence[DesiredTopic], observed: Mapping[str, ObservedTopic], *,
                correct_drift: bool) -> list[TopicAction]:
    actions: list[TopicAction] = []
    known = {d.name for d in desired}
    for want in desired:
        have = observed.get(want.name)
        if want.deleting:
            actions.append(DeleteTopic(want.name) if have is not None else Forget(want.name))
            continue
        if not want.managed:
            if have is None:
                actions.append(Forget(want.name))
            elif (have.partitions, have.replication_factor, dict(have.configs)) != (
                    want.partitions, want.replication_factor, dict(want.configs)):
                actions.append(Adopt(have))
            continue
        if have is None:
            if want.applied:  # a client deleted a managed topic
                actions.append(Drift(want.name, "deleted by a Kafka client" + ("; recreating" if correct_drift
                                                                                else "")))
                if not correct_drift:
                    continue
            actions.append(CreateTopic(want.name, want.partitions, want.replication_factor, dict(want.configs)))
            continue
        if have.partitions < want.partitions:
            actions.append(AddPartitions(want.name, want.partitions))
        elif have.partitions > want.partitions:
            actions.append(Drift(want.name, f"has {have.partitions} partitions, the spec says {want.partitions} "
                                            f"(partitions cannot shrink; raise the spec to match)"))
        if have.replication_factor != want.replication_factor:
            actions.append(Drift(want.name, f"replication factor is {have.replication_factor}, the spec says "
                                            f"{want.replication_factor}"))
        to_set, to_delete = config_diff(want.configs, have.configs)
        if to_set or to_delete:
            if want.applied:
                changed = sorted({*to_set, *to_delete})
                actions.append(Drift(want.name, f"configs changed by a Kafka client: {', '.join(changed)}"
                                                + ("; putting them back" if correct_drift else "")))
            if not want.applied or correct_drift:
                actions.append(AlterConfigs(want.name, to_set, to_delete))
    for name in sorted(observed.keys() - known):
        actions.append(Adopt(observed[name]))
    return actions


def pending(actions: Sequence[TopicAction]) -> int:
    """How many actions change the cluster or the rows (drift reports alone leave nothing pending)."""
    return sum(1 for a in actions if not isinstance(a, Drift))
