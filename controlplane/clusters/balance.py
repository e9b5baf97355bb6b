"""Partition rebalance proposals: which replicas move where, and which replica leads.

Like a Cruise Control / Strimzi ``KafkaRebalance`` proposal, this only decides; a reassignment and a
preferred-leader election apply it elsewhere. It is pure (no Django, no I/O) so that one snapshot always gives
one proposal, and every rule can be property-tested without a database.

What a proposal guarantees, strongest first:

1. Every replica on a broker in ``remove`` leaves it. A partition keeps its replication factor (RF) and never
   holds a broker twice.
2. Rack rule. A broker without a rack is a rack of its own (Cruise Control also stands the broker id in for a
   missing rack): nothing says two unlabelled brokers share a failure domain, and lumping them together would make
   every unlabelled cluster look like one rack. With R distinct racks among the remaining brokers, a partition with
   RF <= R ends on RF distinct racks; with RF > R no rack ends with more of its replicas than
   ``max(ceil(RF / R), the most one rack held before)``, so its spread never gets worse. No move takes a rack past
   that cap, except an evacuation with nowhere else to go (possible only with RF > 3).
3. Replica counts on the remaining brokers are as even as the rack rule allows (least sum of squares, so within 1
   whenever that is possible), with the fewest replica relocations, then the fewest bytes copied.
4. Preferred leaders (``replicas[0]``) as even as possible, by reordering replicas (a ``Move`` that copies
   nothing) and moving data only for what no reordering can reach.
5. Nothing moves without gain, so a proposal applied and proposed again is empty.

How. Replica placement is a min-cost flow from partitions to brokers (a partition's rack cap bounds its flow into
each rack) with a lexicographic cost: replicas left on removed brokers, rack excess, sum of squared counts,
relocations, bytes. It is solved on the broker graph rather than the partition graph. A greedy pass makes the
bulk of the moves: evacuate, repair racks, then the cheapest move from a fullest broker to an emptiest. Then
Bellman-Ford cancels negative cycles: an edge x -> y is the cheapest single-partition move from x to y (moving a
relocated replica back where it came from costs -1 relocation), and a super-sink closes the cycles that change
counts. When none is left the flow is optimal. Leaders are the same problem (partitions -> one of their replicas;
sum of squared leader counts, then leaders changed), solved the same way on the final placement. If reordering
cannot even them out, trades of one or two replica moves between a pair of brokers are tried cheapest first; the
first after which reordering does better is kept.

The plain lower bound on relocations (replicas on removed brokers, plus each remaining broker's excess over a
target of floor or ceil of the mean, ceilings going to the fullest) is always met when nothing is removed and no
rack rule binds, except for leader trades; and those never happen when all partitions share one RF. Why: a
fullest broker always holds a partition an emptiest lacks, so every greedy move lowers the bound; and with one RF
and even replica counts, the fractional split (each replica leads 1/RF of its partition) is even, and rounds to an
even integral one. Otherwise the bound can be out of reach: a removed broker's partition may already be on every
broker short of replicas; rack caps force repairs and detours; leaders that reordering cannot balance cost trades.
The placement is still the optimal flow, except that the broker graph sees only cycles that move each partition
once; leader trades are a local search.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
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

# Replica cost components, in priority order: replicas on removed brokers, replicas over their rack cap, sum of
# squared replica counts, relocations, bytes copied. Leaders are settled afterwards, on the placement this gives.
_EVACUATE, _RACK, _SPREAD, _MOVES, _BYTES = range(5)


_FREE: Cost = (0, 0, 0, 0, 0)
_KINDS = _ANY, _LEADER, _FOLLOWER = range(3)  # which replicas of a broker a move search may pick


def _add(a: Cost, b: Cost) -> Cost:
    return tuple(x + y for x, y in zip(a, b, strict=True))


def _rack_cap(replicas: Sequence[int], racks: int, rack_of: dict[int, RackKey]) -> int:
    """Most replicas of one partition a rack may end with: 1 when racks suffice, else never worse than before."""
    if racks >= len(replicas):
        return 1
    before = max(Counter(rack_of[b] for b in replicas).values())
    return max(math.ceil(len(replicas) / racks), before)


def _negative_cycle(size: int, edges: list[Edge]) -> list[Edge] | None:
    """A negative-cost cycle (its edges in order) among nodes 0..size-1, or None. Bellman-Ford from all nodes.

    Costs are packed into one integer per edge (mixed radix, wide enough for walks of ``size`` edges), which
    orders them exactly as the tuples and compares far faster.
    """
    if not edges:
        return None
    width = len(edges[0][2])
    weights = [1] * width
    for k in range(width - 2, -1, -1):
        bound = max(abs(w[k + 1]) for _, _, w in edges)
        weights[k] = weights[k + 1] * (2 * size * bound + 1)
    packed = [(u, v, sum(c * m for c, m in zip(w, weights, strict=True))) for u, v, w in edges]
    dist = [0] * size
    pred = [-1] * size
    changed = -1
    for _ in range(size):
        changed = -1
        for k, (u, v, w) in enumerate(packed):
            if dist[u] + w < dist[v]:
                dist[v], pred[v], changed = dist[u] + w, k, v
        if changed < 0:
            return None
    node = changed  # still relaxing after `size` rounds: a negative cycle leads here; walking back enters it
    for _ in range(size):
        node = packed[pred[node]][0]
    cycle: list[Edge] = []
    at = node
    while True:
        edge = edges[pred[at]]
        cycle.append(edge)
        at = edge[0]
        if at == node:
            break
    cycle.reverse()
    return cycle


class _Scan:
    """Candidates kept per broker in a fixed order, searched per (broker, target) for the first that qualifies.

    A search resumes where the last one for the same pair stopped: what it passed over was ruled out by the state of
    those partitions, and a partition whose state changes is handed back (revived) to every search that had passed
    it. Repeated searches so cost what changed, not the length of the list; without this, a scale-out that sends
    thousands of replicas to one broker would be quadratic.

    Searches of different kinds (any replica, a leader's, a follower's) keep their own place.
    """

    def __init__(self, nodes: Iterable[int]) -> None:
        self.order: dict[int, list[int]] = {b: [] for b in nodes}
        self.at: dict[int, dict[int, int]] = {b: {} for b in self.order}  # partition -> position of its live entry
        self.resume: dict[int, dict[tuple[int, int], int]] = {b: {} for b in self.order}  # x: (y, kind) -> position
        self.revived: dict[tuple[int, int, int], set[int]] = {}

    def add(self, x: int, i: int) -> None:
        self.at[x][i] = len(self.order[x])
        self.order[x].append(i)

    def drop(self, x: int, i: int) -> None:
        self.at[x].pop(i, None)

    def revive(self, x: int, i: int) -> None:
        at = self.at[x].get(i)
        if at is not None:
            for (y, kind), resume in self.resume[x].items():
                if resume > at:
                    self.revived.setdefault((x, y, kind), set()).add(i)

    def first(self, x: int, y: int, kind: int, qualify: Callable[[int], Cost | None],
              exclude: Collection[int]) -> Hop | None:
        """The earliest live entry of x that qualifies for y (its cost, partition), skipping ``exclude``."""
        key = (x, y, kind)
        order, live = self.order[x], self.at[x]
        found: tuple[int, int, Cost] | None = None
        revived = self.revived.get(key)
        if revived:
            for i in list(revived):
                if i in exclude:
                    continue
                at = live.get(i)
                cost = None if at is None else qualify(i)
                if at is None or cost is None:
                    revived.discard(i)
                elif found is None or at < found[0]:
                    found = (at, i, cost)
        at = resume = self.resume[x].get((y, kind), 0)
        settled = True  # every entry passed so far was ruled out by its partition's state
        while at < len(order) and (found is None or at < found[0]):
            i = order[at]
            if i in exclude:
                settled = False
            elif live.get(i) == at:
                cost = qualify(i)
                if cost is not None:
                    found = (at, i, cost)
                    break
            at += 1
            if settled:
                resume = at
        if resume:
            self.resume[x][y, kind] = resume
        return None if found is None else (found[2], found[1])


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
        self.journal: list[tuple[str, int, int, int]] | None = None  # operations to rewind a trial

        # Replica indexes. Whatever depends on a partition's state is refreshed by _unindex/_index around a hop.
        self.on: dict[int, set[int]] = {b: set() for b in self.nodes}
        self.blocked: dict[int, Counter[RackKey]] = {b: Counter() for b in self.nodes}  # on b, rack r at cap
        self.away_on: dict[tuple[int, int], set[int]] = {}  # (b, g): on b now, and on g at the start but not now
        self.originals = _Scan(self.nodes)  # a broker's original replicas, cheapest to move first
        self.arrivals = _Scan(self.nodes)  # replicas that arrived during planning, in order of arrival
        self.hops: dict[int, dict[int, Hop | None]] = {}  # cached best_hop rows, by source broker
        # Leader indexes.
        self.led: dict[int, set[int]] = {b: set() for b in self.nodes}
        self.led_home: dict[tuple[int, int], set[int]] = {}  # (b, h): led by b, originally by h
        self.led_orig = _Scan(self.nodes)  # partitions b leads at the start
        self.led_new = _Scan(self.nodes)  # partitions b came to lead during planning
        self.leads: dict[int, dict[int, Hop | None]] = {}  # cached best_lead rows

        for i, replicas in enumerate(self.orig):
            self.led[replicas[0]].add(i)
            self.led_orig.add(replicas[0], i)
            for b in replicas:
                self.on[b].add(i)
            self._reindex(i, 1)
        for b in self.nodes:
            for i in sorted(self.on[b], key=self._move_order(b)):
                self.originals.add(b, i)

    def _move_order(self, broker: int) -> Callable[[int], tuple[int, bool, int]]:
        """Cheapest to move off ``broker`` first: the smallest, then a follower before the leader."""
        return lambda i: (self.size[i], self.orig_lead[i] == broker, i)

    # -- replicas -------------------------------------------------------------------------------------------------

    def hop_cost(self, i: int, x: int, y: int) -> Cost | None:
        """The cost of moving partition i's replica from x to y, or None if the move is not allowed.

        A move may only enter a rack below the partition's cap; an evacuation may crowd one if nothing else is left.
        """
        if y in self.cur[i] or y in self.removed:
            return None
        rx, ry = self.rack_of[x], self.rack_of[y]
        rack = 0
        if rx != ry:
            counts, cap = self.rack_count[i], self.cap[i]
            rack = -(counts[rx] > cap)
            if counts[ry] >= cap:
                if x not in self.removed:
                    return None
                rack += 1
        start = self.orig_set[i]
        moves = (y not in start) - (x not in start)
        return (0, rack, 0, moves, moves * self.size[i])

    def hop(self, i: int, x: int, y: int) -> None:
        """Move partition i's replica from x to y, in place: y takes x's slot, and its leadership if it had it."""
        if self.journal is not None:
            self.journal.append(("hop", i, x, y))
        self._unindex(i)
        replicas = self.cur[i]
        replicas[replicas.index(x)] = y
        self.on[x].remove(i)
        self.on[y].add(i)
        start = self.orig_set[i]
        if x not in start:
            self.arrivals.drop(x, i)
        if y not in start:
            self.arrivals.add(y, i)
        counts = self.rack_count[i]
        counts[self.rack_of[x]] -= 1
        counts[self.rack_of[y]] += 1
        if max(counts.values()) > self.cap[i]:
            self.excess.add(i)
        else:
            self.excess.discard(i)
        self._index(i)
        if self.lead[i] == x:
            self._pass(i, x, y)

    def _unindex(self, i: int) -> None:
        self._reindex(i, -1)

    def _index(self, i: int) -> None:
        self._reindex(i, 1)
        self._revive(i)

    def _revive(self, i: int) -> None:
        """Partition i changed: every search that passed over it must look again."""
        for b in self.cur[i]:
            scan = self.originals if b in self.orig_set[i] else self.arrivals
            scan.revive(b, i)
        lead = self.lead[i]
        (self.led_orig if lead == self.orig_lead[i] else self.led_new).revive(lead, i)

    def _reindex(self, i: int, sign: int) -> None:
        counts, cap = self.rack_count[i], self.cap[i]
        full = [r for r, c in counts.items() if c >= cap]
        gone = [g for g in self.orig[i] if g not in self.cur[i]]
        for b in self.cur[i]:
            blocked = self.blocked[b]
            for r in full:
                blocked[r] += sign
            for g in gone:
                away = self.away_on.setdefault((b, g), set())
                if sign > 0:
                    away.add(i)
                else:
                    away.discard(i)
            self.hops.pop(b, None)
        self.leads.pop(self.lead[i], None)

    def best_hop(self, x: int, y: int, exclude: Collection[int] = (), kind: int = _ANY) -> Hop | None:
        """The cheapest partition to move from x to y (ties in a fixed order), or None.

        ``kind`` narrows it to a partition x leads (_LEADER) or one it does not (_FOLLOWER).
        """
        if exclude or kind != _ANY:
            return self._best_hop(x, y, exclude, kind)
        row = self.hops.setdefault(x, {})
        if y not in row:
            row[y] = self._best_hop(x, y, (), kind)
        return row[y]

    def _best_hop(self, x: int, y: int, exclude: Collection[int], kind: int) -> Hop | None:
        if x == y or not self.on[x] or y in self.removed:
            return None
        if self.rack_of[x] != self.rack_of[y] and self.blocked[x][self.rack_of[y]] == len(self.on[x]):
            return None  # every partition on x is already at its cap in y's rack
        on_x, lead = self.on[x], self.lead

        def fits(i: int) -> bool:
            return kind == _ANY or (lead[i] == x) == (kind == _LEADER)

        best: Hop | None = None
        # Rack repairs, and replicas going back to y: an undone move (-1) or an original coming home (0).
        for i in chain([i for i in self.excess if i in on_x], self.away_on.get((x, y), ())):
            cost = None if i in exclude or not fits(i) else self.hop_cost(i, x, y)
            if cost is not None and (best is None or (cost, i) < best):
                best = (cost, i)
        if best is None or best[0] > _FREE:
            # A replica that arrived during planning moves on for nothing (if y is new to it): all cost the same.
            hop = self.arrivals.first(x, y, kind, lambda i: self._plain_cost(i, x, y) if fits(i) else None, exclude)
            if hop is not None and (best is None or hop < best):
                best = hop
        if best is None or best[0][_RACK:_MOVES + 1] > (0, 0, 0):
            # An original replica new to y costs one relocation: the first allowed, in size order, is cheapest.
            hop = self.originals.first(x, y, kind, lambda i: self._plain_cost(i, x, y)
                                       if i in on_x and fits(i) else None, exclude)
            if hop is not None and (best is None or hop < best):
                best = hop
        return best

    def _plain_cost(self, i: int, x: int, y: int) -> Cost | None:
        """hop_cost for a move to a broker new to the partition that keeps its rack caps; else None."""
        if y in self.orig_set[i]:
            return None  # an away_on candidate
        cost = self.hop_cost(i, x, y)
        return cost if cost is not None and cost[_RACK] <= 0 else None

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
    def _even_out(brokers: list[int], holding: Mapping[int, Collection[int]],
                  best: Callable[[int, int], Hop | None], move: Callable[[int, int, int], None]) -> None:
        """Greedy bulk: the cheapest move from a fullest broker to an emptiest, until counts are within 1.

        Fullest to emptiest is never wasted (it lowers the lower bound on the moves left by one). Where racks
        forbid it, the fullest broker that can give gives to the emptiest broker that can take.
        """
        while True:
            counts = {b: len(holding[b]) for b in brokers}
            levels = sorted(set(counts.values()))
            found: tuple[Hop, int, int] | None = None
            for top in reversed(levels):
                for bottom in levels:
                    if top - bottom < 2:
                        break
                    for x in brokers:
                        for y in brokers:
                            if counts[x] == top and counts[y] == bottom:
                                hop = best(x, y)
                                if hop is not None and (found is None or (hop, x, y) < found):
                                    found = (hop, x, y)
                    if found is not None:
                        break
                if found is not None:
                    break
            if found is None:
                return
            (_, i), x, y = found
            move(i, x, y)

    def _replica_graph(self) -> Graph:
        nodes = self.nodes
        index = {b: k for k, b in enumerate(nodes)}
        sink = len(nodes)
        edges: list[Edge] = []
        for x in nodes:
            count = len(self.on[x])
            if count == 0:
                continue
            take = (-1, 0, 0, 0, 0) if x in self.removed else (0, 0, 1 - 2 * count, 0, 0)
            edges.append((sink, index[x], take))
            for y in self.remaining:
                hop = self.best_hop(x, y)
                if hop is not None:
                    edges.append((index[x], index[y], hop[0]))
        for y in self.remaining:
            edges.append((index[y], sink, (0, 0, 2 * len(self.on[y]) + 1, 0, 0)))
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
        home = self.orig_lead[i]
        self.lead[i] = y
        self.led[x].remove(i)
        self.led[y].add(i)
        if x != home:
            self.led_new.drop(x, i)
            self.led_home[x, home].discard(i)
        if y != home:
            self.led_new.add(y, i)
            self.led_home.setdefault((y, home), set()).add(i)
        self._revive(i)
        self.leads.pop(x, None)
        self.leads.pop(y, None)

    def best_lead(self, x: int, y: int, exclude: Collection[int] = ()) -> Hop | None:
        """The partition led by x and also on y whose leadership is cheapest to hand to y."""
        if exclude:
            return self._best_lead(x, y, exclude)
        row = self.leads.setdefault(x, {})
        if y not in row:
            row[y] = self._best_lead(x, y, ())
        return row[y]

    def _best_lead(self, x: int, y: int, exclude: Collection[int]) -> Hop | None:
        if x == y:
            return None
        best: Hop | None = None
        for i in self.led_home.get((x, y), ()):  # back to its original leader: one change fewer
            if i not in exclude and y in self.cur[i] and (best is None or i < best[1]):
                best = ((0, -1), i)
        if best is None:  # already changed: passing it on costs nothing
            best = self.led_new.first(x, y, _ANY, lambda i: (0, 0) if y in self.cur[i] else None, exclude)
        if best is None:
            best = self.led_orig.first(x, y, _ANY, lambda i: (0, 1) if self.lead[i] == x and y in self.cur[i]
                                       else None, exclude)
        return best

    def place_leaders(self) -> None:
        self._settle_leaders()
        while self._leader_gap() > 1:
            # A trade that undoes a move costs nothing, so try those first; then the plain, cheap trades; last,
            # any trade after which reordering does better.
            if self._trade_for_leaders(free=True):
                continue
            if self._direct_trade():
                while self._direct_trade():
                    self._even_out(self.remaining, self.led, self.best_lead, self.pass_lead)
                self._settle_leaders()
            elif not self._trade_for_leaders(free=False):
                return

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
                hop = self.best_lead(x, y)
                if hop is not None:
                    edges.append((u, v, hop[0]))
        return nodes, edges

    def _leader_spread(self) -> int:
        return sum(len(self.led[b]) ** 2 for b in self.remaining)

    def _leader_gap(self) -> int:
        leaders = [len(self.led[b]) for b in self.remaining]
        return max(leaders, default=0) - min(leaders, default=0)

    def _direct_trade(self) -> bool:
        """Hand a leader from a broker with the most leaders to one with at least two fewer, with data.

        The leader's replica moves (its leadership goes with it) and, unless replica counts allow the one move,
        a follower replica comes back. Cheapest first among the widest gaps.
        """
        leaders = {b: len(self.led[b]) for b in self.remaining}
        levels = sorted(set(leaders.values()))
        for top in reversed(levels):
            for bottom in levels:
                if top - bottom < 2:
                    break
                best: tuple[Cost, tuple[tuple[int, int, int], ...]] | None = None
                for h in self.remaining:
                    for low in self.remaining:
                        if leaders[h] != top or leaders[low] != bottom:
                            continue
                        there = self.best_hop(h, low, kind=_LEADER)
                        if there is None:
                            continue
                        trades: list[tuple[Cost, tuple[tuple[int, int, int], ...]]] = []
                        if len(self.on[h]) > len(self.on[low]):  # the two counts trade places at worst
                            trades.append((there[0], ((there[1], h, low),)))
                        back = self.best_hop(low, h, kind=_FOLLOWER)
                        if back is not None:
                            trades.append((_add(there[0], back[0]), ((there[1], h, low), (back[1], low, h))))
                        for trade in trades:
                            if best is None or trade < best:
                                best = trade
                if best is not None:
                    for i, x, y in best[1]:
                        self.hop(i, x, y)
                    return True
        return False

    def _trade_for_leaders(self, *, free: bool) -> bool:
        """Trades tried cheapest first; keeps the first after which reordering evens the leaders out further.

        A trade moves one replica from x to y and, unless replica counts allow the one move, one back from y to x;
        for each direction the cheapest replica of each kind (any, a leader's, a follower's) is a candidate.
        Taking back a replica the plan had moved undoes that move, so a trade can cost no relocation at all
        (``free`` tries only those). Each trial is rewound unless it helps.
        """
        trades: set[tuple[Cost, tuple[tuple[int, int, int], ...]]] = set()
        for x in self.remaining:
            for y in self.remaining:
                backs = [self.best_hop(y, x, kind=kind) for kind in _KINDS]
                for there in (self.best_hop(x, y, kind=kind) for kind in _KINDS):
                    if there is None:
                        continue
                    if len(self.on[x]) > len(self.on[y]):  # the two counts trade places at worst
                        trades.add((there[0], ((there[1], x, y),)))
                    for back in backs:
                        if back is not None:
                            trades.add((_add(there[0], back[0]), ((there[1], x, y), (back[1], y, x))))
        spread = self._leader_spread()
        for cost, hops in sorted(trades):
            if free and cost[_MOVES] > 0:
                continue
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
