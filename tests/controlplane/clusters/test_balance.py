"""The rebalance planner: worked examples, then properties over random clusters. Pure: no database."""

from __future__ import annotations

import ast
import itertools
import math
import random
import time
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from controlplane.clusters import balance
from controlplane.clusters.balance import BrokerLoad, BrokerSlot, ImpossiblePlan, Placement, Proposal, propose

# -- helpers ----------------------------------------------------------------------------------------------------------

def applied(placements: Sequence[Placement], proposal: Proposal) -> list[Placement]:
    """The placements once the proposal is carried out."""
    targets = {(m.topic, m.partition): m.target for m in proposal.moves}
    return [Placement(p.topic, p.partition, targets.get((p.topic, p.partition), p.replicas), p.size_bytes)
            for p in placements]


def loads(brokers: Sequence[BrokerSlot], placements: Sequence[Placement]) -> tuple[BrokerLoad, ...]:
    replicas: Counter[int] = Counter()
    leaders: Counter[int] = Counter()
    stored: Counter[int] = Counter()
    for p in placements:
        leaders[p.replicas[0]] += 1
        for b in p.replicas:
            replicas[b] += 1
            stored[b] += p.size_bytes
    return tuple(BrokerLoad(n, replicas[n], leaders[n], stored[n]) for n in sorted(b.node_id for b in brokers))


def counts(proposal: Proposal, remove: Collection[int] = ()) -> tuple[dict[int, int], dict[int, int]]:
    """Replicas and leaders per remaining broker after the proposal."""
    after = [load for load in proposal.after if load.node_id not in remove]
    return {a.node_id: a.replicas for a in after}, {a.node_id: a.leaders for a in after}


def spread(values: Collection[int]) -> int:
    return max(values, default=0) - min(values, default=0)


def rack_of(broker: BrokerSlot) -> object:
    """A broker without a rack is a rack of its own (the module's documented choice)."""
    return ("unlabelled", broker.node_id) if broker.rack is None else broker.rack


def lower_bound(brokers: Sequence[BrokerSlot], placements: Sequence[Placement], remove: Collection[int]) -> int:
    """Relocations no plan that ends with counts within 1 can do without: everything on removed brokers, plus each
    remaining broker's excess over its target (floor or ceil of the mean; giving the ceilings to the fullest brokers
    is what makes this smallest)."""
    held = Counter(b for p in placements for b in p.replicas)
    remaining = sorted((b.node_id for b in brokers if b.node_id not in remove), key=lambda n: -held[n])
    if not remaining:
        return 0
    base, extra = divmod(sum(len(p.replicas) for p in placements), len(remaining))
    return (sum(held[n] for n in remove)
            + sum(max(0, held[n] - base - (k < extra)) for k, n in enumerate(remaining)))


def rack_cap(placement: Placement, racks: dict[int, object], distinct: int) -> int:
    """Most replicas of the partition one rack may hold afterwards (module docstring, rule 2)."""
    rf = len(placement.replicas)
    if distinct >= rf:
        return 1
    return max(math.ceil(rf / distinct), max(Counter(racks[b] for b in placement.replicas).values()))


# -- worked examples ---------------------------------------------------------------------------------------------------

def test_scale_out_from_three_brokers_to_four() -> None:
    # Twelve partitions on all three brokers, leaders rotating; broker 3 is new and empty.
    placements = [Placement("orders", k, (k % 3, (k + 1) % 3, (k + 2) % 3), (k + 1) * 100) for k in range(12)]
    brokers = [BrokerSlot(n) for n in range(4)]
    proposal = propose(brokers, placements)

    replicas, leaders = counts(proposal)
    assert replicas == {0: 9, 1: 9, 2: 9, 3: 9}
    assert leaders == {0: 3, 1: 3, 2: 3, 3: 3}
    assert proposal.replica_moves == 9 == lower_bound(brokers, placements, ())
    # Each moved partition gains broker 3 once; the nine smallest go.
    assert {m.partition for m in proposal.moves if m.adding} == set(range(9))
    assert all(m.adding == (3,) for m in proposal.moves if m.adding)
    assert proposal.bytes_to_copy == sum(range(100, 1000, 100))


def test_scale_in_from_four_brokers_to_three() -> None:
    placements = [Placement("orders", k, (k % 4, (k + 1) % 4), 10 * k) for k in range(12)]
    brokers = [BrokerSlot(n) for n in range(4)]
    proposal = propose(brokers, placements, remove={3})

    replicas, leaders = counts(proposal, remove={3})
    assert replicas == {0: 8, 1: 8, 2: 8}
    assert leaders == {0: 4, 1: 4, 2: 4}
    assert proposal.after[3] == BrokerLoad(3, 0, 0, 0)
    # Only broker 3's six replicas move: the lower bound.
    assert proposal.replica_moves == 6 == lower_bound(brokers, placements, {3})
    assert all(m.removing == (3,) for m in proposal.moves if m.removing)


def test_rack_aware_with_three_racks() -> None:
    # Two brokers per rack; every partition starts with two replicas in rack a.
    brokers = [BrokerSlot(n, rack) for n, rack in enumerate("aabbcc")]
    placements = [Placement("orders", k, (0, 1, 2), 100 + k) for k in range(6)]
    proposal = propose(brokers, placements)

    racks = {b.node_id: b.rack or "" for b in brokers}
    for p in applied(placements, proposal):
        assert sorted(racks[b] for b in p.replicas) == ["a", "b", "c"]
    replicas, leaders = counts(proposal)
    assert set(replicas.values()) == {3}
    assert set(leaders.values()) == {1}
    # Six repairs (one a-replica each) and three moves within rack b: the lower bound.
    assert proposal.replica_moves == 9 == lower_bound(brokers, placements, ())


def test_unlabelled_brokers_count_as_racks_of_their_own() -> None:
    # Racks: x, x, and two unlabelled brokers, so three racks for a partition of three replicas.
    brokers = [BrokerSlot(1, "x"), BrokerSlot(2, "x"), BrokerSlot(3), BrokerSlot(4)]
    proposal = propose(brokers, [Placement("orders", 0, (1, 2, 3), 10)])

    (move,) = proposal.moves
    assert {3, 4} <= set(move.target)
    assert len({1, 2} & set(move.target)) == 1


def test_fewer_racks_than_replicas_never_worsens_a_partitions_spread() -> None:
    # Rack a has brokers 1-3, rack b only broker 4. Moving a b-replica into rack a would even the counts out,
    # but would leave a partition in one rack; so broker 4 keeps its six and rack a shares the rest.
    brokers = [BrokerSlot(1, "a"), BrokerSlot(2, "a"), BrokerSlot(3, "a"), BrokerSlot(4, "b")]
    placements = [Placement("orders", k, (1, 2, 4), 100 + k) for k in range(6)]
    proposal = propose(brokers, placements)

    assert all(4 in p.replicas for p in applied(placements, proposal))
    replicas, leaders = counts(proposal)
    assert replicas == {1: 4, 2: 4, 3: 4, 4: 6}
    assert spread(leaders.values()) <= 1
    assert proposal.replica_moves == 4


def test_leader_skew_alone_is_fixed_by_reordering() -> None:
    placements = [Placement("orders", k, (0, 1, 2), 1000) for k in range(6)]
    proposal = propose([BrokerSlot(n) for n in range(3)], placements)

    assert proposal.replica_moves == 0
    assert proposal.bytes_to_copy == 0
    assert proposal.leader_moves == 4
    assert all(sorted(m.target) == [0, 1, 2] and m.bytes_to_copy == 0 for m in proposal.moves)
    assert counts(proposal)[1] == {0: 2, 1: 2, 2: 2}


def test_leaders_that_reordering_cannot_balance_are_traded_with_data() -> None:
    # Broker 1 leads six single-replica partitions it cannot hand off; brokers 2 and 3 share six pairs.
    placements = [Placement("solo", k, (1,), 10) for k in range(6)]
    placements += [Placement("pair", k, (2, 3) if k % 2 else (3, 2), 10) for k in range(6)]
    proposal = propose([BrokerSlot(n) for n in (1, 2, 3)], placements)

    replicas, leaders = counts(proposal)
    assert replicas == {1: 6, 2: 6, 3: 6}
    assert leaders == {1: 4, 2: 4, 3: 4}
    # Two leaders leave broker 1, each with a replica sent back to keep the counts even: four copies at least.
    assert proposal.replica_moves == 4


def test_a_balanced_cluster_is_left_alone() -> None:
    placements = [Placement("orders", k, (k, (k + 1) % 3, (k + 2) % 3), 5) for k in range(3)]
    proposal = propose([BrokerSlot(n) for n in range(3)], placements)
    assert proposal.is_empty
    assert proposal.before == proposal.after


def test_lower_bound_can_be_out_of_reach_when_brokers_leave() -> None:
    # Broker 4 leaves; its replica of p can only go to broker 3 (p is on 1 and 2), which is already the fullest,
    # so broker 3 must pass one of its own on: two moves where the bound says one.
    brokers = [BrokerSlot(n) for n in (1, 2, 3, 4)]
    placements = [Placement("p", 0, (1, 2, 4)), Placement("a", 0, (3,)), Placement("b", 0, (3,))]
    proposal = propose(brokers, placements, remove={4})

    assert lower_bound(brokers, placements, {4}) == 1
    assert proposal.replica_moves == 2
    assert spread(counts(proposal, remove={4})[0].values()) <= 1


def test_impossible_plan_names_the_partition() -> None:
    with pytest.raises(ImpossiblePlan) as caught:
        propose([BrokerSlot(n) for n in range(3)], [Placement("orders", 7, (0, 1, 2))], remove={2})
    assert caught.value.field == "remove"
    assert "orders-7" in caught.value.message


@pytest.mark.parametrize(("brokers", "placements", "remove", "field"), [
    ([BrokerSlot(1), BrokerSlot(1)], [], (), "brokers"),
    ([BrokerSlot(1)], [], (2,), "remove"),
    ([BrokerSlot(1)], [Placement("t", 0, (1,)), Placement("t", 0, (1,))], (), "placements"),
    ([BrokerSlot(1)], [Placement("t", 0, (2,))], (), "placements"),
    ([BrokerSlot(1), BrokerSlot(2)], [Placement("t", 0, (1, 1))], (), "placements"),
    ([BrokerSlot(1)], [Placement("t", 0, ())], (), "placements"),
    ([BrokerSlot(1)], [Placement("t", 0, (1,), -1)], (), "placements"),
])
def test_inconsistent_input_is_rejected(brokers: list[BrokerSlot], placements: list[Placement],
                                        remove: tuple[int, ...], field: str) -> None:
    with pytest.raises(ImpossiblePlan) as caught:
        propose(brokers, placements, remove=remove)
    assert caught.value.field == field


def test_ten_thousand_partitions_on_twelve_brokers() -> None:
    """Scale-out from 11 brokers to 12 (three racks of four; the new broker 11 is in rack 2) with 10,000
    partitions of three replicas, one per rack. No time limit is asserted, since machines vary: the time is
    printed, and an accidental quadratic would take minutes rather than the fraction of a second expected."""
    rng = random.Random(7)
    rack_members = [[n for n in range(11) if n % 3 == rack] for rack in range(3)]
    placements = [Placement(f"topic-{k % 40}", k, tuple(rng.choice(rack_members[r]) for r in rng.sample(range(3), 3)),
                            rng.randrange(10**9)) for k in range(10_000)]
    brokers = [BrokerSlot(n, f"rack-{n % 3}") for n in range(12)]
    started = time.perf_counter()
    proposal = propose(brokers, placements)
    elapsed = time.perf_counter() - started
    print(f"\npropose: 10,000 partitions x RF 3 on 12 brokers: {elapsed:.2f}s, "
          f"{proposal.replica_moves} replica moves, {proposal.leader_moves} leader changes")

    replicas, leaders = counts(proposal)
    assert spread(replicas.values()) <= 1 and spread(leaders.values()) <= 1
    assert replicas[11] == 2500
    assert proposal.replica_moves == lower_bound(brokers, placements, ())


def test_the_module_is_pure() -> None:
    """No Django, no project imports, no I/O: the standard library's pure modules only."""
    tree = ast.parse(Path(balance.__file__).read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported <= {"__future__", "collections", "collections.abc", "dataclasses", "itertools", "math", "typing"}


# -- properties --------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Cluster:
    brokers: list[BrokerSlot]
    placements: list[Placement]
    remove: frozenset[int]

    @property
    def remaining(self) -> list[BrokerSlot]:
        return [b for b in self.brokers if b.node_id not in self.remove]

    @property
    def racks(self) -> dict[int, object]:
        return {b.node_id: rack_of(b) for b in self.brokers}

    @property
    def distinct_racks(self) -> int:
        return len({rack_of(b) for b in self.remaining})


@st.composite
def clusters(draw: st.DrawFn, *, max_brokers: int = 12, max_partitions: int = 300, unlabelled: bool = False,
             keep_all: bool = False, one_rf: bool = False) -> Cluster:
    """1-12 brokers, unlabelled, in racks a-c, in even racks, or a mix; any brokers removed; 0-300 partitions of
    RF 1-3 anywhere in the cluster, of random sizes (often equal, to exercise ties).

    The partitions come from a seeded generator rather than one draw each: drawing thousands of values through
    Hypothesis costs more than planning them. Shrinking still works on the counts and on the seed.
    """
    n = draw(st.integers(1, max_brokers))
    layout = "none" if unlabelled else draw(st.sampled_from(["none", "racks", "even", "mixed"]))
    if layout == "even":
        width = draw(st.integers(1, 3))
        racks: list[str | None] = [f"r{k % width}" for k in range(n)]
    else:
        pool: dict[str, list[str | None]] = {"none": [None], "racks": ["a", "b", "c"], "mixed": ["a", "b", None]}
        racks = [draw(st.sampled_from(pool[layout])) for _ in range(n)]
    remove = frozenset() if keep_all else draw(st.frozensets(st.integers(0, n - 1), max_size=n - 1))
    count = draw(st.integers(0, max_partitions))
    largest = draw(st.sampled_from([0, 7, 10**9]))
    rng = random.Random(draw(st.integers(0, 2**32)))
    rf = rng.randint(1, min(3, n))
    placements = []
    for k in range(count):
        if not one_rf:
            rf = rng.randint(1, min(3, n))
        placements.append(Placement(f"t{k % 3}", k, tuple(rng.sample(range(n), rf)), rng.randint(0, largest)))
    return Cluster([BrokerSlot(k, rack) for k, rack in enumerate(racks)], placements, remove)


def plan(cluster: Cluster) -> Proposal | None:
    """The proposal, or None after checking that an impossible plan is refused for the right reason."""
    needed = max((len(p.replicas) for p in cluster.placements), default=0)
    event(f"{len(cluster.placements) // 100 * 100}+ partitions")
    if needed > len(cluster.remaining):
        event("impossible")
        with pytest.raises(ImpossiblePlan) as caught:
            propose(cluster.brokers, cluster.placements, remove=cluster.remove)
        assert caught.value.field == "remove"
        return None
    return propose(cluster.brokers, cluster.placements, remove=cluster.remove)


PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(clusters())
def test_moves_are_well_formed_and_loads_add_up(cluster: Cluster) -> None:
    proposal = plan(cluster)
    if proposal is None:
        return
    by_key = {(p.topic, p.partition): p for p in cluster.placements}
    keys = [(m.topic, m.partition) for m in proposal.moves]
    assert keys == sorted(set(keys))
    for move in proposal.moves:
        current = by_key[move.topic, move.partition]
        assert move.current == current.replicas != move.target
        assert len(move.target) == len(set(move.target)) == len(move.current)  # RF kept, no broker twice
        assert move.bytes_to_copy == current.size_bytes * len(move.adding)
        assert sorted(move.adding) == sorted(set(move.target) - set(move.current))
        assert sorted(move.removing) == sorted(set(move.current) - set(move.target))
        assert move.leader_change == (move.current[0] != move.target[0])
    assert proposal.before == loads(cluster.brokers, cluster.placements)
    assert proposal.after == loads(cluster.brokers, applied(cluster.placements, proposal))
    assert proposal.replica_moves == sum(len(m.adding) for m in proposal.moves)
    assert proposal.leader_moves == sum(m.leader_change for m in proposal.moves)
    assert proposal.bytes_to_copy == sum(m.bytes_to_copy for m in proposal.moves)


@PROPERTY
@given(clusters())
def test_removed_brokers_empty_racks_hold_and_counts_even_out(cluster: Cluster) -> None:
    proposal = plan(cluster)
    if proposal is None:
        return
    racks, distinct = cluster.racks, cluster.distinct_racks
    for before, after in zip(cluster.placements, applied(cluster.placements, proposal), strict=True):
        assert not set(after.replicas) & cluster.remove
        held = Counter(racks[b] for b in after.replicas)
        assert max(held.values()) <= rack_cap(before, racks, distinct)
        if distinct >= len(before.replicas):
            assert len(held) == len(before.replicas)
    for load in proposal.after:
        if load.node_id in cluster.remove:
            assert (load.replicas, load.leaders) == (0, 0)

    replicas, leaders = counts(proposal, cluster.remove)
    assert spread(leaders.values()) <= 1
    # Replica counts end within 1 where the rack rule cannot stand in the way: without labels, or with the same
    # number of remaining brokers in every rack and no partition wider than the racks.
    per_rack = Counter(racks[b.node_id] for b in cluster.remaining)
    even = len(set(per_rack.values())) <= 1 and all(len(p.replicas) <= distinct for p in cluster.placements)
    if all(b.rack is None for b in cluster.brokers) or even:
        assert spread(replicas.values()) <= 1


@PROPERTY
@given(clusters())
def test_never_fewer_moves_than_the_lower_bound(cluster: Cluster) -> None:
    """A sanity check on both: the bound assumes counts end within 1, which uneven racks can rule out."""
    proposal = plan(cluster)
    if proposal is not None and spread(counts(proposal, cluster.remove)[0].values()) <= 1:
        assert proposal.replica_moves >= lower_bound(cluster.brokers, cluster.placements, cluster.remove)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(unlabelled=True, keep_all=True, one_rf=True))
def test_the_lower_bound_is_met_without_racks_removals_or_mixed_rf(cluster: Cluster) -> None:
    """A fullest broker always holds a partition an emptiest lacks, so each move lowers the bound by one; and
    with one RF and even replica counts, reordering alone evens the leaders (module docstring)."""
    proposal = plan(cluster)
    assert proposal is not None
    assert proposal.replica_moves == lower_bound(cluster.brokers, cluster.placements, cluster.remove)


@PROPERTY
@given(clusters(), st.randoms(use_true_random=False))
def test_deterministic_and_a_fixed_point(cluster: Cluster, rng: random.Random) -> None:
    proposal = plan(cluster)
    if proposal is None:
        return
    brokers, placements = list(cluster.brokers), list(cluster.placements)
    rng.shuffle(brokers)
    rng.shuffle(placements)
    assert propose(brokers, placements, remove=set(cluster.remove)) == proposal
    assert propose(cluster.brokers, applied(cluster.placements, proposal), remove=cluster.remove).is_empty


def exhaustive(cluster: Cluster) -> tuple[int, int]:
    """The best (sum of squared replica counts, sum of squared leader counts) over every plan the rules allow."""
    racks, distinct = cluster.racks, cluster.distinct_racks
    remaining = [b.node_id for b in cluster.remaining]
    options = []
    for p in cluster.placements:
        cap = rack_cap(p, racks, distinct)
        options.append([s for s in itertools.combinations(remaining, len(p.replicas))
                        if max(Counter(racks[b] for b in s).values()) <= cap])
    best: tuple[int, int] | None = None
    for choice in itertools.product(*options):
        replicas = sum(c * c for c in Counter(b for s in choice for b in s).values())
        if best is not None and replicas > best[0]:
            continue
        leaders = min(sum(c * c for c in Counter(lead).values()) for lead in itertools.product(*choice))
        best = min(best or (replicas, leaders), (replicas, leaders))
    assert best is not None
    return best


@settings(max_examples=200, deadline=None)
@given(clusters(max_brokers=5, max_partitions=4))
def test_tiny_clusters_are_as_even_as_exhaustive_search_allows(cluster: Cluster) -> None:
    """Replica and then leader counts as even (least sum of squares) as the best plan found by trying them all."""
    proposal = plan(cluster)
    if proposal is None:
        return
    replicas, leaders = counts(proposal, cluster.remove)
    assert (sum(c * c for c in replicas.values()), sum(c * c for c in leaders.values())) == exhaustive(cluster)
