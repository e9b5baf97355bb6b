"""Properties of Kafka's round-robin replica assignment."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataplane.cluster.assignment import AssignmentError, assign_replicas, rack_alternated


@st.composite
def layouts(draw: st.DrawFn) -> tuple[list[int], int, int, int, int]:
    brokers = draw(st.lists(st.integers(min_value=0, max_value=1000), min_size=1, max_size=12, unique=True))
    rf = draw(st.integers(min_value=1, max_value=len(brokers)))
    partitions = draw(st.integers(min_value=1, max_value=60))
    return brokers, partitions, rf, draw(st.integers(0, 50)), draw(st.integers(0, 50))


@given(layouts())
def test_every_partition_gets_distinct_live_replicas(layout: tuple[list[int], int, int, int, int]) -> None:
    brokers, partitions, rf, start, shift = layout
    result = assign_replicas(brokers, partitions, rf, start_index=start, shift=shift)
    assert len(result) == partitions
    for replicas in result:
        assert len(replicas) == rf == len(set(replicas))
        assert set(replicas) <= set(brokers)


@given(layouts())
def test_leaders_spread_evenly(layout: tuple[list[int], int, int, int, int]) -> None:
    brokers, partitions, rf, start, shift = layout
    leaders = Counter(r[0] for r in assign_replicas(brokers, partitions, rf, start_index=start, shift=shift))
    counts = [leaders.get(b, 0) for b in brokers]
    assert max(counts) - min(counts) <= 1


def test_matches_kafkas_layout_for_a_known_case() -> None:
    # Kafka's AdminUtils example: 5 brokers, 10 partitions, RF 3, start index 0, shift 0.
    assert assign_replicas([0, 1, 2, 3, 4], 10, 3) == [
        [0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 0], [4, 0, 1],
        [0, 2, 3], [1, 3, 4], [2, 4, 0], [3, 0, 1], [4, 1, 2],
    ]


@pytest.mark.parametrize(("brokers", "partitions", "rf"), [([1, 2], 3, 3), ([1], 0, 1), ([1], 1, 0), ([], 1, 1)])
def test_impossible_requests_raise(brokers: list[int], partitions: int, rf: int) -> None:
    with pytest.raises(AssignmentError):
        assign_replicas(brokers, partitions, rf)


@st.composite
def racked_layouts(draw: st.DrawFn) -> tuple[dict[int, str], int, int, int, int]:
    brokers = draw(st.lists(st.integers(min_value=0, max_value=1000), min_size=1, max_size=12, unique=True))
    rack_names = draw(st.lists(st.sampled_from("abcde"), min_size=len(brokers), max_size=len(brokers)))
    rf = draw(st.integers(min_value=1, max_value=len(brokers)))
    partitions = draw(st.integers(min_value=1, max_value=60))
    start, shift = draw(st.integers(0, 50)), draw(st.integers(0, 50))
    return dict(zip(brokers, rack_names, strict=True)), partitions, rf, start, shift


@given(racked_layouts())
def test_rack_aware_spreads_replicas_over_racks(layout: tuple[dict[int, str], int, int, int, int]) -> None:
    racks, partitions, rf, start, shift = layout
    result = assign_replicas(list(racks), partitions, rf, racks=racks, start_index=start, shift=shift)
    rack_count = len(set(racks.values()))
    assert len(result) == partitions
    for replicas in result:
        assert len(replicas) == rf and len(set(replicas)) == rf
        used = {racks[b] for b in replicas}
        assert len(used) == min(rf, rack_count)  # distinct racks first; every rack once rf exceeds them


def test_rack_aware_leaders_round_robin_over_alternated_brokers() -> None:
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    result = assign_replicas(list(racks), 12, 3, racks=racks)
    assert Counter(r[0] for r in result) == Counter({b: 2 for b in racks})
    # Kafka's alternated order a, b, c, a, b, c: leaders follow it, followers sit on the other racks.
    assert [r[0] for r in result[:6]] == [0, 2, 4, 1, 3, 5]
    assert all(len({racks[b] for b in r}) == 3 for r in result)


def test_rack_aware_refuses_brokers_without_racks() -> None:
    with pytest.raises(AssignmentError, match="Not all brokers have rack information"):
        assign_replicas([1, 2, 3], 3, 2, racks={1: "a", 2: "b", 3: None})


def test_no_racks_at_all_is_rack_unaware() -> None:
    assert assign_replicas([1, 2, 3], 3, 2, racks={1: None, 2: None, 3: None}) == assign_replicas([1, 2, 3], 3, 2)


@given(racked_layouts(), st.integers(min_value=1, max_value=4))
def test_rack_aware_leaders_even_over_whole_rounds(layout: tuple[dict[int, str], int, int, int, int],
                                                   rounds: int) -> None:
    racks, _, rf, start, shift = layout
    result = assign_replicas(list(racks), len(racks) * rounds, rf, racks=racks, start_index=start, shift=shift)
    assert Counter(r[0] for r in result) == Counter({b: rounds for b in racks})


def test_rack_alternated_matches_kafka() -> None:
    # AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated(racks) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated({b: r for b, r in racks.items() if b != 5}) == [0, 3, 1, 4, 2]
    # Partition 6 starts the second round, so the followers shift: 0, 4, 2 rather than 0, 3, 1.
    assert assign_replicas(list(racks), 7, 3, racks=racks) == [
        [0, 3, 1], [3, 1, 5], [1, 5, 4], [5, 4, 2], [4, 2, 0], [2, 0, 3], [0, 4, 2],
    ]


def test_rack_aware_shift_is_not_reduced_before_scaling_by_racks() -> None:
    # Kafka: follower step 1 + (shift * racks + k) % (n - 1) = 1 + (4 * 3) % 2 = 1 -> broker 1
    # (reducing shift mod n first would give 1 + 3 % 2 = 2 -> broker 2).
    assert assign_replicas([0, 1, 2], 1, 2, racks={0: "a", 1: "b", 2: "c"}, shift=4) == [[0, 1]]


def test_rack_aware_skips_brokers_that_already_hold_a_replica() -> None:
    # AdminRackAwareTest.testSkipBrokerWithReplicaAlreadyAssigned: rack a has 3 of 5 brokers, RF 4.
    racks = {0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}
    result = assign_replicas(list(racks), 6, 4, racks=racks, start_index=2, shift=2)
    assert all(len(set(r)) == 4 and {racks[b] for b in r} == {"a", "b", "c"} for r in result)


def test_missing_racks_can_fall_back_to_rack_unaware() -> None:
    racks = {1: "a", 2: "b", 3: None}
    assert assign_replicas([1, 2, 3], 6, 2, racks=racks, ignore_missing_racks=True, start_index=1, shift=2) == \
        assign_replicas([1, 2, 3], 6, 2, start_index=1, shift=2)
    # A broker absent from the mapping has no rack either.
    with pytest.raises(AssignmentError, match="Not all brokers have rack information"):
        assign_replicas([1, 2, 3], 3, 2, racks={1: "a", 2: "b"})


@pytest.mark.parametrize(("partitions", "rf"), [(1, 4), (0, 1), (1, 0)])
def test_impossible_rack_aware_requests_raise(partitions: int, rf: int) -> None:
    with pytest.raises(AssignmentError):
        assign_replicas([1, 2, 3], partitions, rf, racks={1: "a", 2: "b", 3: "b"})
