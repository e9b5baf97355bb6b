"""Managed clusters: create-to-Ready, broker SIGKILL to Ready, and topic reconcile at 1,000 topics.

    python bench/managed.py            # 2 create rounds, 1,000 topics: ~6-7 min on 2 cores
    python bench/managed.py --quick    # 1 round, 200 topics: ~1-2 min (a smoke run)

Runs the real stack of a managed cluster on this machine: embedded Postgres and Redis (never the
servers DATABASE_URL/REDIS_URL name), a Celery worker running ``clusters.reconcile``, and two agents
(``sluice agent``, racks r1 and r2, port pools below the kernel's ephemeral range) that start
``sluice broker`` processes. Each figure has a baseline measured in the same run (the machine is
shared and noisy), printed with the ratio:

* create to Ready, 1 broker (plan "basic") and 3 brokers (plan "dedicated"): from
  ``cluster_create`` until the cluster's status has Ready=True — goal <= 10 s for 3 brokers.
  Baseline: the same number of ``sluice broker`` processes started directly (a fresh ``skc-`` cluster
  id, the same metadata database) until a Kafka AdminClient on their bootstrap sees all of them.
  ``--rounds`` rounds alternate the two; medians (and the worst 3-broker round) are reported;
* broker SIGKILL to Ready: kill -9 one broker of the 3-broker cluster (pid from
  ``BrokerNode.process``), until its new process holds a live registration and the status, naming
  that process as Running, says Ready=True and Degraded=False — goal <= 20 s. Baseline: the direct
  1-broker start above. Done again once the topics exist, if they converged (informative);
* reconcile of ``--topics`` new topics (1 partition, ``--rf`` replicas, on the 3-broker cluster: plan
  "basic" allows 100 partitions): the rows are created with ``topic_create`` in one transaction (not
  timed); timed from its commit, which enqueues the pass, until every row's status has
  observed_generation == generation with Ready=True and the cluster is Ready — goal <= 30 s at 1,000.
  Waits ``--topic-timeout`` at most; not converging by then is reported as a miss. Baseline: one
  AdminClient ``create_topics`` call of the same topics on freshly started brokers (``--rf`` of them);
* a no-op resync: ``reconcile_cluster(id, resync=True)`` in this process, 3 times, median — goal
  <= 2 s at 1,000; checked to make no admin writes (CreateTopics/DeleteTopics/CreatePartitions/
  AlterConfigs calls counted in-process), to leave every topic row unchanged, and that ``plan_topics``
  over a fresh observation has nothing but Drift to do. Per-step times (observation calls, planning,
  acting) are printed. Baseline: ``list_topics`` + ``describe_configs`` of the topics on the baseline
  brokers. If the topics never converged, one pass is timed and reported as what it is.

Milestones inside each wait (brokers placed, processes started, registered in the metadata store,
...) and the CPU seconds each part of the stack used say where the time goes. Every process started
here is stopped by pid at the end; clusters are deleted through ``cluster_delete`` first (their
broker logs are copied out before: ``--keep-logs`` keeps them), and any broker left under the
scratch directory is killed.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import importlib.util
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import CLK_TCK, ROOT, Procs, ok, ratio, self_cpu
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # type: ignore[attr-defined]

from sluice.embedded import Services, ensure_services, free_port

CREATE_GOAL_S = 10.0  # 3 brokers, create to Ready
KILL_GOAL_S = 20.0  # SIGKILL to Ready and not Degraded
TOPICS_GOAL_S = 30.0  # 1,000 topics reconciled
RESYNC_GOAL_S = 2.0  # a no-op resync pass
POLL_S = 0.1
QUIET_KAFKA = {"log_level": 0, "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 200}


# ---------------------------------------------------------------------------- timing helpers


@dataclass
class Milestones:
    """First time (seconds after ``t0``) each named predicate held, while waiting for ``done``."""

    t0: float
    seen: dict[str, float] = field(default_factory=dict)

    def wait(self, done: Callable[[], bool], marks: dict[str, Callable[[], bool]], timeout: float,
             what: str) -> float:
        found = self.wait_or_none(done, marks, timeout)
        if found is None:
            raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}; milestones so far: {self.text()}")
        return found

    def wait_or_none(self, done: Callable[[], bool], marks: dict[str, Callable[[], bool]],
                     timeout: float) -> float | None:
        """Seconds from ``t0`` until ``done``, or None at ``timeout``."""
        deadline = self.t0 + timeout
        while True:
            now = time.monotonic()
            for name, check in marks.items():
                if name not in self.seen and check():
                    self.seen[name] = now - self.t0
            if done():
                return time.monotonic() - self.t0
            if now > deadline:
                return None
            time.sleep(POLL_S)

    def text(self) -> str:
        return ", ".join(f"{name} {t:.1f} s" for name, t in sorted(self.seen.items(), key=lambda kv: kv[1])) or "-"


@contextlib.contextmanager
def counting(owner: Any, names: list[str], calls: dict[str, list[float]], prefix: str = "") -> Iterator[None]:
    """Wrap ``owner.<name>`` for each name: every call's duration appended to ``calls[prefix + name]``; restored
    after."""
    saved = {name: getattr(owner, name) for name in names}

    def wrap(name: str, fn: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                calls.setdefault(prefix + name, []).append(time.perf_counter() - t)
        return timed

    for name, fn in saved.items():
        setattr(owner, name, wrap(name, fn))
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(owner, name, fn)


# ---------------------------------------------------------------------------- processes


def ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (outgoing connections take their source ports there)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port_range(count: int) -> tuple[int, int]:
    """``count`` consecutive ports free right now, BELOW the ephemeral range (the agents' brokers bind them later).

    Not a kernel-chosen port: while a broker on an ephemeral port is down, a client retrying it can be given that
    very port as its source and connect to itself (TCP simultaneous open); the restarted broker then cannot bind
    until that client lets go (seen here: EADDRINUSE restarts for 80-130 s after a SIGKILL).
    """
    import random

    high = min(ephemeral_low(), 65535) - count
    for _ in range(200):
        first = random.randrange(20000, high)
        socks = []
        try:
            for port in range(first, first + count):
                sock = socket.socket()
                sock.bind(("127.0.0.1", port))
                socks.append(sock)
            return first, first + count - 1
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    raise RuntimeError("no free port range below the ephemeral range")


def brokers_under(root: Path) -> list[int]:
    """Pids of broker processes whose command line points under ``root`` (the agents' cluster directories)."""
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if "broker" in cmdline and any(str(root) in part for part in cmdline):
            found.append(int(proc.info["pid"]))
    return found


def log_problems(path: Path) -> list[str]:
    """ERROR/CRITICAL/Traceback lines and WARNING lines of a log, for the report."""
    if not path.exists():
        return []
    return [line for line in path.read_text(errors="replace").splitlines()
            if re.search(r"\b(ERROR|CRITICAL|WARNING)\b|Traceback", line)]


def tree_cpu(pid: int, *, children: bool = True) -> float:
    """CPU seconds of a process: its own, and (``children``) its reaped children's and its live descendants'."""
    import psutil

    def own(p: int) -> float:
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return sum(int(x) for x in fields[11:15 if children else 13]) / CLK_TCK

    total = own(pid)
    if children:
        with contextlib.suppress(psutil.Error):
            total += sum(own(c.pid) for c in psutil.Process(pid).children(recursive=True))
    return total


def postmaster_pid(data_dir: Path) -> int | None:
    import psutil

    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if "-D" in cmdline and any(str(data_dir) in part for part in cmdline):
            return int(proc.info["pid"])
    return None


@dataclass
class CpuMeter:
    """CPU seconds spent by each part of the stack between ``start`` and ``read``."""

    parts: dict[str, Callable[[], float]]
    at: dict[str, float] = field(default_factory=dict)

    def start(self) -> None:
        self.at = {name: read() for name, read in self.parts.items()}

    def read(self) -> dict[str, float]:
        return {name: read() - self.at.get(name, 0.0) for name, read in self.parts.items()}

    @staticmethod
    def text(used: dict[str, float]) -> str:
        return ", ".join(f"{name} {cpu:.1f}" for name, cpu in used.items() if cpu >= 0.05)


@dataclass
class Stack:
    """The worker and the two agents, child processes of this bench."""

    procs: Procs
    root: Path
    env: dict[str, str]
    worker: subprocess.Popen[bytes] | None = None
    agents: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    logs: dict[str, Path] = field(default_factory=dict)

    def start(self) -> None:
        py = sys.executable
        self.logs["worker"] = self.root / "worker.log"
        with self.logs["worker"].open("wb") as out:
            self.worker = self.procs.start(
                [py, "-m", "celery", "-A", "controlplane.celery_app", "worker", "--pool", "threads", "--concurrency",
                 "4", "--hostname", f"bench-{os.getpid()}@%h", "--loglevel", "INFO", "--without-gossip",
                 "--without-mingle"], cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT)
        for host, rack in (("bench-h1", "r1"), ("bench-h2", "r2")):
            first, last = free_port_range(8)
            self.logs[host] = self.root / f"agent-{host}.log"
            with self.logs[host].open("wb") as out:
                self.agents[host] = self.procs.start(
                    [py, "-m", "sluice", "agent", "--host", host, "--rack", rack, "--ports", f"{first}-{last}",
                     "--root", str(self.root / "clusters"), "--concurrency", "4", "--stop-brokers-on-exit"],
                    cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 90) -> None:
        from controlplane.clusters.models import Agent

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in [("worker", self.worker), *self.agents.items()]:
                if proc is not None and proc.poll() is not None:
                    raise SystemExit(f"{name} exited:\n{self.logs[name].read_text(errors='replace')[-3000:]}")
            worker_up = "ready." in self.logs["worker"].read_text(errors="replace")
            agents_up = all("ready." in self.logs[h].read_text(errors="replace") for h in self.agents)
            if worker_up and agents_up and Agent.objects.filter(host__in=list(self.agents)).count() == 2:
                return
            time.sleep(0.2)
        raise SystemExit("the worker and agents did not come up in time")

    def meter(self, postgres: int | None) -> CpuMeter:
        """worker, agents (own), the agents' brokers (their children), Postgres, this bench process."""
        assert self.worker is not None
        parts: dict[str, Callable[[], float]] = {"worker": lambda: tree_cpu(self.worker.pid) if self.worker else 0.0}
        agents = list(self.agents.values())
        parts["agents"] = lambda: sum(tree_cpu(a.pid, children=False) for a in agents)
        parts["managed brokers"] = lambda: sum(tree_cpu(a.pid) - tree_cpu(a.pid, children=False) for a in agents)
        if postgres is not None:
            parts["postgres"] = lambda: tree_cpu(postgres)
        parts["bench"] = self_cpu
        return CpuMeter(parts)

    def stop(self) -> None:
        for proc in [*self.agents.values(), self.worker]:
            if proc is not None:
                self.procs.stop(proc, timeout=30)
        for pid in brokers_under(self.root / "clusters"):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)


# ---------------------------------------------------------------------------- direct brokers (baselines)


@dataclass
class DirectCluster:
    """``sluice broker`` processes started directly, one cluster id, no control plane."""

    procs: Procs
    root: Path
    metadata_url: str
    size: int
    cluster_id: str = field(default_factory=lambda: "skc-" + uuid.uuid4().hex[:16])
    ports: list[int] = field(default_factory=list)
    children: list[subprocess.Popen[bytes]] = field(default_factory=list)
    cpu: float = 0.0  # the brokers' CPU seconds until they had all registered

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def start(self, timeout: float = 60) -> float:
        """Start every broker at once; seconds until an AdminClient sees all of them."""
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "LOG_LEVEL": "INFO"}
        t0 = time.monotonic()
        for node in range(1, self.size + 1):
            port = free_port()
            data = self.root / self.cluster_id / str(node)
            data.mkdir(parents=True)
            self.ports.append(port)
            with (data / "broker.log").open("wb") as out:
                self.children.append(self.procs.start(
                    [sys.executable, "-m", "sluice", "broker", "--node-id", str(node), "--listen", f"127.0.0.1:{port}",
                     "--data-dir", str(data / "data"), "--cluster-id", self.cluster_id, "--metadata-url",
                     self.metadata_url, "--rack", f"r{node}"], cwd=ROOT, env=env, stdout=out,
                    stderr=subprocess.STDOUT))
        deadline = t0 + timeout
        while time.monotonic() < deadline:
            if any(c.poll() is not None for c in self.children):
                raise SystemExit(f"a direct broker exited; see {self.root / self.cluster_id}")
            if all(_listening(p) for p in self.ports):
                seen = AdminClient({"bootstrap.servers": self.bootstrap, **QUIET_KAFKA}).list_topics(timeout=2)
                if len(seen.brokers) == self.size:
                    took = time.monotonic() - t0
                    self.cpu = sum(tree_cpu(c.pid) for c in self.children)
                    return took
            time.sleep(POLL_S)
        raise SystemExit(f"{self.size} direct broker(s) did not all register in {timeout:.0f} s")

    def stop(self) -> None:
        for child in self.children:
            self.procs.stop(child)
        self.children.clear()


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def baseline_topics(bootstrap: str, names: list[str], rf: int) -> tuple[float, float, int]:
    """One create_topics call of every name, then list_topics + describe_configs of them: both in seconds, and
    how many of the creates failed. librdkafka's socket timeout is raised to its 300 s maximum."""
    import gc

    from confluent_kafka import KafkaException

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 300_000, **QUIET_KAFKA})
    t0 = time.monotonic()
    futures = admin.create_topics([NewTopic(n, 1, rf) for n in names], operation_timeout=250, request_timeout=290)
    failed = 0
    for fut in futures.values():
        try:
            fut.result(600)
        except KafkaException:
            failed += 1
    create = time.monotonic() - t0
    t0 = time.monotonic()
    listed = [n for n in admin.list_topics(timeout=60).topics if not n.startswith("__")]
    described = admin.describe_configs([ConfigResource("TOPIC", n) for n in listed], request_timeout=290)
    for fut in described.values():
        fut.result(600)
    observe = time.monotonic() - t0
    del admin, futures, described
    gc.collect()  # librdkafka's threads go with the client: no reconnecting to the stopped broker later
    return create, observe, failed


# ---------------------------------------------------------------------------- the control plane side


def conditions(status: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in status.get("conditions", [])}


def cluster_status(pk: uuid.UUID) -> dict[str, Any]:
    from controlplane.clusters.models import Cluster

    found = Cluster.objects.filter(pk=pk).values_list("status", flat=True).first()
    return dict(found or {})


def is_ready(pk: uuid.UUID) -> bool:
    return conditions(cluster_status(pk)).get("Ready") == "True"


class Store:
    """The dataplane's metadata store, read on one autocommit connection (polled often: no connect per read)."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)

    def live(self, kafka_id: str) -> dict[int, str]:
        """node id -> incarnation of the brokers holding a live lease."""
        rows = self.conn.execute("SELECT node_id, incarnation::text FROM sluice_meta.brokers WHERE cluster_id = %s"
                                 " AND lease_expires_at > now()", (kafka_id,)).fetchall()
        return {int(r[0]): str(r[1]) for r in rows}

    def topics(self, kafka_id: str) -> int:
        row = self.conn.execute("SELECT count(*) FROM sluice_meta.topics WHERE cluster_id = %s AND NOT internal",
                                (kafka_id,)).fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        self.conn.close()


def create_managed(tenant: Any, name: str, plan: str, brokers: int, store: Store) -> tuple[Any, float, Milestones]:
    """cluster_create, then wait for Ready=True; (the cluster, seconds, milestones)."""
    from controlplane.clusters.models import BrokerNode
    from controlplane.clusters.services import cluster_create
    from controlplane.core.actors import SYSTEM_ACTOR

    marks = Milestones(time.monotonic())
    cluster = cluster_create(tenant=tenant, name=name, plan=plan, actor=SYSTEM_ACTOR,
                             broker_count=brokers if plan != "basic" else None)
    took = marks.wait(lambda: is_ready(cluster.pk), {
        "placed": lambda: BrokerNode.objects.filter(cluster=cluster).count() == brokers,
        "processes started": lambda: BrokerNode.objects.filter(cluster=cluster, process__pid__isnull=False)
        .count() == brokers,
        "registered in store": lambda: len(store.live(cluster.kafka_cluster_id)) == brokers,
    }, 120, f"cluster {name} to be Ready")
    return cluster, took, marks


def save_broker_logs(cluster: Any, clusters_root: Path, into: Path) -> list[Path]:
    """Copy the cluster's broker logs out of the agents' directories (deletion purges them)."""
    import shutil

    into.mkdir(parents=True, exist_ok=True)
    saved = []
    for log in sorted(clusters_root.glob(f"{cluster.kafka_cluster_id}/*/broker.log")):
        target = into / f"{cluster.name}-{cluster.kafka_cluster_id}-node{log.parent.name}.log"
        shutil.copyfile(log, target)
        saved.append(target)
    return saved


def delete_managed(cluster: Any, clusters_root: Path, logs: Path, timeout: float = 90) -> float:
    from controlplane.clusters.models import Cluster
    from controlplane.clusters.services import cluster_delete
    from controlplane.core.actors import SYSTEM_ACTOR

    save_broker_logs(cluster, clusters_root, logs)
    t0 = time.monotonic()
    cluster_delete(cluster=Cluster.objects.get(pk=cluster.pk), actor=SYSTEM_ACTOR)
    return Milestones(t0).wait(lambda: not Cluster.objects.filter(pk=cluster.pk).exists(), {}, timeout,
                               f"cluster {cluster.name} to be deleted")


def kill_one(cluster: Any, store: Store, timeout: float = 120) -> tuple[float, Milestones, int, int]:
    """SIGKILL the highest node's broker; seconds until its new process holds a live registration and the
    status (naming that process, Running) says Ready and not Degraded. Also how many times the agent
    started it meanwhile (more than once: the new process died too)."""
    from controlplane.clusters.models import BrokerNode

    victim = BrokerNode.objects.filter(cluster=cluster).order_by("node_id").last()
    assert victim is not None
    pid = int(victim.process["pid"])
    restarts = int(victim.process.get("restarts") or 0)
    node_id = victim.node_id
    incarnation = store.live(cluster.kafka_cluster_id).get(node_id)

    def process() -> dict[str, Any]:
        return dict(BrokerNode.objects.filter(pk=victim.pk).values_list("process", flat=True).first() or {})

    def status_healthy() -> bool:
        status = cluster_status(cluster.pk)
        conds = conditions(status)
        entry: dict[str, Any] = next((b for b in status.get("brokers", []) if b["node_id"] == node_id), {})
        shown = entry.get("process") or {}
        return (conds.get("Ready") == "True" and conds.get("Degraded") == "False"
                and shown.get("pid") not in (None, pid) and shown.get("pid") == process().get("pid")
                and shown.get("state") == "Running")

    def reregistered() -> bool:
        return store.live(cluster.kafka_cluster_id).get(node_id) not in (None, incarnation)

    marks = Milestones(time.monotonic())
    os.kill(pid, signal.SIGKILL)
    took = marks.wait(lambda: reregistered() and status_healthy(), {
        "Degraded=True seen": lambda: conditions(cluster_status(cluster.pk)).get("Degraded") == "True",
        "agent restarted it": lambda: process().get("pid") not in (None, pid),
        "re-registered in store": reregistered,
        "status Ready+not Degraded naming the new pid": status_healthy,
    }, timeout, "Ready and not Degraded after the kill")
    return took, marks, node_id, int(process().get("restarts") or 0) - restarts


def reconcile_passes(log: Path, start: int) -> list[float]:
    """Durations of the clusters.reconcile tasks the worker logged after byte ``start``."""
    text = log.read_bytes()[start:].decode(errors="replace")
    return [float(m) for m in re.findall(r"Task clusters\.reconcile\[[^]]+\] succeeded in ([0-9.]+)s", text)]


def reconcile_failures(log: Path, start: int) -> collections.Counter[str]:
    """The worker's 'topic reconcile failed' warnings after byte ``start``, by error (topic names left out)."""
    text = log.read_bytes()[start:].decode(errors="replace")
    found = re.findall(r"topic reconcile failed: (.*)", text)
    return collections.Counter(re.sub(r"topic '[^']*': ", "", f)[:90] for f in found)


def create_topic_rows(cluster: Any, names: list[str], rf: int) -> tuple[list[float], float]:
    """topic_create for every name in one transaction; ([the commit's time], seconds spent creating rows)."""
    from django.db import transaction

    from controlplane.core.actors import SYSTEM_ACTOR
    from controlplane.streams.services import topic_create

    committed: list[float] = []
    t0 = time.monotonic()
    with transaction.atomic():
        transaction.on_commit(lambda: committed.append(time.monotonic()))  # runs before the enqueue below
        for name in names:
            topic_create(cluster=cluster, name=name, actor=SYSTEM_ACTOR, partitions=1, replication_factor=rf)
    return committed, time.monotonic() - t0


def topics_applied(cluster: Any) -> int:
    """Managed topic rows whose status has observed_generation == generation and Ready=True."""
    from django.db import connection

    from controlplane.streams.models import Topic

    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {Topic._meta.db_table} WHERE cluster_id = %s AND managed AND "
                       "(status->>'observed_generation')::bigint = generation AND status->'conditions' @> "
                       "'[{\"type\": \"Ready\", \"status\": \"True\"}]'::jsonb", [cluster.pk])
        row = cursor.fetchone()
    return int(row[0]) if row else 0


@dataclass
class Resync:
    seconds: list[float]
    busy: int
    writes: dict[str, int]
    parts: dict[str, list[float]]
    rows_changed: int
    pending_actions: list[str]
    cluster_conditions: dict[str, str]
    observe_error: str = ""
    not_done: int = 0  # passes that ended with work left (``Outcome.done`` False)


def noop_resync(cluster: Any, runs: int = 3) -> Resync:
    """reconcile_cluster(resync=True) in this process ``runs`` times (busy passes retried, not counted)."""
    from controlplane.clusters import metadata
    from controlplane.clusters import reconcile as cluster_reconcile
    from controlplane.clusters.credentials import cluster_admin
    from controlplane.streams import reconcile as topic_reconcile
    from controlplane.streams.models import Topic
    from controlplane.streams.topic_plan import Drift, plan_topics
    from dataplane.client.admin import AdminError, ClusterAdmin

    before = {r[0]: (r[1], r[2]) for r in Topic.objects.filter(cluster=cluster)
              .values_list("name", "generation", "status")}
    calls: dict[str, list[float]] = {}
    parts: dict[str, list[float]] = {}
    seconds: list[float] = []
    busy = not_done = 0
    writes = ["create_topics", "delete_topics", "create_partitions", "alter_topic_configs"]
    with (counting(ClusterAdmin, writes, calls),
          counting(ClusterAdmin, ["topics", "topic_configs"], parts),
          counting(metadata, ["registration"], parts),
          counting(cluster_reconcile, ["_act"], parts, "brokers."),
          counting(topic_reconcile, ["plan_topics", "_act"], parts, "topics.")):
        deadline = time.monotonic() + 180
        while len(seconds) < runs and time.monotonic() < deadline:
            t0 = time.perf_counter()
            outcome = cluster_reconcile.reconcile_cluster(cluster.pk, resync=True)
            took = time.perf_counter() - t0
            if outcome.busy:  # the worker holds the cluster's lock: try again, this one is not a pass
                busy += 1
                time.sleep(0.1)
                continue
            seconds.append(took)
            not_done += not outcome.done
    if not seconds:
        raise SystemExit("the worker held the cluster's lock for 180 s: no resync pass could run here")
    after = {r[0]: (r[1], r[2]) for r in Topic.objects.filter(cluster=cluster)
             .values_list("name", "generation", "status")}
    changed = sum(1 for name in before.keys() | after.keys() if before.get(name) != after.get(name))
    status = cluster_status(cluster.pk)
    try:
        # The cluster authenticates: the control plane's own client settings (the internal principal).
        with cluster_admin(cluster, bootstrap=status["bootstrap_servers"], timeout=120) as admin:
            observed, _ = topic_reconcile.observe_topics(admin)
    except AdminError as exc:
        return Resync(seconds, busy, {k: len(v) for k, v in calls.items()}, parts, changed, ["(no observation)"],
                      conditions(status), f"observation failed even with a 120 s deadline: {exc}", not_done)
    rows = list(Topic.objects.filter(cluster=cluster))
    actions = plan_topics([topic_reconcile.desired_topic(r) for r in rows], observed,
                          correct_drift=cluster.drift_policy == "correct")
    pending = [repr(a) for a in actions if not isinstance(a, Drift)]
    return Resync(seconds, busy, {k: len(v) for k, v in calls.items()}, parts, changed, pending,
                  conditions(status), not_done=not_done)


# ---------------------------------------------------------------------------- the run


@dataclass
class Figures:
    rows: list[tuple[str, str, str, str, str]] = field(default_factory=list)

    def add(self, what: str, measured: float | None, baseline: float, goal: float | None, base_what: str,
            waited: float = 0.0) -> None:
        """``measured`` None: it did not happen within ``waited`` seconds."""
        if measured is None:
            self.rows.append((what, f"> {waited:.0f} s (never)", f"{baseline:.2f} s ({base_what})", "-",
                              "-" if goal is None else f"<= {goal:g} s MISS"))
            return
        verdict = "-" if goal is None else f"<= {goal:g} s {ok(measured <= goal)}"
        self.rows.append((what, f"{measured:.2f} s", f"{baseline:.2f} s ({base_what})",
                          f"{ratio(measured, baseline):.1f}x", verdict))

    def print(self) -> None:
        widths = [max(len(r[i]) for r in [*self.rows, ("measure", "time", "baseline", "ratio", "goal")])
                  for i in range(5)]
        for row in [("measure", "time", "baseline", "ratio", "goal"), *self.rows]:
            print("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))


def run(args: argparse.Namespace, tmp: Path, services: Services, procs: Procs) -> int:
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", interactive=False, verbosity=0)
    from controlplane.tenancy.models import Tenant
    from dataplane.cluster.migrations import migrate as migrate_store

    metadata_url = services.database_url
    migrate_store(metadata_url)  # the dataplane's schema, so no broker below pays for creating it
    store = Store(metadata_url)
    tenant = Tenant.objects.create(slug=f"bench-{uuid.uuid4().hex[:6]}", name="bench")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "LOG_LEVEL": "INFO", "SLUICE_VAR_DIR": str(tmp / "var")}
    if args.shared_hypothesis_dir:
        env["HYPOTHESIS_STORAGE_DIRECTORY"] = str(tmp / "hypothesis")
    stack = Stack(procs, tmp, env)
    figures = Figures()
    notes: list[str] = []
    names = [f"bench-{i:05d}" for i in range(args.topics)]
    clusters_root, saved_logs = tmp / "clusters", tmp / "broker-logs"
    try:
        stack.start()
        t = time.monotonic()
        stack.wait_ready()
        cpu = stack.meter(postmaster_pid(tmp / "var" / "postgres"))
        print(f"worker and 2 agents up in {time.monotonic() - t:.1f} s; metadata and control plane in embedded "
              f"Postgres, Celery on embedded Redis; scratch {tmp}", flush=True)
        if importlib.util.find_spec("hypothesis") is not None:
            print("hypothesis is installed: every broker imports it (kio registers strategies) and, started in a "
                  "new directory (as agents do), builds its unicode cache there"
                  + (" -- here in one shared directory (--shared-hypothesis-dir)" if args.shared_hypothesis_dir
                     else ""), flush=True)

        # 1. create to Ready, against starting the brokers directly; rounds alternate the two
        base1s: list[float] = []
        ready1s: list[float] = []
        base3s: list[float] = []
        ready3s: list[float] = []
        three: Any = None
        for rnd in range(1, args.rounds + 1):
            direct = DirectCluster(procs, tmp / "direct", metadata_url, 1)
            cpu.start()
            base1s.append(direct.start())
            direct.stop()
            print(f"round {rnd}: direct 1 broker: started and registered in {base1s[-1]:.2f} s  [CPU s: broker "
                  f"{direct.cpu:.1f}; {cpu.text(cpu.read())}]", flush=True)
            cpu.start()
            one, took, marks = create_managed(tenant, f"one-{rnd}", "basic", 1, store)
            ready1s.append(took)
            print(f"round {rnd}: managed 1 broker (basic): Ready in {took:.2f} s  [{marks.text()}]  [CPU s: "
                  f"{cpu.text(cpu.read())}]", flush=True)
            gone = delete_managed(one, clusters_root, saved_logs)
            print(f"round {rnd}:   deleted (row gone) in {gone:.2f} s", flush=True)

            direct = DirectCluster(procs, tmp / "direct", metadata_url, 3)
            cpu.start()
            base3s.append(direct.start())
            direct.stop()
            print(f"round {rnd}: direct 3 brokers: started and registered in {base3s[-1]:.2f} s  [CPU s: brokers "
                  f"{direct.cpu:.1f}; {cpu.text(cpu.read())}]", flush=True)
            cpu.start()
            three, took, marks = create_managed(tenant, f"three-{rnd}", "dedicated", 3, store)
            ready3s.append(took)
            print(f"round {rnd}: managed 3 brokers (dedicated): Ready in {took:.2f} s  [{marks.text()}]  [CPU s: "
                  f"{cpu.text(cpu.read())}]", flush=True)
            if rnd < args.rounds:
                gone = delete_managed(three, clusters_root, saved_logs)
                print(f"round {rnd}:   deleted (row gone) in {gone:.2f} s", flush=True)
        base1, base3 = statistics.median(base1s), statistics.median(base3s)
        of = f" (median of {args.rounds})" if args.rounds > 1 else ""
        figures.add(f"create to Ready, 1 broker{of}", statistics.median(ready1s), base1, None,
                    "direct start, 1 broker")
        figures.add(f"create to Ready, 3 brokers{of}", statistics.median(ready3s), base3, CREATE_GOAL_S,
                    "direct start, 3 brokers")
        figures.add("  (worst round)", max(ready3s), max(base3s), CREATE_GOAL_S, "worst direct start, 3")

        # 2. SIGKILL one broker of the 3-broker cluster
        killed, marks, node, starts = kill_one(three, store)
        print(f"SIGKILL broker {node}: Ready and not Degraded in {killed:.2f} s, {starts} start(s) by its agent  "
              f"[{marks.text()}]", flush=True)
        if starts > 1:
            notes.append(f"after the first SIGKILL the agent started broker {node} {starts} times (it exited again)")
        figures.add("broker SIGKILL to Ready, not Degraded", killed, base1, KILL_GOAL_S, "direct start, 1 broker")

        # 3. topics: the baseline on fresh direct brokers, then the managed reconcile
        direct = DirectCluster(procs, tmp / "direct", metadata_url, args.rf)
        direct.start()
        base_create, base_observe, base_failed = baseline_topics(direct.bootstrap, names, args.rf)
        direct.stop()
        print(f"direct {direct.size} broker(s): create_topics of {len(names):,} (RF {args.rf}) in one call "
              f"{base_create:.2f} s{f' -- {base_failed} FAILED (timed out)' if base_failed else ''}; list_topics + "
              f"describe_configs {base_observe:.2f} s", flush=True)
        if base_failed:
            notes.append(f"the baseline create_topics left {base_failed} of {len(names)} topics uncreated")

        worker_log_at = stack.logs["worker"].stat().st_size
        committed, made = create_topic_rows(three, names, args.rf)
        if not committed:
            raise SystemExit("the topic transaction did not commit")
        cpu.start()
        marks = Milestones(committed[0])
        kafka_id = three.kafka_cluster_id
        took_t = marks.wait_or_none(lambda: topics_applied(three) == len(names) and is_ready(three.pk), {
            f"all {len(names)} on the brokers": lambda: store.topics(kafka_id) >= len(names),
            "all rows applied": lambda: topics_applied(three) == len(names),
        }, args.topic_timeout)
        used = cpu.read()
        passes = reconcile_passes(stack.logs["worker"], worker_log_at)
        failures = reconcile_failures(stack.logs["worker"], worker_log_at)
        if took_t is None:
            status = cluster_status(three.pk)
            print(f"{len(names):,} topic rows created with topic_create in {made:.1f} s (not timed); NOT reconciled "
                  f"{args.topic_timeout:.0f} s after the commit: {topics_applied(three)} rows applied, "
                  f"{store.topics(kafka_id)} topics on the brokers, cluster {conditions(status)} "
                  f"(topics: {status.get('topics')})  [{marks.text()}]  [CPU s: {cpu.text(used)}]", flush=True)
            notes.append(f"{len(names)} topics were not reconciled within {args.topic_timeout:.0f} s")
        else:
            print(f"{len(names):,} topic rows created with topic_create in {made:.1f} s (not timed); reconciled "
                  f"in {took_t:.2f} s from the commit  [{marks.text()}]  [CPU s: {cpu.text(used)}]", flush=True)
        print(f"  worker: {len(passes)} reconcile passes, those >= 0.5 s: "
              f"{', '.join(f'{p:.1f}' for p in passes if p >= 0.5) or '-'} s; 'topic reconcile failed': "
              f"{sum(failures.values())} {dict(failures) or ''}", flush=True)
        figures.add(f"reconcile of {len(names):,} new topics", took_t, base_create,
                    TOPICS_GOAL_S if len(names) >= 1000 else None, "one create_topics call", args.topic_timeout)

        converged = took_t is not None
        resync = noop_resync(three, runs=3 if converged else 1)
        median = statistics.median(resync.seconds)
        parts = ", ".join(f"{k} {statistics.median(v) * 1000:.0f} ms" for k, v in resync.parts.items())
        print(f"{'no-op ' if converged else ''}resync in-process: {', '.join(f'{x:.2f}' for x in resync.seconds)} s "
              f"(median {median:.2f} s; {resync.busy} busy retries); median per step: {parts}", flush=True)
        admin_writes = sum(resync.writes.values())
        noop_ok = (admin_writes == 0 and resync.rows_changed == 0 and not resync.pending_actions
                   and not resync.not_done)
        print(f"  passes left work pending: {resync.not_done} of {len(resync.seconds)}; "
              f"admin writes {admin_writes} {resync.writes or ''}; topic rows changed {resync.rows_changed}; "
              f"plan over a fresh observation: {resync.observe_error or f'{len(resync.pending_actions)} non-Drift'}"
              f" action(s) {resync.pending_actions[:3]}; cluster {resync.cluster_conditions}  no-op {ok(noop_ok)}",
              flush=True)
        goal = RESYNC_GOAL_S if len(names) >= 1000 else None
        if converged:
            figures.add(f"no-op resync at {len(names):,} topics (median of 3)", median, base_observe, goal,
                        "list_topics + describe_configs")
            if not noop_ok:
                notes.append("the resync was NOT a no-op (see above)")
        else:  # nothing to compare: the pass timed here had work left (or found a broker's lease lapsed)
            steps = "observed topics" if "topic_configs" in resync.parts else "skipped the topics (brokers not ready)"
            figures.rows.append((f"resync pass at {len(names):,} topics, unconverged", f"{median:.2f} s ({steps})",
                                 f"{base_observe:.2f} s (list_topics + describe_configs)", "-",
                                 "-" if goal is None else f"<= {goal:g} s MISS (no no-op pass possible)"))

        # 2b. the kill again with the topics in place (informative; needs a converged cluster to end Ready)
        if converged:
            killed_t, marks, node, starts = kill_one(three, store, timeout=240)
            print(f"SIGKILL broker {node} with {len(names):,} topics: Ready and not Degraded in {killed_t:.2f} s, "
                  f"{starts} start(s) by its agent  [{marks.text()}]", flush=True)
            if starts > 1:
                notes.append(f"after the SIGKILL with topics the agent started broker {node} {starts} times (it "
                             f"exited again)")
            figures.add(f"broker SIGKILL to Ready, {len(names):,} topics", killed_t, base1, None,
                        "direct start, 1 broker")

        gone = delete_managed(three, clusters_root, saved_logs, timeout=120)
        print(f"3-broker cluster deleted (row gone) in {gone:.2f} s", flush=True)
    finally:
        import shutil

        for log in sorted(clusters_root.glob("*/*/broker.log")):
            saved_logs.mkdir(exist_ok=True)
            shutil.copyfile(log, saved_logs / f"left-{log.parent.parent.name}-node{log.parent.name}.log")
        stack.stop()
        store.close()
        from django.db import connections

        connections.close_all()
        left = brokers_under(tmp)
        if left:
            notes.append(f"{len(left)} broker process(es) were still running under the scratch directory; killed")
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
        logs = {**stack.logs, **{p.name: p for p in sorted(saved_logs.glob("*.log"))},
                **{f"direct {p.parent.parent.name}/{p.parent.name}": p
                   for p in sorted((tmp / "direct").glob("*/*/broker.log"))}}
        for name, path in logs.items():
            problems = log_problems(path)
            if problems:
                print(f"{name} log: {len(problems)} warning/error line(s), first: {problems[0][:240]}")
                if args.keep_logs:
                    print(f"  ({path})")

    print(f"\nmanaged clusters on this machine ({os.cpu_count()} cores), topics {len(names):,} x 1 partition, "
          f"RF {args.rf}")
    figures.print()
    for note in notes:
        print(f"NOTE: {note}")
    return 1 if notes else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", type=int, default=None, help="topics to reconcile (default 1000; quick 200)")
    ap.add_argument("--rf", type=int, default=1, choices=(1, 2, 3),
                    help="replication factor of those topics (default 1; the baseline starts this many brokers)")
    ap.add_argument("--topic-timeout", type=float, default=None,
                    help="seconds to wait for the topics to be reconciled (default 150; quick 90)")
    ap.add_argument("--rounds", type=int, default=None, help="create-to-Ready rounds (default 2; quick 1)")
    ap.add_argument("--quick", action="store_true", help="200 topics, one create round: a smoke run")
    ap.add_argument("--shared-hypothesis-dir", action="store_true",
                    help="give the agents (so their brokers) one HYPOTHESIS_STORAGE_DIRECTORY: with the test extras "
                         "installed, kio registers hypothesis strategies at import and hypothesis builds a unicode "
                         "cache (~2 CPU-s) in the current directory, which for an agent's broker is a new one")
    ap.add_argument("--keep-logs", action="store_true", help="keep the scratch directory (logs) and name it")
    ap.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    args = ap.parse_args()
    args.topics = args.topics or (200 if args.quick else 1000)
    args.rounds = args.rounds or (1 if args.quick else 2)
    args.topic_timeout = args.topic_timeout or (90.0 if args.quick else 150.0)

    def on_term(_sig: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    # Embedded services always: the bench must not write into a database the environment names.
    for name in ("DATABASE_URL", "REDIS_URL", "CELERY_DEFAULT_QUEUE"):
        os.environ.pop(name, None)
    os.environ["DJANGO_SETTINGS_MODULE"] = "controlplane.settings"
    procs = Procs()
    tmp = Path(tempfile.mkdtemp(prefix="sluice-bench-managed-", dir=args.dir))
    os.environ["SLUICE_VAR_DIR"] = str(tmp / "var")
    services = ensure_services(tmp / "var", ephemeral=True)
    services.export()
    try:
        return run(args, tmp, services, procs)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    finally:
        procs.stop_all()
        services.stop()
        if args.keep_logs:
            print(f"logs kept under {tmp}")
        else:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
