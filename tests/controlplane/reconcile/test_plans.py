"""The pure planners of managed clusters: broker placement and steps, topic steps."""

from __future__ import annotations

import pytest

from controlplane.reconcile.node_plan import (
    AgentView,
    ClusterView,
    Drain,
    DropMetadata,
    Ensure,
    Finalize,
    Forget,
    NoCapacity,
    NodeView,
    Place,
    Repoint,
    Retire,
    Stop,
    converged,
    place,
    plan_nodes,
)
from controlplane.reconcile.topic_plan import (
    AddPartitions,
    Adopt,
    AlterConfigs,
    CreateTopic,
    DeleteTopic,
    DesiredTopic,
    Drift,
    ObservedTopic,
    pending,
    plan_topics,
)
from controlplane.reconcile.topic_plan import Forget as ForgetTopic


def agent(host: str, rack: str = "", *, live: bool = True, ports: tuple[int, int] = (9000, 9009),
          used: frozenset[int] = frozenset(), nodes: int = 0, lost: bool = False) -> AgentView:
    return AgentView(host, rack, live and not lost, ports[0], ports[1], used, nodes, lost)


def node(node_id: int, host: str = "h1", *, registered: bool = True, retiring: bool = False,
         state: str | None = "Running", replicas: int = 0, rack: str = "") -> NodeView:
    return NodeView(node_id, host, 9000 + node_id, rack, retiring, state, registered, replicas)


def test_placement_spreads_over_racks_then_hosts_with_the_lowest_free_ports() -> None:
    agents = [agent("h1", "r1"), agent("h2", "r1"), agent("h3", "r2", used=frozenset({9000}), nodes=1)]
    placed = place(3, [], agents)
    assert placed == [Place(1, "h1", 9000, "r1"), Place(2, "h3", 9001, "r2"), Place(3, "h2", 9000, "r1")]


def test_placement_skips_dead_and_full_agents_and_reports_what_it_could_not_place() -> None:
    agents = [agent("dead", live=False), agent("full", ports=(9000, 9000), used=frozenset({9000})), agent("ok")]
    placed = place(2, [node(1, "ok")], [*agents[:2], agent("ok", used=frozenset({9001}), nodes=1)])
    assert placed == [Place(2, "ok", 9000, ""), Place(3, "ok", 9002, "")]
    none = place(1, [], [agent("dead", live=False)])
    assert isinstance(none[0], NoCapacity) and none[0].missing == 1


def test_a_converged_cluster_plans_nothing_and_a_resync_re_ensures_every_broker() -> None:
    view = ClusterView(3, False, (node(1), node(2), node(3)), (agent("h1"),))
    assert plan_nodes(view) == [] and converged(view)
    assert plan_nodes(ClusterView(3, False, view.nodes, view.agents, resync=True)) == [Ensure(1), Ensure(2),
                                                                                        Ensure(3)]


def test_unregistered_brokers_are_ensured_and_missing_ones_placed() -> None:
    view = ClusterView(3, False, (node(1), node(2, registered=False)), (agent("h1", used=frozenset({9001, 9002})),))
    actions = plan_nodes(view)
    assert actions == [Place(3, "h1", 9000, ""), Ensure(2)]
    assert not converged(view)


def test_scale_in_retires_the_newest_drains_then_stops_then_forgets() -> None:
    agents = (agent("h1"),)
    four = (node(1), node(2), node(3), node(4, replicas=5))
    assert plan_nodes(ClusterView(3, False, four, agents)) == [Retire((4,)), Drain((4,))]
    draining = (*four[:3], node(4, retiring=True, replicas=2))
    assert plan_nodes(ClusterView(3, False, draining, agents)) == [Drain((4,))]
    drained = (*four[:3], node(4, retiring=True, replicas=0))
    assert plan_nodes(ClusterView(3, False, drained, agents)) == [Stop(4)]
    removed = (*four[:3], node(4, retiring=True, state="Removed"))
    assert plan_nodes(ClusterView(3, False, removed, agents)) == [Forget(4)]


def test_deletion_stops_every_broker_then_drops_metadata_and_the_row() -> None:
    agents = (agent("h1"),)
    assert plan_nodes(ClusterView(1, True, (node(1), node(2, state="Removed")), agents)) == [Stop(1), Forget(2)]
    assert plan_nodes(ClusterView(1, True, (), agents)) == [DropMetadata(), Finalize()]


def desired(name: str = "t", partitions: int = 3, rf: int = 1, configs: dict[str, str] | None = None,
            **flags: bool) -> DesiredTopic:
    return DesiredTopic(name, partitions, rf, configs or {}, **flags)


def test_topics_are_created_grown_reconfigured_and_deleted_to_match_the_spec() -> None:
    wanted = [desired("new"), desired("grow", 6), desired("conf", configs={"retention.ms": "1000"}),
              desired("gone", deleting=True), desired("never", deleting=True)]
    seen = {"grow": ObservedTopic("grow", 3, 1), "conf": ObservedTopic("conf", 3, 1, {"cleanup.policy": "compact"}),
            "gone": ObservedTopic("gone", 3, 1)}
    assert plan_topics(wanted, seen, correct_drift=True) == [
        CreateTopic("new", 3, 1, {}), AddPartitions("grow", 6),
        AlterConfigs("conf", {"retention.ms": "1000"}, ("cleanup.policy",)), DeleteTopic("gone"),
        ForgetTopic("never")]


def test_a_matching_cluster_plans_nothing() -> None:
    wanted = [desired("a", configs={"retention.ms": "5"}, applied=True), desired("b", managed=False)]
    seen = {"a": ObservedTopic("a", 3, 1, {"retention.ms": "5"}), "b": ObservedTopic("b", 3, 1)}
    assert plan_topics(wanted, seen, correct_drift=True) == []


def test_client_topics_are_adopted_and_followed() -> None:
    actions = plan_topics([desired("mine", managed=False)], {"mine": ObservedTopic("mine", 5, 1),
                                                             "theirs": ObservedTopic("theirs", 1, 1)},
                          correct_drift=True)
    assert actions == [Adopt(ObservedTopic("mine", 5, 1)), Adopt(ObservedTopic("theirs", 1, 1))]
    assert plan_topics([desired("mine", managed=False)], {}, correct_drift=True) == [ForgetTopic("mine")]


def test_drift_is_corrected_or_only_reported_by_policy() -> None:
    wanted = [desired("a", configs={"retention.ms": "5"}, applied=True)]
    seen = {"a": ObservedTopic("a", 3, 1, {"retention.ms": "7"})}
    corrected = plan_topics(wanted, seen, correct_drift=True)
    assert isinstance(corrected[0], Drift) and corrected[1] == AlterConfigs("a", {"retention.ms": "5"}, ())
    reported = plan_topics(wanted, seen, correct_drift=False)
    assert len(reported) == 1 and isinstance(reported[0], Drift) and pending(reported) == 0
    # Partitions cannot shrink: more than the spec is reported, never "fixed".
    grown = plan_topics([desired("a", 3, applied=True)], {"a": ObservedTopic("a", 5, 1)}, correct_drift=True)
    assert len(grown) == 1 and isinstance(grown[0], Drift) and "cannot shrink" in grown[0].detail
    # A managed topic a client deleted is recreated (or reported).
    assert isinstance(plan_topics([desired("a", applied=True)], {}, correct_drift=True)[1], CreateTopic)
    assert pending(plan_topics([desired("a", applied=True)], {}, correct_drift=False)) == 0


def test_a_broker_whose_port_is_taken_is_moved_to_a_free_port_of_its_host() -> None:
    view = ClusterView(2, False, (node(1), node(2, registered=False, state="PortInUse")),
                       (agent("h1", used=frozenset({9001, 9002})),))
    assert plan_nodes(view) == [Repoint(2, 9000), Ensure(2)]


def test_a_node_placed_on_a_host_that_died_before_starting_it_is_placed_again() -> None:
    view = ClusterView(1, False, (node(1, "gone", registered=False, state=None),),
                       (agent("gone", live=False), agent("h2")))
    assert plan_nodes(view) == [Forget(1)]
    # A node that did run keeps its place (its data is there): the agent restarts it when it is back.
    ran = ClusterView(1, False, (node(1, "gone", registered=False, state="Running"),), view.agents)
    assert plan_nodes(ran) == [Ensure(1)]


# A cluster of three on h1..h3 (racks r1..r3), h4 a spare in r4; node 3 lives on h3.
THREE = (node(1, "h1", rack="r1", replicas=4), node(2, "h2", rack="r2", replicas=4),
         node(3, "h3", rack="r3", replicas=4, registered=False))
HOSTS = (agent("h1", "r1", used=frozenset({9001})), agent("h2", "r2", used=frozenset({9002})))
SPARE = agent("h4", "r4")
REPLACEMENT = node(4, "h4", rack="r4")


@pytest.mark.parametrize(("nodes", "agents", "expected"), [
    # Cut off (silent, not yet lost): its node waits for it, nothing moves.
    (THREE, (*HOSTS, agent("h3", "r3", live=False), SPARE), [Ensure(3)]),
    # Lost for good: the node is retired and a replacement placed on the spare (another rack, the next id).
    (THREE, (*HOSTS, agent("h3", "r3", lost=True), SPARE), [Retire((3,)), Place(4, "h4", 9000, "r4")]),
    # Spares in r1 (h0) and r3 (h9): the replacement goes to the rack that lost its broker, not to a second in r1.
    (THREE, (*HOSTS, agent("h3", "r3", lost=True), agent("h0", "r1"), agent("h9", "r3")),
     [Retire((3,)), Place(4, "h9", 9000, "r3")]),
    # Nowhere to put a replacement (no spare, the others full): nothing is retired, the node waits.
    (THREE, (agent("h1", "r1", ports=(9001, 9001), used=frozenset({9001})),
             agent("h2", "r2", ports=(9002, 9002), used=frozenset({9002})), agent("h3", "r3", lost=True)),
     [Ensure(3)]),
    # A lost host whose broker still holds its lease (only the agent is gone) keeps it.
    ((*THREE[:2], node(3, "h3", rack="r3", replicas=4)), (*HOSTS, agent("h3", "r3", lost=True), SPARE), []),
    # Retired, but the replacement has not joined yet: no drain (its replicas would have nowhere to go).
    ((*THREE[:2], node(3, "h3", rack="r3", replicas=4, registered=False, retiring=True),
      node(4, "h4", rack="r4", registered=False, state=None)),
     (*HOSTS, agent("h3", "r3", lost=True), SPARE), [Ensure(4)]),
    # The replacement joined: drain the lost node's replicas ...
    ((*THREE[:2], node(3, "h3", rack="r3", replicas=4, registered=False, retiring=True), REPLACEMENT),
     (*HOSTS, agent("h3", "r3", lost=True), SPARE), [Drain((3,))]),
    # ... and once drained forget it: there is no agent to stop it.
    ((*THREE[:2], node(3, "h3", rack="r3", registered=False, retiring=True), REPLACEMENT),
     (*HOSTS, agent("h3", "r3", lost=True), SPARE), [Forget(3)]),
])
def test_a_lost_hosts_nodes_are_replaced_drained_and_forgotten(nodes: tuple[NodeView, ...],
                                                                agents: tuple[AgentView, ...],
                                                                expected: list[object]) -> None:
    assert plan_nodes(ClusterView(3, False, nodes, agents)) == expected
