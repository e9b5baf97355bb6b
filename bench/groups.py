"""Consumer-group benchmark: rebalance settle times and commit throughput on a real broker.

    python bench/groups.py            # a few minutes
    python bench/groups.py --quick    # under a minute

Settle time is measured from a member joining (or leaving) until every member of the
group has its SyncGroup answer for the new generation. Members are raw protocol clients
(kafka-python's codecs over one blocking socket each, one thread each) so the figure is
the coordinator's, not a client library's; they heartbeat every 100 ms, so "a member
joins a stable group" includes up to 100 ms for the others to hear of the rebalance.
The 10-member cold join is also run with real confluent-kafka consumers.

Commit throughput: one confluent-kafka consumer committing synchronously after every
batch of up to 100 records, next to the same run's baseline of synchronous acks=all
single-record produces (a request of the same weight: one append, one round trip),
and raw OffsetCommit requests from one socket.
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker import create_topic
from common import Broker, Procs, metadata_database
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS = 79, 27
HEARTBEAT_S = 0.1


class Wire:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=120)
        self.correlation_id = 0

    def call(self, request: Any, response_class: Any, version: int) -> Any:
        self.correlation_id += 1
        request.with_header(correlation_id=self.correlation_id, client_id="bench")
        self.sock.sendall(bytes(request.encode(header=True, framed=True)))
        size = struct.unpack(">i", self._exactly(4))[0]
        return response_class.decode(struct.pack(">i", size) + self._exactly(size), version=version, header=True,
                                     framed=True)

    def _exactly(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("broker closed the connection")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)


class Board:
    """When each member got its SyncGroup answer, per generation."""

    def __init__(self) -> None:
        self.synced: dict[int, dict[str, float]] = {}
        self.changed = threading.Condition()

    def mark(self, generation: int, member: str) -> None:
        with self.changed:
            self.synced.setdefault(generation, {})[member] = time.perf_counter()
            self.changed.notify_all()

    def wait_generation(self, members: int, newer_than: int, timeout: float = 120) -> tuple[int, float]:
        """(generation, time its last member synced) for the first generation above ``newer_than`` with
        ``members`` synced members."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                for generation in sorted(g for g in self.synced if g > newer_than):
                    if len(self.synced[generation]) >= members:
                        return generation, max(self.synced[generation].values())
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no generation > {newer_than} with {members} members: "
                                       f"{ {g: len(m) for g, m in self.synced.items()} }")
                self.changed.wait(0.5)


class RawMember(threading.Thread):
    def __init__(self, port: int, group: str, board: Board) -> None:
        super().__init__(daemon=True)
        self.wire = Wire(port)
        self.group, self.board = group, board
        self.member_id = ""
        self.generation = -1
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            self._rejoin()
            while not self.stop.wait(HEARTBEAT_S):
                hb = self.wire.call(HeartbeatRequest[4](group_id=self.group, generation_id=self.generation,
                                                        member_id=self.member_id, group_instance_id=None),
                                    HeartbeatResponse, 4)
                if hb.error_code == REBALANCE_IN_PROGRESS:
                    self._rejoin()
        except (OSError, ConnectionError):
            pass

    def _rejoin(self) -> None:
        while True:
            join = self.wire.call(JoinGroupRequest[9](
                group_id=self.group, session_timeout_ms=30_000, rebalance_timeout_ms=30_000, member_id=self.member_id,
                group_instance_id=None, protocol_type="consumer", reason=None,
                protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"\0\0\0\0\0\0")]),
                JoinGroupResponse, 9)
            self.member_id = join.member_id
            if join.error_code == MEMBER_ID_REQUIRED:
                continue
            assert join.error_code == 0, join
            assignments = [SyncGroupRequest.SyncGroupRequestAssignment(member_id=m.member_id, assignment=b"x")
                           for m in join.members]
            sync = self.wire.call(SyncGroupRequest[5](
                group_id=self.group, generation_id=join.generation_id, member_id=self.member_id,
                group_instance_id=None, protocol_type="consumer", protocol_name="range", assignments=assignments),
                SyncGroupResponse, 5)
            if sync.error_code == REBALANCE_IN_PROGRESS:
                continue
            assert sync.error_code == 0, sync
            self.generation = join.generation_id
            self.board.mark(join.generation_id, self.member_id)
            return

    def leave(self) -> None:
        self.stop.set()
        self.join(10)
        self.wire.call(LeaveGroupRequest[5](group_id=self.group, members=[
            LeaveGroupRequest.MemberIdentity(member_id=self.member_id, group_instance_id=None, reason=None)]),
            LeaveGroupResponse, 5)

    def close(self) -> None:
        self.stop.set()
        self.join(10)
        self.wire.sock.close()


def find_coordinator(port: int) -> None:
    Wire(port).call(FindCoordinatorRequest[4](key_type=0, coordinator_keys=["warm-up"]), FindCoordinatorResponse, 4)


def settle_times(port: int, size: int) -> dict[str, float]:
    """Seconds to Stable: cold join of ``size``; one more joining; one leaving."""
    board, group = Board(), f"g-{uuid.uuid4().hex[:8]}"
    members = [RawMember(port, group, board) for _ in range(size)]
    start = time.perf_counter()
    for member in members:
        member.start()
    generation, done = board.wait_generation(size, 0)
    out = {"cold join": done - start}
    newcomer = RawMember(port, group, board)
    start = time.perf_counter()
    newcomer.start()
    generation, done = board.wait_generation(size + 1, generation)
    out["one joins"] = done - start
    members.append(newcomer)
    leaving = members.pop(0)
    start = time.perf_counter()
    leaving.leave()
    generation, done = board.wait_generation(size, generation)
    out["one leaves"] = done - start
    for member in members:
        member.close()
    return out


def confluent_cold_join(bootstrap: str, topic: str, size: int) -> float:
    """Seconds until ``size`` confluent-kafka consumers all hold their first assignment."""
    group = f"ck-{uuid.uuid4().hex[:8]}"
    assigned: set[int] = set()
    changed = threading.Condition()
    stop = threading.Event()

    def run(index: int) -> None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "heartbeat.interval.ms": 100,
                             "session.timeout.ms": 30_000})

        def on_assign(_c: Any, _parts: Any) -> None:
            with changed:
                assigned.add(index)
                changed.notify_all()
        consumer.subscribe([topic], on_assign=on_assign)
        while not stop.is_set():
            consumer.poll(0.05)
        consumer.close()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(size)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    with changed:
        while len(assigned) < size:
            changed.wait(1)
    elapsed = time.perf_counter() - start
    stop.set()
    for thread in threads:
        thread.join(30)
    return elapsed


def commit_rate(bootstrap: str, topic: str, seconds: float) -> tuple[float, float]:
    """(commits/s, records/s) of a consumer committing synchronously after every batch of up to 100."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"c-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    commits = records = 0
    deadline = time.perf_counter() + seconds
    start = time.perf_counter()
    while time.perf_counter() < deadline:
        batch = [m for m in consumer.consume(100, 1.0) if not m.error()]
        if not batch:
            break
        records += len(batch)
        consumer.commit(message=batch[-1], asynchronous=False)
        commits += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    return commits / elapsed, records / elapsed


def produce_round_trips(bootstrap: str, topic: str, seconds: float) -> float:
    """Synchronous acks=all single-record produces per second (one append, one round trip each)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    count = 0
    deadline = time.perf_counter() + seconds
    start = time.perf_counter()
    while time.perf_counter() < deadline:
        producer.produce(topic, value=b"x" * 100, partition=0)
        producer.flush(10)
        count += 1
    return count / (time.perf_counter() - start)


def raw_commit_rate(port: int, topic: str, seconds: float) -> float:
    wire, count = Wire(port), 0
    kind = OffsetCommitRequest.OffsetCommitRequestTopic
    deadline = time.perf_counter() + seconds
    start = time.perf_counter()
    while time.perf_counter() < deadline:
        request = OffsetCommitRequest[8](group_id="raw", generation_id_or_member_epoch=-1, member_id="",
                                         group_instance_id=None, topics=[kind(name=topic, partitions=[
                                             kind.OffsetCommitRequestPartition(partition_index=0,
                                                                               committed_offset=count,
                                                                               committed_leader_epoch=-1,
                                                                               committed_metadata="")])])
        response = wire.call(request, OffsetCommitResponse, 8)
        assert response.topics[0].partitions[0].error_code == 0, response
        count += 1
    return count / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    seconds = 3.0 if args.quick else 10.0
    sizes = (1, 10, 50)
    procs = Procs()
    with (tempfile.TemporaryDirectory(prefix="sluice-bench-groups-") as tmp,
          metadata_database(Path(tmp)) as metadata_url):
        root = Path(tmp)
        try:
            results: dict[str, Any] = {}
            for delay in (3000, 0):
                broker = Broker(procs, root / f"data-{delay}", metadata_url, f"bench-{uuid.uuid4().hex[:12]}", 1,
                                ["--group-initial-rebalance-delay-ms", str(delay)])
                failure = broker.start()
                if failure:
                    print(failure)
                    return 1
                find_coordinator(broker.port)
                create_topic(broker.bootstrap, "bench", 12)
                for size in sizes:
                    results[(delay, size)] = settle_times(broker.port, size)
                    print(f"delay {delay:>4} ms  {size:>2} members  " + "  ".join(
                        f"{name} {value * 1000:7.0f} ms" for name, value in results[(delay, size)].items()),
                        flush=True)
                if delay == 3000:
                    results["confluent"] = confluent_cold_join(broker.bootstrap, "bench", 10)
                    print(f"delay 3000 ms  10 confluent-kafka consumers  cold join "
                          f"{results['confluent'] * 1000:.0f} ms", flush=True)
                else:
                    values = [b"v" * 100] * 50_000
                    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
                    for value in values:
                        producer.produce("bench", value=value, partition=0)
                    producer.flush(60)
                    results["commit"] = commit_rate(broker.bootstrap, "bench", seconds)
                    results["produce"] = produce_round_trips(broker.bootstrap, "bench", seconds)
                    results["raw commit"] = raw_commit_rate(broker.port, "bench", seconds)
                broker.stop()
        finally:
            procs.stop_all()
    print("\n| members | cold join (delay 3000) | cold join (delay 0) | one joins | one leaves |")
    print("|---|---|---|---|---|")
    for size in sizes:
        slow, fast = results[(3000, size)], results[(0, size)]
        print(f"| {size} | {slow['cold join'] * 1000:.0f} ms | {fast['cold join'] * 1000:.0f} ms | "
              f"{fast['one joins'] * 1000:.0f} ms | {fast['one leaves'] * 1000:.0f} ms |")
    goal = results[(3000, 10)]["cold join"]
    print(f"\n10 raw members, delay 3000 ms: {goal:.2f} s (goal ≤ 4.0 s): {'PASS' if goal <= 4.0 else 'MISS'}")
    print(f"10 confluent-kafka consumers, delay 3000 ms: {results['confluent']:.2f} s "
          f"({'PASS' if results['confluent'] <= 4.0 else 'MISS'})")
    commits, records = results["commit"]
    print(f"commit after every batch: {commits:.0f} commits/s ({records:.0f} records/s); "
          f"baseline sync acks=all produce: {results['produce']:.0f} requests/s; "
          f"ratio {commits / results['produce']:.2f}; raw OffsetCommit: {results['raw commit']:.0f} requests/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
