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
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, Procs, ok, ratio
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # type: ignore[attr-defined]
from stack import (
    POLL_S,
    QUIET_KAFKA,
    ManagedBench,
    Milestones,
    Store,
    bench_main,
    cluster_status,
    conditions,
    create_managed,
    delete_managed,
    is_ready,
    postmaster_pid,
    tree_cpu,
)

from sluice.embedded import Services, free_port

CREATE_GOAL_S = 10.0  # 3 brokers, create to Ready
KILL_GOAL_S = 20.0  # SIGKILL to Ready and not Degraded
TOPICS_GOAL_S = 30.0  # 1,000 topics reconciled
RESYNC_GOAL_S = 2.0  # a no-op resync pass


# ---------------------------------------------------------------------------- timing helpers



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



def log_problems(path: Path) -> list[str]:
    """ERROR/CRITICAL/Traceback lines and WARNING lines of a log, for the report."""
    if not path.exists():
        return []
    return [line for line in path.read_text(errors="replace").splitlines()
            if re.search(r"\b(ERROR|CRITICAL|WARNING)\b|Traceback", line)]



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
    from controlplane.resources.services import topic_create

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

    from controlplane.resources.models import Topic

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
    from controlplane.clusters.kafka_clients import admin_as_internal
    from controlplane.reconcile import nodes as node_step
    from controlplane.reconcile import pipeline
    from controlplane.reconcile import topics as topic_reconcile
    from controlplane.reconcile.topic_plan import Drift, plan_topics
    from controlplane.resources.models import Topic
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
          counting(node_step, ["apply"], parts, "brokers."),
          counting(topic_reconcile, ["plan_topics", "apply"], parts, "topics.")):
        deadline = time.monotonic() + 180
        while len(seconds) < runs and time.monotonic() < deadline:
            t0 = time.perf_counter()
            outcome = pipeline.reconcile_cluster(cluster.pk, resync=True)
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
        with admin_as_internal(cluster, bootstrap=status["bootstrap_servers"], timeout=120) as admin:
            observed, _ = topic_reconcile.observe_topics(admin, admin.topics())
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
    bench = ManagedBench(tmp, services, procs, env_extra={"HYPOTHESIS_STORAGE_DIRECTORY": str(tmp / "hypothesis")}
                         if args.shared_hypothesis_dir else {})
    metadata_url = services.database_url
    figures = Figures()
    notes: list[str] = []
    names = [f"bench-{i:05d}" for i in range(args.topics)]
    clusters_root, saved_logs = tmp / "clusters", tmp / "broker-logs"
    try:
        bench.start()
        assert bench.stack is not None and bench.store is not None
        stack, store, tenant = bench.stack, bench.store, bench.tenant
        cpu = stack.meter(postmaster_pid(tmp / "var" / "postgres"))
        print(f"worker and 2 agents up in {bench.ready_s:.1f} s; metadata and control plane in embedded "
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
        left = bench.stop()
        if left:
            notes.append(f"{len(left)} broker process(es) were still running under the scratch directory; killed")
        logs = {**(bench.stack.logs if bench.stack is not None else {}),
                **{p.name: p for p in sorted(saved_logs.glob("*.log"))},
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

    return bench_main("managed", lambda tmp, services, procs: run(args, tmp, services, procs), scratch=args.dir,
                      keep_logs=args.keep_logs)

if __name__ == "__main__":
    raise SystemExit(main())
