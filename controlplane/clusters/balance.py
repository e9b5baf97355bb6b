"""Partition rebalance proposals: which replicas move where, and which replica leads.

Like a Cruise Control / Strimzi ``KafkaRebalance`` proposal, this only decides; a reassignment and a
preferred-leader election apply it elsewhere. It is pure (no Django, no I/O) so that one snapshot always gives
one proposal and every rule can be property-tested without a database.

What a proposal guarantees, strongest first:

1. Hard rules. Every replica on a broker in ``remove`` leaves it. A partition keeps its replication factor (RF)
   and never holds a broker twice. The rack rule below.
2. Replica counts on the remaining brokers are as even as the rack rule allows: within 1 of each other unless the
   racks themselves are too uneven. Among the plans that are that even: the fewest replica relocations, then the
   fewest bytes copied, then the fewest preferred leaders displaced.
3. Rack rule. A broker without a rack is a rack of its own (Cruise Control does the same, standing its node id in
   for the rack): nothing says two unlabelled brokers share a failure domain, and lumping them together would make
   every unlabelled cluster look like a single rack. With R distinct racks among the remaining brokers, a partition
   with RF <= R ends on RF distinct racks. When RF > R, no rack ends with more of its replicas than
   ``max(ceil(RF / R), the most one rack held before)``, so its spread never gets worse. No move ever takes a
   partition further from that.
4. Preferred leaders (``replicas[0]``) are as even as possible across the remaining brokers, by reordering first;
   data moves only for what no reordering can reach. A reordering is a ``Move`` that copies no bytes.
5. A partition already where it belongs does not move, so a proposal applied and proposed again is empty.

How. Replica placement is a min-cost flow (partitions -> brokers; a partition's per-rack cap bounds its edges into
each rack; the cost is lexicographic: replicas left on removed brokers, rack excess, sum of squared broker counts,
relocations, bytes). It runs on the broker graph rather than the partition graph. A greedy pass makes the bulk of
the moves (evacuate, repair racks, then the fullest broker to the emptiest, smallest partition first). Then
Bellman-Ford over the broker graph finds negative cycles: each edge x -> y is the cheapest single-partition move from
x to y, a super-sink closes the cycles that change counts, and moving a relocated replica back to a broker it came
from is a negative-cost edge. No negative cycle left means the flow is optimal. The same machinery chooses leaders
(partitions -> one of their replicas, sum of squared leader counts, then leaders changed). If reordering cannot even
out the leaders, a leader's replica moves to the broker short of leaders and one of that broker's follower replicas
moves back, so replica counts stay as they were.

Limits: the broker graph only sees cycles that move each partition once, so with racks a better plan that needs
two moves of one partition in one cycle can be missed. Rack caps, evacuations and leader swaps can cost more moves
than the plain lower bound (see ``tests/controlplane/test_balance.py``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import TypeAlias

__all__ = ["BrokerLoad", "BrokerSlot", "ImpossiblePlan", "Move", "Placement", "Proposal", "propose"]


@dataclass(frozen=True, slots=True)
class BrokerSlot:
    """A broker replicas may sit on. ``rack`` None makes the broker a rack of its own."""

    node_id: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class Placement:
    """A partition's replicas in preference order: ``replicas[0]`` is its preferred leader."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    size_bytes: int = 0


@dataclass(frozen=True, slots=True)
class Move:
    """One partition's reassignment. ``bytes_to_copy`` is its size times the replicas it gains."""

    topic: str
    partition: int
    current: tuple[int, ...]
    target: tuple[int, ...]
    bytes_to_copy: int

    @property
    def adding(self) -> tuple[int, ...]:
        return tuple(b for b in self.target if b not in self.current)

    @property
    def removing(self) -> tuple[int, ...]:
        return tuple(b for b in self.current if b not in self.target)

    @property
    def leader_change(self) -> bool:
        return self.current[0] != self.target[0]


@dataclass(frozen=True, slots=True)
class BrokerLoad:
    node_id: int
    replicas: int
    leaders: int
    bytes: int


@dataclass(frozen=True, slots=True)
class Proposal:
    """The moves, and every broker's load before and after them (ordered by node id)."""

    moves: tuple[Move, ...]
    before: tuple[BrokerLoad, ...]
    after: tuple[BrokerLoad, ...]

    @property
    def replica_moves(self) -> int:
        """Replicas relocated: each needs a full copy of its partition."""
        return sum(len(m.adding) for m in self.moves)

    @property
    def leader_moves(self) -> int:
        return sum(m.leader_change for m in self.moves)

    @property
    def bytes_to_copy(self) -> int:
        return sum(m.bytes_to_copy for m in self.moves)

    @property
    def is_empty(self) -> bool:
        return not self.moves


class ImpossiblePlan(ValueError):
    """The input cannot be planned; ``field`` names the argument at fault, as a validation error would."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def propose(brokers: Sequence[BrokerSlot], placements: Sequence[Placement], *,
            remove: Collection[int] = ()) -> Proposal:
    """A rebalance of ``placements`` over ``brokers`` that empties the brokers in ``remove``.

    Deterministic: the same input gives the same proposal, whatever the order of ``brokers`` and ``placements``.
    Raises ImpossiblePlan if the input is inconsistent or too few brokers would remain for a partition.
    """
    _validate(brokers, placements, remove)
    planner = _Planner(brokers, placements, frozenset(remove))
    planner.place_replicas()
    planner.place_leaders()
    return planner.proposal()


def _validate(brokers: Sequence[BrokerSlot], placements: Sequence[Placement], remove: Collection[int]) -> None:
    known: set[int] = set()
    for broker in brokers:
        if broker.node_id in known:
            raise ImpossiblePlan("brokers", f"Broker {broker.node_id} is listed twice.")
        known.add(broker.node_id)
    strangers = sorted(set(remove) - known)
    if strangers:
        raise ImpossiblePlan("remove", f"Brokers {strangers} are not in the cluster.")
    remaining = len(known - set(remove))
    seen: set[tuple[str, int]] = set()
    for p in sorted(placements, key=lambda p: (p.topic, p.partition)):
        name = f"{p.topic}-{p.partition}"
        if (p.topic, p.partition) in seen:
            raise ImpossiblePlan("placements", f"Partition {name} is listed twice.")
        seen.add((p.topic, p.partition))
        if not p.replicas or len(set(p.replicas)) != len(p.replicas):
            raise ImpossiblePlan("placements", f"Partition {name} needs one or more distinct replicas.")
        if not set(p.replicas) <= known:
            unknown = sorted(set(p.replicas) - known)
            raise ImpossiblePlan("placements", f"Partition {name} is on brokers not in the cluster: {unknown}.")
        if p.size_bytes < 0:
            raise ImpossiblePlan("placements", f"Partition {name} has a negative size.")
        if len(p.replicas) > remaining:
            field = "remove" if remove else "placements"
            raise ImpossiblePlan(field, f"Partition {name} has {len(p.replicas)} replicas but only {remaining} "
                                        f"brokers would remain.")


RackKey: TypeAlias = str | int  # a rack's name, or the node id of a broker without one (a rack of its own)
Cost: TypeAlias = tuple[int, ...]  # lexicographic: compared and added component by component
Hop: TypeAlias = tuple[Cost, int]  # the cheapest single-partition move on a broker pair, and that partition
Edge: TypeAlias = tuple[int, int, Cost]  # from node, to node, cost; node len(nodes) is the super-sink
Graph: TypeAlias = tuple[list[int], list[Edge]]

# Replica cost components (the order is the priority): replicas on removed brokers, replicas over their rack cap,
# sum of squared replica counts, relocations, bytes copied, preferred leaders displaced.
_EVACUATE, _RACK, _SPREAD, _MOVES, _BYTES, _LEADS = range(6)


def _add(a: Cost, b: Cost) -> Cost:
    return tuple(x + y for x, y in zip(a, b, strict=True))


def _rack_cap(replicas: Sequence[int], racks: int, rack_of: dict[int, RackKey]) -> int:
    """Most replicas of one partition a rack may end with: 1 when racks suffice, else never worse than before."""
    if racks >= len(replicas):
        return 1
    before = max(Counter(rack_of[b] for b in replicas).values())
    return max(math.ceil(len(replicas) / racks), before)


def _negative_cycle(size: int, edges: list[Edge]) -> list[Edge] | None:
    """A negative-cost cycle (its edges in order) among nodes 0..size-1, or None. Bellman-Ford from all nodes."""
    if not edges:
        return None
    dist: list[Cost] = [tuple(0 for _ in edges[0][2])] * size
    pred: list[Edge | None] = [None] * size
    changed = -1
    for _ in range(size):
        changed = -1
        for edge in edges:
            u, v, w = edge
            d = _add(dist[u], w)
            if d < dist[v]:
                dist[v], pred[v], changed = d, edge, v
        if changed < 0:
            return None
    node = changed  # still relaxing after `size` rounds: a negative cycle leads here; walking back enters it
    for _ in range(size):
        edge = pred[node]
        assert edge is not None
        node = edge[0]
    cycle: list[Edge] = []
    at = node
    while True:
        edge = pred[at]
        assert edge is not None
        cycle.append(edge)
        at = edge[0]
        if at == node:
            break
    cycle.reverse()
    return cycle


class _Planner:
    """One propose() call's mutable state. Partitions are indexed in (topic, partition) order."""

    def __init__(self, brokers: Sequence[BrokerSlot], placements: Sequence[Placement],
                 removed: frozenset[int]) -> None:
        self.nodes = sorted(b.node_id for b in brokers)
        self.removed = removed
        self.remaining = [b for b in self.nodes if b not in removed]
        self.rack_of: dict[int, RackKey] = {b.node_id: b.node_id if b.rack is None else b.rack for b in brokers}
        self.parts = sorted(placements, key=lambda p: (p.topic, p.partition))
        self.orig = [p.replicas for p in self.parts]
        self.orig_set = [frozenset(r) for r in self.orig]
        self.orig_lead = [r[0] for r in self.orig]
        self.size = [p.size_bytes for p in self.parts]
        self.cur = [list(r) for r in self.orig]
        self.lead = list(self.orig_lead)  # leadership follows its slot when the leader's replica moves
        racks = len({self.rack_of[b] for b in self.remaining})
        self.cap = [_rack_cap(r, racks, self.rack_of) for r in self.orig]
        self.rack_count = [Counter(self.rack_of[b] for b in r) for r in self.orig]
        self.excess = {i for i, counts in enumerate(self.rack_count) if max(counts.values()) > self.cap[i]}
        self.on: dict[int, set[int]] = {b: set() for b in self.nodes}
        self.moved_in: dict[int, set[int]] = {b: set() for b in self.nodes}  # on b now, not at the start
        self.away: dict[int, set[int]] = {b: set() for b in self.nodes}  # on b at the start, not now
        for i, replicas in enumerate(self.orig):
            for b in replicas:
                self.on[b].add(i)
        # A broker's original replicas, cheapest to move first: smallest, then followers before the leader.
        self.by_cost = {b: sorted(self.on[b], key=self._move_order(b)) for b in self.nodes}
        self.led: dict[int, set[int]] = {b: set() for b in self.nodes}
        self.led_new: dict[int, set[int]] = {b: set() for b in self.nodes}  # led by b now, not at the start
        self.orig_led: dict[int, list[int]] = {b: [] for b in self.nodes}
        for i, b in enumerate(self.orig_lead):
            self.led[b].add(i)
            self.orig_led[b].append(i)
        self.journal: list[tuple[str, int, int, int]] | None = None  # operations to rewind a trial

    def _move_order(self, broker: int) -> Callable[[int], tuple[int, bool, int]]:
        return lambda i: (self.size[i], self.orig_lead[i] == broker, i)

    # -- replicas -------------------------------------------------------------------------------------------------

    def hop_cost(self, i: int, x: int, y: int) -> Cost | None:
        """The cost of moving partition i's replica from x to y, or None if the move is not allowed."""
        replicas = self.cur[i]
        if y in replicas or y in self.removed:
            return None
        rx, ry = self.rack_of[x], self.rack_of[y]
        rack = 0
        if rx != ry:
            counts, cap = self.rack_count[i], self.cap[i]
            rack = (counts[ry] >= cap) - (counts[rx] > cap)
            if rack > 0 and x not in self.removed:  # only an evacuation may, when nothing else is left
                return None
        start = self.orig_set[i]
        moves = (y not in start) - (x not in start)
        leader = self.orig_lead[i]
        return (0, rack, 0, moves, moves * self.size[i], (x == leader) - (y == leader))

    def hop(self, i: int, x: int, y: int) -> None:
        """Move partition i's replica from x to y, in place: y takes x's slot, and its leadership if it had it."""
        if self.journal is not None:
            self.journal.append(("hop", i, x, y))
        replicas = self.cur[i]
        replicas[replicas.index(x)] = y
        self.on[x].remove(i)
        self.on[y].add(i)
        start = self.orig_set[i]
        if x in start:
            self.away[x].add(i)
        else:
            self.moved_in[x].remove(i)
        if y in start:
            self.away[y].remove(i)
        else:
            self.moved_in[y].add(i)
        counts = self.rack_count[i]
        counts[self.rack_of[x]] -= 1
        counts[self.rack_of[y]] += 1
        if max(counts.values()) > self.cap[i]:
            self.excess.add(i)
        else:
            self.excess.discard(i)
        if self.lead[i] == x:
            self._pass(i, x, y)

    def best_hop(self, x: int, y: int, exclude: Collection[int] = ()) -> Hop | None:
        """The cheapest partition to move from x to y (ties: lowest index), without scanning all of x."""
        on_x = self.on[x]
        best: Hop | None = None
        # Rack repairs, replicas that arrived during planning, and original replicas returning to y: few, all checked.
        few = chain((i for i in self.excess if i in on_x), self.moved_in[x], (i for i in self.away[y] if i in on_x))
        for i in few:
            cost = self.hop_cost(i, x, y)
            if cost is not None and i not in exclude and (best is None or (cost, i) < best):
                best = (cost, i)
        if best is not None and best[0][_RACK] <= 0 and best[0][_MOVES] <= 0:
            return best  # nothing left costs less than a new relocation
        # Original replicas new to y: one relocation each, so the first allowed in move order is the cheapest.
        fallback: Hop | None = None
        for i in self.by_cost[x]:
            if i not in on_x or i in exclude or y in self.orig_set[i]:
                continue
            cost = self.hop_cost(i, x, y)
            if cost is None:
                continue
            if cost[_RACK] <= 0:
                if best is None or (cost, i) < best:
                    best = (cost, i)
                break
            if fallback is None:
                fallback = (cost, i)  # an evacuation that must crowd a rack
        if fallback is not None and (best is None or fallback < best):
            best = fallback
        return best

    def place_replicas(self) -> None:
        self._evacuate()
        self._repair_racks()
        self._even_out(self.remaining, self.on, self.best_hop, self.hop)
        self._cancel_cycles(self._replica_graph, self.best_hop, self.hop)

    def _evacuate(self) -> None:
        for x in sorted(self.removed):
            for i in sorted(self.on[x], key=self._move_order(x)):
                best: tuple[tuple[int, ...], int] | None = None
                for y in self.remaining:
                    cost = self.hop_cost(i, x, y)
                    if cost is not None:
                        key = (cost[_RACK], len(self.on[y]), *cost[_MOVES:], y)
                        if best is None or key < best[0]:
                            best = (key, y)
                assert best is not None, "validated: some remaining broker lacks this partition"
                self.hop(i, x, best[1])

    def _repair_racks(self) -> None:
        for i in sorted(self.excess):
            while i in self.excess:
                best: tuple[tuple[int, ...], int, int] | None = None
                for x in self.cur[i]:
                    for y in self.remaining:
                        cost = self.hop_cost(i, x, y)
                        if cost is not None and cost[_RACK] < 0:
                            key = (len(self.on[y]) - len(self.on[x]), *cost[_MOVES:], x, y)
                            if best is None or key < best[0]:
                                best = (key, x, y)
                if best is None:
                    break  # the negative-cycle pass may still find a way through other brokers
                self.hop(i, best[1], best[2])

    @staticmethod
    def _even_out(brokers: list[int], holding: dict[int, set[int]],
                  best: Callable[[int, int], Hop | None], move: Callable[[int, int, int], None]) -> None:
        """Greedy bulk: the fullest broker gives its cheapest movable item to the emptiest, until within 1."""
        while True:
            order = sorted(brokers, key=lambda b: (len(holding[b]), b))
            found: tuple[int, int, int] | None = None
            for x in reversed(order):
                for y in order:
                    if len(holding[x]) - len(holding[y]) < 2:
                        break
                    hop = best(x, y)
                    if hop is not None:
                        found = (hop[1], x, y)
                        break
                if found is not None:
                    break
            if found is None:
                return
            move(*found)

    def _replica_graph(self) -> Graph:
        nodes = self.nodes
        index = {b: k for k, b in enumerate(nodes)}
        sink = len(nodes)
        edges: list[Edge] = []
        for x in nodes:
            count = len(self.on[x])
            if count == 0:
                continue
            take = (-1, 0, 0, 0, 0, 0) if x in self.removed else (0, 0, 1 - 2 * count, 0, 0, 0)
            edges.append((sink, index[x], take))
            for y in self.remaining:
                hop = self.best_hop(x, y) if y != x else None
                if hop is not None:
                    edges.append((index[x], index[y], hop[0]))
        for y in self.remaining:
            edges.append((index[y], sink, (0, 0, 2 * len(self.on[y]) + 1, 0, 0, 0)))
        return nodes, edges

    def _cancel_cycles(self, graph: Callable[[], Graph], best: Callable[[int, int, Collection[int]], Hop | None],
                       move: Callable[[int, int, int], None]) -> None:
        """Apply negative cycles until none is left; each hop re-picks its partition so a cycle moves each once."""
        while True:
            nodes, edges = graph()
            cycle = _negative_cycle(len(nodes) + 1, edges)
            if cycle is None:
                return
            sink = len(nodes)
            total: Cost = tuple(0 for _ in cycle[0][2])
            done: list[tuple[int, int, int]] = []
            for u, v, cost in cycle:
                if sink in (u, v):
                    total = _add(total, cost)
                    continue
                hop = best(nodes[u], nodes[v], {i for i, _, _ in done})
                if hop is None:
                    break
                move(hop[1], nodes[u], nodes[v])
                done.append((hop[1], nodes[u], nodes[v]))
                total = _add(total, hop[0])
            else:
                if total < tuple(0 for _ in total):
                    continue
            for i, x, y in reversed(done):  # the cycle reused a partition and lost its gain: undo, and stop
                move(i, y, x)
            return

    # -- leaders --------------------------------------------------------------------------------------------------

    def pass_lead(self, i: int, x: int, y: int) -> None:
        if self.journal is not None:
            self.journal.append(("lead", i, x, y))
        self._pass(i, x, y)

    def _pass(self, i: int, x: int, y: int) -> None:
        self.lead[i] = y
        self.led[x].remove(i)
        self.led_new[x].discard(i)
        self.led[y].add(i)
        if y != self.orig_lead[i]:
            self.led_new[y].add(i)

    def best_lead(self, x: int, y: int, exclude: Collection[int] = ()) -> Hop | None:
        """The partition led by x and also on y whose leadership is cheapest to hand to y."""
        best: Hop | None = None
        for i in self.led_new[x]:  # leadership that already changed: passing it on costs nothing, home saves one
            if y in self.cur[i] and i not in exclude:
                cost = (0, -1 if y == self.orig_lead[i] else 0)
                if best is None or (cost, i) < best:
                    best = (cost, i)
        if best is None:
            for i in self.orig_led[x]:
                if self.lead[i] == x and y in self.cur[i] and i not in exclude:
                    return (0, 1), i
        return best

    def place_leaders(self) -> None:
        self._settle_leaders()
        while self._trade_for_leaders():
            pass

    def _settle_leaders(self) -> None:
        self._even_out(self.remaining, self.led, self.best_lead, self.pass_lead)
        self._cancel_cycles(self._leader_graph, self.best_lead, self.pass_lead)

    def _leader_graph(self) -> Graph:
        nodes = self.remaining
        sink = len(nodes)
        edges: list[Edge] = []
        for u, x in enumerate(nodes):
            count = len(self.led[x])
            if count:
                edges.append((sink, u, (1 - 2 * count, 0)))
            edges.append((u, sink, (2 * count + 1, 0)))
            for v, y in enumerate(nodes):
                hop = self.best_lead(x, y) if y != x else None
                if hop is not None:
                    edges.append((u, v, hop[0]))
        return nodes, edges

    def _leader_spread(self) -> int:
        return sum(len(self.led[b]) ** 2 for b in self.remaining)

    def _trade_for_leaders(self) -> bool:
        """Data moves for what reordering cannot reach, cheapest first; keeps the first trade after which
        reordering evens the leaders out further.

        A broker with the most leaders moves one leader's replica to a broker with fewer, and, unless that leaves
        replica counts no less even, takes one of that broker's replicas back. Taking back a replica the plan had
        moved there undoes a move, so a trade can cost nothing.
        """
        leaders = [len(self.led[b]) for b in self.remaining]
        if max(leaders, default=0) - min(leaders, default=0) <= 1:
            return False
        trades: set[tuple[Cost, tuple[tuple[int, int, int], ...]]] = set()
        for x in self.remaining:
            for y in self.remaining:
                if x == y:
                    continue
                # A leader's replica carries its leadership; any replica may free a slot or undo an earlier move.
                back = self._cheapest((j, y, x) for j in self.on[y])
                for there in (self._cheapest((i, x, y) for i in self.led[x]),
                              self._cheapest((i, x, y) for i in self.on[x])):
                    if there is None:
                        continue
                    if len(self.on[x]) > len(self.on[y]):  # the two counts trade places at worst
                        trades.add((there[0], ((there[1], x, y),)))
                    if back is not None:
                        trades.add((_add(there[0], back[0]), ((there[1], x, y), (back[1], y, x))))
        spread = self._leader_spread()
        for _, hops in sorted(trades):
            self.journal = []
            for i, x, y in hops:
                self.hop(i, x, y)
            self._settle_leaders()
            if self._leader_spread() < spread:
                self.journal = None
                return True
            self._rewind()
        return False

    def _rewind(self) -> None:
        journal, self.journal = self.journal or [], None
        for kind, i, x, y in reversed(journal):
            if kind == "hop":
                self.hop(i, y, x)
            else:
                self.pass_lead(i, y, x)

    def _cheapest(self, hops: Iterable[tuple[int, int, int]]) -> Hop | None:
        """The cheapest of ``hops`` that keeps every rack cap."""
        best: Hop | None = None
        for i, x, y in hops:
            cost = self.hop_cost(i, x, y)
            if cost is not None and cost[_RACK] <= 0 and (best is None or (cost, i) < best):
                best = (cost, i)
        return best

    # -- result ---------------------------------------------------------------------------------------------------

    def target(self, i: int) -> tuple[int, ...]:
        """Canonical order: kept replicas keep their slots, new ones fill vacated slots, the leader goes first."""
        start, now = self.orig[i], set(self.cur[i])
        fresh = iter([b for b in self.cur[i] if b not in self.orig_set[i]])
        slots = [b if b in now else next(fresh) for b in start]
        leader = self.lead[i]
        return (leader, *(b for b in slots if b != leader))

    def proposal(self) -> Proposal:
        moves: list[Move] = []
        targets: list[tuple[int, ...]] = []
        for i, p in enumerate(self.parts):
            target = self.target(i)
            targets.append(target)
            if target != p.replicas:
                gained = len(set(target) - self.orig_set[i])
                moves.append(Move(p.topic, p.partition, p.replicas, target, p.size_bytes * gained))
        return Proposal(tuple(moves), self._loads(self.orig), self._loads(targets))

    def _loads(self, assignment: Sequence[tuple[int, ...]]) -> tuple[BrokerLoad, ...]:
        replicas = dict.fromkeys(self.nodes, 0)
        leaders = dict.fromkeys(self.nodes, 0)
        stored = dict.fromkeys(self.nodes, 0)
        for i, brokers in enumerate(assignment):
            leaders[brokers[0]] += 1
            for b in brokers:
                replicas[b] += 1
                stored[b] += self.size[i]
        return tuple(BrokerLoad(b, replicas[b], leaders[b], stored[b]) for b in self.nodes)
