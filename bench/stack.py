"""The stack a managed-cluster benchmark runs on, shared by bench/managed.py and bench/rebalance.py.

Embedded Postgres and Redis (never the servers DATABASE_URL/REDIS_URL name), a Celery worker running
``clusters.reconcile``, and two agents (``sluice agent``, racks r1 and r2, port pools below the kernel's
ephemeral range) that start ``sluice broker`` processes; the control plane's schema, the dataplane's metadata
store and a bench tenant. ``bench_main`` is a benchmark's ``main`` around its own ``run``; ``ManagedBench``
brings the stack up and down inside that run. Every process started here is stopped by pid, and any broker
left under the scratch directory is killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import CLK_TCK, ROOT, Procs, self_cpu

from sluice.embedded import Services, ensure_services, free_port_range

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



# ---------------------------------------------------------------------------- processes


def brokers_under(root: Path) -> list[int]:
    """Pids of broker processes whose command line points under ``root`` (the agents' cluster directories)."""
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if "broker" in cmdline and any(str(root) in part for part in cmdline):
            found.append(int(proc.info["pid"]))
    return found

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


# ---------------------------------------------------------------------------- a benchmark's run and main


@dataclass
class ManagedBench:
    """The control plane's and the dataplane's schemas, a bench tenant and the running ``Stack``, for one run.

    Owned by the benchmark's main thread: ``start`` once, ``stop`` once in a ``finally`` (it copes with a
    ``start`` that failed half-way).
    """

    tmp: Path
    services: Services
    procs: Procs
    env_extra: dict[str, str] = field(default_factory=dict)
    store: Store | None = None
    tenant: Any = None
    stack: Stack | None = None
    ready_s: float = 0.0  # seconds the worker and the agents took to come up after starting
    left: list[int] = field(default_factory=list)  # brokers still running under ``tmp`` at ``stop`` (killed)

    @property
    def metadata_url(self) -> str:
        return self.services.database_url

    def start(self) -> None:
        """Migrate both schemas, create the tenant, start the worker and agents and wait until they are up."""
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", interactive=False, verbosity=0)
        from controlplane.tenancy.models import Tenant
        from dataplane.cluster.migrations import migrate as migrate_store

        migrate_store(self.metadata_url)  # the dataplane's schema, so no broker below pays for creating it
        self.store = Store(self.metadata_url)
        self.tenant = Tenant.objects.create(slug=f"bench-{uuid.uuid4().hex[:6]}", name="bench")
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "LOG_LEVEL": "INFO", "SLUICE_VAR_DIR": str(self.tmp / "var"),
               **self.env_extra}
        self.stack = Stack(self.procs, self.tmp, env)
        self.stack.start()
        t = time.monotonic()
        self.stack.wait_ready()
        self.ready_s = time.monotonic() - t

    def stop(self) -> list[int]:
        """Stop the worker and agents, close the database connections, kill any broker left under ``tmp``; the
        pids of those left brokers."""
        if self.stack is not None:
            self.stack.stop()
        if self.store is not None:
            self.store.close()
        from django.db import connections

        connections.close_all()
        self.left = brokers_under(self.tmp)
        for pid in self.left:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        return self.left


def bench_main(name: str, run: Callable[[Path, Services, Procs], int], *, scratch: str | None = None,
               keep_logs: bool = False) -> int:
    """A managed benchmark's ``main``: embedded services in a fresh scratch directory, ``run`` in them, and
    everything stopped and (unless ``keep_logs``) removed after, on an error, Ctrl-C or SIGTERM too."""

    def on_term(_sig: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    # Embedded services always: the bench must not write into a database the environment names.
    for var in ("DATABASE_URL", "REDIS_URL", "CELERY_DEFAULT_QUEUE"):
        os.environ.pop(var, None)
    os.environ["DJANGO_SETTINGS_MODULE"] = "controlplane.settings"
    procs = Procs()
    tmp = Path(tempfile.mkdtemp(prefix=f"sluice-bench-{name}-", dir=scratch))
    os.environ["SLUICE_VAR_DIR"] = str(tmp / "var")
    services = ensure_services(tmp / "var", ephemeral=True)
    services.export()
    try:
        return run(tmp, services, procs)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    finally:
        procs.stop_all()
        services.stop()
        if keep_logs:
            print(f"logs kept under {tmp}")
        else:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
