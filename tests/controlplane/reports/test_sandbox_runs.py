"""Report runs in the sandboxed runner, driven in this process (``run_execute`` with a sandbox of the test's
own, on the reports stack's broker): the runner's own SQL check, a JVM killed under one run and under two,
and each tenant's limits. In the ``spark`` group: this sandbox's JVM is the second one of the module."""

from __future__ import annotations

import os
import signal
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.reports.models import Report, ReportRun, RunStatus
from controlplane.tenancy.models import Role
from tests.controlplane.conftest import make_world
from tests.controlplane.managed.conftest import wait_for
from tests.controlplane.reports.conftest import ReportsStack
from tests.controlplane.reports.test_runs import _create, _orders

pytestmark = [pytest.mark.xdist_group("spark"), pytest.mark.django_db(transaction=True)]

LONG = "SELECT count(*) AS n FROM {view} CROSS JOIN range(1000000000000)"


@pytest.fixture(scope="module")
def sandbox(reports_stack: ReportsStack) -> Iterator[Any]:
    """A sandbox of this process's own, installed as the one ``run_execute`` uses."""
    from controlplane.reports import sandboxes
    from controlplane.reports.sandbox.launcher import Sandbox, hidden_paths

    box = Sandbox(hidden_paths())
    box.start()
    previous, sandboxes._sandbox = sandboxes._sandbox, box
    try:
        yield box
    finally:
        sandboxes._sandbox = previous
        box.stop()


def _queued(report: Report) -> ReportRun:
    from controlplane.reports.services import _definition

    return ReportRun.objects.create(report=report, trigger="manual", definition=_definition(report))


def _execute(run: ReportRun) -> ReportRun:
    from controlplane.reports.runner import run_execute

    run_execute(run_id=str(run.pk), worker="test")
    run.refresh_from_db()
    return run


def _in_background(run: ReportRun) -> threading.Thread:
    from django.db import connection

    def target() -> None:
        try:
            _execute(run)
        finally:
            connection.close()
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def _kill_jvm(runner_pid: int) -> None:
    """SIGKILL the runner's JVM (found in the runner's process group), as a crash or the OOM killer would."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        if comm == "java" and int(fields[2]) == runner_pid:
            os.kill(int(entry), signal.SIGKILL)
            return
    raise AssertionError(f"no JVM in process group {runner_pid}")


def _world(prefix: str, cluster_for: Any, reports_stack: ReportsStack) -> tuple[Any, Any, str, str]:
    world = make_world(f"{prefix}-{uuid.uuid4().hex[:4]}")
    cluster = cluster_for(world.tenant)
    topic, _ = _orders(reports_stack.kafka)
    return world, cluster, topic, topic.replace("-", "_")


def _report(world: Any, cluster: Any, topic: str, sql: str) -> Report:
    body = _create(world.client(Role.MEMBER), f"{world.base}/clusters/{cluster.pk}",
                   {"name": f"r-{uuid.uuid4().hex[:6]}", "kind": "sql", "params": {"topics": [topic], "sql": sql}})
    return Report.objects.get(pk=body["id"])


def test_the_runner_refuses_what_the_api_would_have(sandbox: Any, reports_stack: ReportsStack,
                                                   cluster_for: Any) -> None:
    """Rows written past the API (as a bug or a parser difference would let through) still never run."""
    world, cluster, topic, view = _world("rep-hostile", cluster_for, reports_stack)
    good = _report(world, cluster, topic, f"SELECT count(*) AS n FROM {view}")
    hostile = {
        f"SELECT * FROM IDENTIFIER('text.`{Path(__file__).resolve()}`')": "only the topic views can be read",
        "SELECT reflect('java.lang.System', 'getenv', 'DATABASE_URL') AS x": "function 'reflect'",
        "SELECT java_method('java.lang.System', 'exit', 0) AS x": "function 'java_method'",
        f"SELECT * FROM {view} UNION ALL SELECT * FROM parquet.`/`": "only the topic views can be read",
        "SET spark.sql.runSQLOnFiles=true": "'SET' is not allowed",
        f"SELECT /*+ REPARTITION(100) */ * FROM {view}": "hints are not allowed",
        "CREATE TEMPORARY FUNCTION f AS 'java.lang.Runtime'": "is not allowed",
    }
    for sql, words in hostile.items():
        Report.objects.filter(pk=good.pk).update(params={"topics": [topic], "sql": sql})
        good.refresh_from_db()
        run = _execute(_queued(good))
        assert run.status == RunStatus.FAILED and words in run.error and run.error.startswith("Refused"), \
            (sql, run.error)
    Report.objects.filter(pk=good.pk).update(params={"topics": [topic], "sql": f"SELECT count(*) AS n FROM {view}"})
    good.refresh_from_db()
    run = _execute(_queued(good))
    assert run.status == RunStatus.SUCCEEDED and run.result_rows.get().values == [12], run.error


def test_a_run_whose_jvm_dies_fails_alone_and_the_runner_comes_back(sandbox: Any, reports_stack: ReportsStack,
                                                                    cluster_for: Any) -> None:
    world, cluster, topic, view = _world("rep-crash", cluster_for, reports_stack)
    long = _report(world, cluster, topic, LONG.format(view=view))
    run = _queued(long)
    thread = _in_background(run)
    wait_for(lambda: (ReportRun.objects.get(pk=run.pk).progress or {}).get("tasks_active"), 180,
             "the long run's tasks to run")
    first = sandbox.runner_pid()
    _kill_jvm(first)
    thread.join(120)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and "stopped the report engine" in run.error, run.error
    quick = _report(world, cluster, topic, f"SELECT count(*) AS n FROM {view}")
    again = _execute(_queued(quick))
    assert again.status == RunStatus.SUCCEEDED and again.result_rows.get().values == [12], again.error
    assert sandbox.runner_pid() not in (None, first)


def test_runs_in_flight_when_the_jvm_dies_are_retried_one_at_a_time(sandbox: Any, reports_stack: ReportsStack,
                                                                     cluster_for: Any) -> None:
    from django.core.cache import cache

    from controlplane.reports.services import CANCEL_KEY

    runs, threads = [], []
    world, cluster, topic, view = _world("rep-two", cluster_for, reports_stack)
    for _ in range(2):  # two long runs, both in flight (whose tenant they are is nothing to the runner)
        runs.append(_queued(_report(world, cluster, topic, LONG.format(view=view))))
        threads.append(_in_background(runs[-1]))
    for run in runs:
        wait_for(lambda r=run: (ReportRun.objects.get(pk=r.pk).progress or {}).get("jobs"), 180,
                 "both runs' jobs to start")
    first = sandbox.runner_pid()
    ReportRun.objects.filter(pk__in=[r.pk for r in runs]).update(progress={})
    _kill_jvm(first)
    # Each is run again on a new runner, alone; the test then cancels it (the query never ends by itself).
    pending = list(runs)
    while pending:
        started = wait_for(lambda: next((r for r in pending if (ReportRun.objects.get(pk=r.pk).progress or {})
                                         .get("tasks_active")), None), 180, "a retried run's tasks to run")
        assert sandbox.runner_pid() != first and sandbox._exclusive, "a retry runs alone, on a new runner"
        cache.set(CANCEL_KEY.format(run_id=started.pk), "1", 60)
        wait_for(lambda s=started: ReportRun.objects.get(pk=s.pk).status == RunStatus.CANCELLED, 120,
                 "the retried run to be cancelled")
        pending.remove(started)
    for thread in threads:
        thread.join(60)
    for run in runs:
        run.refresh_from_db()
        assert run.status == RunStatus.CANCELLED and "engine" not in run.error, run.error


def test_a_tenants_run_time_and_result_size_are_bounded(sandbox: Any, reports_stack: ReportsStack,
                                                        cluster_for: Any, settings: Any) -> None:
    world, cluster, topic, view = _world("rep-limits", cluster_for, reports_stack)
    settings.SLUICE_REPORTS_RUN_SECONDS = 3
    run = _execute(_queued(_report(world, cluster, topic, LONG.format(view=view))))
    assert run.status == RunStatus.FAILED and "longer than 3 s" in run.error, run.error
    settings.SLUICE_REPORTS_RUN_SECONDS = 300
    settings.SLUICE_REPORTS_RESULT_ROWS = 100
    run = _execute(_queued(_report(world, cluster, topic, f"SELECT id FROM {view} CROSS JOIN range(10)")))
    assert run.status == RunStatus.FAILED and "more than 100 rows" in run.error, run.error
    run = _execute(_queued(_report(world, cluster, topic, f"SELECT id FROM {view} CROSS JOIN range(5)")))
    assert run.status == RunStatus.SUCCEEDED and run.row_count == 60, run.error
