"""Metadata at 1,000 topics: one-topic Metadata requests per second, against ApiVersions on the same broker.

    python bench/metadata.py                 # 3 rounds of 5 s per request type, ~1 min
    python bench/metadata.py --quick         # 1 round of 2 s
    python bench/metadata.py --sluice-root /path/to/other/checkout   # measure another tree's broker
    python bench/metadata.py --null-broker   # the same load on bench/null_broker.py, for scale

Starts a real `sluice broker` (metadata in an embedded Postgres unless DATABASE_URL is set), creates
``--topics`` topics of one partition with CreateTopics (``--create-batch`` topics per request), checks
a sample of them with Metadata, then loads the broker from raw-protocol clients in this process:
``--connections`` sockets, each keeping ``--depth`` requests in flight (a new one goes out as each
answer arrives), no client library in the way. Two request types, alternating by round:

* Metadata v12 for ONE topic (topics cycle through all of them), no auto-creation — the measure,
  goal >= 5,000 requests/s;
* ApiVersions v3 — the baseline: the cheapest request there is, so its rate is the broker's
  request-loop ceiling on this machine in this run.

Latency is from a request's send to its answer's arrival (with ``--depth`` in flight, it includes
waiting behind the requests ahead of it). Every 16th answer is decoded and checked (error code,
topic name, one partition led by the broker); every answer's correlation id is checked.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import functools
import shlex
import signal
import struct
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    ROOT,
    Broker,
    NullBroker,
    Procs,
    cpu_seconds,
    describe_tree,
    metadata_database,
    ok,
    percentiles,
    ratio,
    self_cpu,
    sluice_root_arg,
)
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import TopicName
from wire import decode_response, encode_request

TARGET = 5000  # one-topic Metadata requests per second
METADATA_VERSION, API_VERSIONS_VERSION = 12, 3
CHECK_EVERY = 16
NODE_ID = 1  # the broker's (and the null broker's) node id
_SIZE_CID = struct.Struct(">ii")  # a response's size prefix and correlation id
_CID_AT = 8  # a framed request's correlation id: after size (4), api key (2) and version (2)


def metadata_frames(topics: list[str]) -> list[bytes]:
    return [encode_request(MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name=TopicName(t)),),
                                           allow_auto_topic_creation=False,
                                           include_topic_authorized_operations=False), METADATA_VERSION, 0)
            for t in topics]


def api_versions_frames() -> list[bytes]:
    return [encode_request(ApiVersionsRequest(client_software_name="sluice-bench", client_software_version="1"),
                           API_VERSIONS_VERSION, 0)]


def check_answer(api_key: int, payload: bytes, topic: str | None, node_id: int) -> str | None:
    """What is wrong with an answer, or None."""
    version = METADATA_VERSION if api_key == 3 else API_VERSIONS_VERSION
    _, body = decode_response(api_key, version, payload)
    if api_key == 18:
        return None if body.error_code == 0 else f"ApiVersions error {body.error_code}"
    if len(body.topics) != 1:
        return f"{len(body.topics)} topics in the answer"
    t = body.topics[0]
    if t.error_code != 0 or t.name != topic:
        return f"topic {t.name!r}: error {t.error_code} (asked for {topic!r})"
    if len(t.partitions) != 1 or t.partitions[0].leader_id != node_id or t.partitions[0].error_code != 0:
        return f"topic {topic}: partitions {t.partitions}"
    return None


# ---------------------------------------------------------------------------- the load


@dataclass
class Phase:
    """One timed run of one request type over all connections."""

    name: str
    api_key: int
    frames: list[bytes]
    topics: list[str | None]
    start_ns: int = 0
    end_ns: int = 0
    sending: bool = True
    count: int = 0
    latencies: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    server_cpu: float = 0.0
    client_cpu: float = 0.0

    @property
    def seconds(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9

    @property
    def rps(self) -> float:
        return self.count / self.seconds if self.seconds > 0 else 0.0


class Client(asyncio.Protocol):
    """One connection keeping ``depth`` requests in flight; answers are counted, timed and sampled."""

    def __init__(self, offset: int, node_id: int) -> None:
        self.offset = offset  # where in the frame list this connection starts
        self.node_id = node_id
        self.transport: asyncio.Transport | None = None
        self.phase: Phase | None = None
        self.sent = 0
        self.correlation_id = 0
        self.in_flight: collections.deque[tuple[int, int, int]] = collections.deque()  # (cid, sent ns, frame)
        self.buffer = bytearray()
        self.idle = asyncio.Event()
        self.lost: Exception | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = exc or ConnectionError("the broker closed the connection")
        self.idle.set()

    def start(self, phase: Phase, depth: int) -> None:
        self.phase = phase
        self.idle.clear()
        self._send(depth)

    def _send(self, k: int) -> None:
        assert self.transport is not None and self.phase is not None
        frames = self.phase.frames
        out = []
        now = time.perf_counter_ns()
        for _ in range(k):
            index = (self.offset + self.sent) % len(frames)
            self.sent += 1
            self.correlation_id += 1
            frame = bytearray(frames[index])
            struct.pack_into(">i", frame, _CID_AT, self.correlation_id)
            out.append(frame)
            self.in_flight.append((self.correlation_id, now, index))
        self.transport.write(b"".join(out))

    def data_received(self, data: bytes) -> None:
        phase = self.phase
        assert phase is not None
        buf = self.buffer
        buf += data
        now = time.perf_counter_ns()
        pos = answered = 0
        end = len(buf)
        while end - pos >= 8:
            size, cid = _SIZE_CID.unpack_from(buf, pos)
            if end - pos - 4 < size:
                break
            expected, sent_ns, index = self.in_flight.popleft()
            if cid != expected:
                phase.errors.append(f"answer with correlation id {cid}, expected {expected}")
            elif not cid % CHECK_EVERY:
                problem = check_answer(phase.api_key, bytes(buf[pos + 4:pos + 4 + size]), phase.topics[index],
                                       self.node_id)
                if problem:
                    phase.errors.append(problem)
            if phase.start_ns <= now <= phase.end_ns:
                phase.count += 1
                phase.latencies.append(now - sent_ns)
            pos += 4 + size
            answered += 1
        del buf[:pos]
        if answered and phase.sending:
            self._send(answered)
        elif not self.in_flight:
            self.idle.set()


async def run_phase(clients: list[Client], phase: Phase, depth: int, warmup: float, seconds: float,
                    broker_pid: int) -> Phase:
    loop = asyncio.get_running_loop()
    phase.start_ns = time.perf_counter_ns() + int(warmup * 1e9)
    phase.end_ns = phase.start_ns + int(seconds * 1e9)
    for client in clients:
        client.start(phase, depth)
    await asyncio.sleep(warmup)
    s0, c0 = cpu_seconds(broker_pid), self_cpu()
    await asyncio.sleep(seconds)
    phase.server_cpu, phase.client_cpu = cpu_seconds(broker_pid) - s0, self_cpu() - c0
    phase.sending = False
    deadline = loop.time() + 120
    for client in clients:
        if client.in_flight:
            await asyncio.wait_for(client.idle.wait(), max(deadline - loop.time(), 0.1))
        if client.lost is not None:
            raise SystemExit(f"a connection failed during {phase.name}: {client.lost}")
    return phase


async def load(port: int, node_id: int, topics: list[str], args: argparse.Namespace, broker_pid: int
               ) -> list[tuple[Phase, Phase]]:
    loop = asyncio.get_running_loop()
    meta_frames, av_frames = metadata_frames(topics), api_versions_frames()
    step = max(len(topics) // args.connections, 1)
    clients: list[Client] = []
    for i in range(args.connections):
        _, client = await loop.create_connection(functools.partial(Client, i * step, node_id), "127.0.0.1", port)
        clients.append(client)
    rounds = []
    try:
        for rnd in range(args.rounds):
            pair = {}
            order = ["ApiVersions", "Metadata"] if rnd % 2 == 0 else ["Metadata", "ApiVersions"]
            for name in order:
                phase = (Phase("Metadata", 3, meta_frames, list(topics)) if name == "Metadata"
                         else Phase("ApiVersions", 18, av_frames, [None]))
                pair[name] = await run_phase(clients, phase, args.depth, args.warmup, args.seconds, broker_pid)
                print(row(f"round {rnd + 1}", pair[name]), flush=True)
            rounds.append((pair["ApiVersions"], pair["Metadata"]))
    finally:
        for client in clients:
            if client.transport is not None:
                client.transport.close()
    return rounds


# ---------------------------------------------------------------------------- setup


def create_topics(bootstrap: str, names: list[str], batch: int) -> float:
    """Create the topics, ``batch`` per CreateTopics request; the seconds it took."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    t0 = time.perf_counter()
    for i in range(0, len(names), batch):
        futures = admin.create_topics([NewTopic(n, 1, 1) for n in names[i:i + batch]], operation_timeout=60,
                                      request_timeout=120)
        for fut in futures.values():
            fut.result(180)
    return time.perf_counter() - t0


def check_topics(port: int, node_id: int, topics: list[str]) -> None:
    """Metadata for each of ``topics`` on one connection, pipelined; every answer decoded and checked."""
    import socket

    from wire import read_frame

    frames = metadata_frames(topics)
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        sock.sendall(b"".join(frames))
        for topic in topics:
            problem = check_answer(3, read_frame(sock), topic, node_id)
            if problem:
                raise SystemExit(f"Metadata check failed: {problem}")


def row(label: str, ph: Phase) -> str:
    p50, p99, _ = percentiles(ph.latencies)
    err = f"  {len(ph.errors)} ERRORS, first: {ph.errors[0]}" if ph.errors else ""
    return (f"  {label:10} {ph.name:12} {ph.rps:10,.0f} {p50:8.2f} {p99:8.2f} {ph.server_cpu / ph.seconds:5.0%} "
            f"{ph.client_cpu / ph.seconds:5.0%}{err}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", type=int, default=1000, help="topics to create (one partition each)")
    ap.add_argument("--create-batch", type=int, default=100, help="topics per CreateTopics request")
    ap.add_argument("--connections", type=int, default=4, help="client connections")
    ap.add_argument("--depth", type=int, default=8, help="requests in flight per connection")
    ap.add_argument("--seconds", type=float, default=None, help="timed seconds per phase (default 5; quick 2)")
    ap.add_argument("--warmup", type=float, default=0.5, help="untimed seconds at the start of each phase")
    ap.add_argument("--rounds", type=int, default=None, help="rounds of both request types (default 3; quick 1)")
    ap.add_argument("--quick", action="store_true", help="one round of 2 s per request type")
    ap.add_argument("--broker-args", default="", help="extra arguments for the broker command line")
    ap.add_argument("--sluice-root", type=sluice_root_arg, default=ROOT,
                    help="run the broker from this source tree, with its .venv when it has one (default: this "
                         "checkout)")
    ap.add_argument("--null-broker", action="store_true",
                    help="load bench/null_broker.py instead (no storage, no Postgres, every topic exists): what a "
                         "Python server answers on this machine")
    ap.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    args = ap.parse_args()
    args.seconds = args.seconds or (2.0 if args.quick else 5.0)
    args.rounds = args.rounds or (1 if args.quick else 3)

    def on_term(_sig: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    procs = Procs()
    topics = [f"meta-{i:05d}" for i in range(args.topics)]
    try:
        with tempfile.TemporaryDirectory(prefix="sluice-bench-metadata-", dir=args.dir) as tmp, \
                contextlib.ExitStack() as stack:
            try:
                server: Broker | NullBroker
                if args.null_broker:
                    server = NullBroker(procs, Path(tmp), args.sluice_root)
                    failed = server.start()
                    if failed is not None:
                        raise SystemExit(f"null broker did not start:\n{failed}")
                    print(f"null broker (bench/null_broker.py, every topic exists) pid {server.pid} at "
                          f"{server.bootstrap}; protocol code: {describe_tree(args.sluice_root)}")
                else:
                    metadata_url = stack.enter_context(metadata_database(Path(tmp)))
                    server = Broker(procs, Path(tmp) / "data", metadata_url, f"bench-{uuid.uuid4().hex[:12]}", 1,
                                    shlex.split(args.broker_args), root=args.sluice_root)
                    failed = server.start()
                    if failed is not None:
                        raise SystemExit(f"broker did not start:\n{failed}")
                    print(f"broker code: {describe_tree(args.sluice_root)}")
                    took = create_topics(server.bootstrap, topics, args.create_batch)
                    print(f"broker pid {server.pid} at {server.bootstrap}; {len(topics):,} topics x 1 partition "
                          f"created in {took:.1f} s ({args.create_batch} per CreateTopics request, "
                          f"{len(topics) / took:,.0f} topics/s)")
                sample = topics[::max(len(topics) // 100, 1)]
                check_topics(server.port, NODE_ID, sample)
                print(f"Metadata checked for {len(sample)} of them; load: {args.connections} connections x "
                      f"{args.depth} requests in flight, {args.seconds:g} s timed per phase after "
                      f"{args.warmup:g} s warm-up, {args.rounds} round(s)")
                print(f"  {'':10} {'request':12} {'requests/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'srv%':>5} "
                      f"{'cli%':>5}")
                with asyncio.Runner(loop_factory=_loop_factory()) as runner:
                    rounds = runner.run(load(server.port, NODE_ID, topics, args, server.pid))
            finally:
                procs.stop_all()
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130

    best_av = max((r[0] for r in rounds), key=lambda p: p.rps)
    best_md = max((r[1] for r in rounds), key=lambda p: p.rps)
    errors = sum(len(p.errors) for r in rounds for p in r)
    print(f"\nbest of {len(rounds)} round(s)" + (f"; {errors} ERRORS" if errors else ""))
    print(f"  {'':10} {'request':12} {'requests/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'srv%':>5} {'cli%':>5}")
    print(row("baseline", best_av))
    print(row("measure", best_md))
    r = ratio(best_md.rps, best_av.rps)
    print(f"{'null broker: ' if args.null_broker else ''}"
          f"Metadata v12 (1 of {len(topics):,} topics): {best_md.rps:,.0f} requests/s, "
          f"p50 {percentiles(best_md.latencies)[0]:.2f} ms, p99 {percentiles(best_md.latencies)[1]:.2f} ms; "
          f"ApiVersions v3 (request-loop ceiling): {best_av.rps:,.0f} requests/s; ratio {r:.2f}; "
          f"target Metadata >= {TARGET:,}/s {ok(best_md.rps >= TARGET)}")
    return 1 if errors else 0


def _loop_factory() -> Any:
    with contextlib.suppress(ImportError):
        import uvloop

        return uvloop.new_event_loop
    return None


if __name__ == "__main__":
    raise SystemExit(main())
