"""Decide what a cluster's brokers need next: a pure ``plan(desired, observed) -> actions``.

No Django and no I/O: reconcile builds the views from the database, the agents'
reports and the dataplane's metadata store, calls :func:`plan_nodes`, and
carries out the actions, each idempotent. Running a plan's actions and planning
again converges; a plan of a converged cluster is empty (resync aside).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AgentView:
    host: str
    rack: str
    live: bool
    port_min: int
    port_max: int
    used_ports: frozenset[int]
    nodes: int  # nodes of every cluster on this host
    # Silent for longer than the deployment's SLUICE_AGENT_LOST_SECONDS: the host is gone for good, its nodes are
    # replaced elsewhere. Not live is not lost: a host cut off for a while keeps its nodes and comes back.
    lost: bool = False


@dataclass(frozen=True, slots=True)
class NodeView:
    node_id: int
    host: str
    port: int
    rack: str
    retiring: bool
    process_state: str | None  # the agent's last report; "Removed" once it has stopped and purged it
    registered: bool  # holds a live lease in the dataplane's metadata store
    replicas: int = 0  # partition replicas assigned to it


@dataclass(frozen=True, slots=True)
class ClusterView:
    broker_count: int
    deleting: bool
    nodes: tuple[NodeView, ...]
    agents: tuple[AgentView, ...]
    resync: bool = False  # a periodic pass: re-send every idempotent step, in case an agent lost one


@dataclass(frozen=True, slots=True)
class Place:
    node_id: int
    host: str
    port: int
    rack: str


@dataclass(frozen=True, slots=True)
class Ensure:
    node_id: int


@dataclass(frozen=True, slots=True)
class Repoint:
    """Give a node another port of its host's pool (its port is held by some other process)."""

    node_id: int
    port: int


@dataclass(frozen=True, slots=True)
class Retire:
    node_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Drain:
    node_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Stop:
    node_id: int


@dataclass(frozen=True, slots=True)
class Forget:
    node_id: int


@dataclass(frozen=True, slots=True)
class DropMetadata:
    pass


@dataclass(frozen=True, slots=True)
class Finalize:
    pass


@dataclass(frozen=True, slots=True)
class NoCapacity:
    """Placement failed: not enough live agents with free ports. Reported, retried."""

    missing: int
    message: str


Action = Place | Ensure | Repoint | Retire | Drain | Stop | Forget | DropMetadata | Finalize | NoCapacity


def place(count: int, existing: Sequence[NodeView], agents: Sequence[AgentView]) -> list[Place | NoCapacity]:
    """Place ``count`` new nodes: spread over racks first, then hosts, then the least loaded host.

    Node ids are the smallest unused positive integers; ports the lowest free ones of the host's pool.
    """
    used_ids = {n.node_id for n in existing}
    per_rack = Counter(n.rack for n in existing if not n.retiring)
    per_host = Counter(n.host for n in existing if not n.retiring)
    taken = {a.host: set(a.used_ports) for a in agents}
    load = {a.host: a.nodes for a in agents}
    placed: list[Place | NoCapacity] = []
    next_id = 1
    for i in range(count):
        while next_id in used_ids:
            next_id += 1
        candidates = [a for a in agents if a.live and _free_port(a, taken[a.host]) is not None]
        if not candidates:
            live = sum(1 for a in agents if a.live)
            placed.append(NoCapacity(count - i, f"{count - i} broker(s) cannot be placed: {live} live agent(s), "
                                                f"none with a free port in its pool."))
            break
        agent = min(candidates, key=lambda a: (per_rack[a.rack or a.host], per_host[a.host], load[a.host], a.host))
        port = _free_port(agent, taken[agent.host])
        assert port is not None
        taken[agent.host].add(port)
        per_rack[agent.rack or agent.host] += 1
        per_host[agent.host] += 1
        load[agent.host] += 1
        used_ids.add(next_id)
        placed.append(Place(next_id, agent.host, port, agent.rack))
    return placed


def _free_port(agent: AgentView, used: set[int]) -> int | None:
    for port in range(agent.port_min, agent.port_max + 1):
        if port not in used:
            return port
    return None


def plan_nodes(view: ClusterView) -> list[Action]:
    """The next steps for the cluster's brokers (see the module docstring)."""
    actions: list[Action] = []
    if view.deleting:
        for node in view.nodes:
            actions.append(Forget(node.node_id) if node.process_state == "Removed" else Stop(node.node_id))
        if not view.nodes:
            actions += [DropMetadata(), Finalize()]
        return actions

    nodes = list(view.nodes)
    active = [n for n in nodes if not n.retiring]
    retiring = [n for n in nodes if n.retiring]
    lost_hosts = {a.host for a in view.agents if a.lost}
    stranded = [n for n in active if n.host in lost_hosts and not n.registered]
    if stranded and len(active) <= view.broker_count:
        # Replace the nodes of a lost host, as many as can be placed elsewhere now (none while no other host has
        # room: a control plane that is the one cut off, or a one-host deployment, retires nothing). Retired,
        # they are drained like a scale-in once their replacements have joined, then forgotten (no agent to stop).
        others = [a for a in view.agents if a.host not in lost_hosts]
        count = sum(isinstance(p, Place) for p in place(len(stranded), view.nodes, others))
        replaced = sorted(stranded, key=lambda n: n.node_id)[:count]
        if replaced:
            actions.append(Retire(tuple(n.node_id for n in replaced)))
            retiring += replaced
            active = [n for n in active if n not in replaced]
            nodes = [dataclasses.replace(n, retiring=True) if n in replaced else n for n in nodes]
    if len(active) > view.broker_count:
        # Scale in: the newest nodes go (the first ones usually hold the internal topics' leaders).
        excess = sorted(active, key=lambda n: n.node_id)[view.broker_count:]
        actions.append(Retire(tuple(n.node_id for n in excess)))
        retiring += excess
        active = [n for n in active if n not in excess]
    elif len(active) < view.broker_count:
        actions += place(view.broker_count - len(active), nodes, view.agents)

    agents = {a.host: a for a in view.agents}
    taken = {a.host: set(a.used_ports) for a in view.agents}
    for node in list(active):
        agent = agents.get(node.host)
        if node.process_state is None and (agent is None or not agent.live):
            # Placed on a host that went away before it ever ran the broker: nothing to keep, place again.
            actions.append(Forget(node.node_id))
            active.remove(node)
    for node in active:
        agent = agents.get(node.host)
        if node.process_state == "PortInUse" and agent is not None:
            port = _free_port(agent, taken[node.host] | {node.port})
            if port is not None:
                taken[node.host].add(port)
                actions += [Repoint(node.node_id, port), Ensure(node.node_id)]
                continue
        if view.resync or not node.registered:
            actions.append(Ensure(node.node_id))
    # A lost host's nodes are drained only once the cluster is whole again (their replicas need a new home).
    whole = len(active) == view.broker_count and all(n.registered for n in active) and not any(
        isinstance(a, Place) for a in actions)
    draining = tuple(n.node_id for n in retiring if n.replicas > 0 and (whole or n.host not in lost_hosts))
    if draining:
        actions.append(Drain(draining))
    for node in retiring:
        if node.replicas == 0:
            gone = node.process_state == "Removed" or node.host in lost_hosts
            actions.append(Forget(node.node_id) if gone else Stop(node.node_id))
    return actions


def converged(view: ClusterView) -> bool:
    """Every desired broker placed and registered, nothing retiring: the cluster's brokers are Ready."""
    active = [n for n in view.nodes if not n.retiring]
    return (not view.deleting and len(active) == view.broker_count and len(active) == len(view.nodes)
            and all(n.registered for n in active))
