"""Result expiry against real Postgres and real files: what goes, what never does, and a sweep killed midway."""

from __future__ import annotations

import os
import signal
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from controlplane.reports.models import Report, ReportResultRow, ReportRun
from controlplane.tenancy.models import Role
from tests.controlplane.conftest import TenantWorld
from tests.controlplane.factories import ClusterFactory
from tests.controlplane.managed.conftest import wait_for
from tests.support.stack import Process, database_url


@pytest.fixture
def var_dir(tmp_path: Path, settings: Any) -> Path:
    settings.VAR_DIR = tmp_path / "var"
    settings.SLUICE_REPORT_RESULT_DAYS = 30
    return Path(settings.VAR_DIR)


def _run(report: Report, *, status: str = "succeeded", age: timedelta = timedelta(0), rows: int = 2,
         parquet: bool = False) -> ReportRun:
    """A run queued and finished ``age`` ago, with result rows or a Parquet directory of two part files."""
    when = timezone.now() - age
    run = ReportRun.objects.create(report=report, status=status, storage="parquet" if parquet else "rows",
                                   row_count=rows)
    finished = when if status in ("succeeded", "failed", "cancelled") else None
    ReportRun.objects.filter(pk=run.pk).update(queued_at=when, finished_at=finished, started_at=when)
    if parquet:
        directory = Path(settings.VAR_DIR) / "reports" / str(run.pk)
        directory.mkdir(parents=True)
        for i in range(2):
            (directory / f"part-{i:05d}.parquet").write_bytes(b"x" * 64)
    else:
        ReportResultRow.objects.bulk_create([ReportResultRow(run=run, ordinal=i, values=[i]) for i in range(rows)])
    run.refresh_from_db()
    return run


def _report(world: TenantWorld, name: str = "r", keep_runs: int = 50) -> Report:
    return Report.objects.create(cluster=ClusterFactory(tenant=world.tenant), name=name, kind="top_keys",
                                 params={"topic": "t", "limit": 10}, keep_runs=keep_runs)


@pytest.mark.django_db
def test_old_and_surplus_finished_runs_go_with_their_rows_and_files(world_a: TenantWorld, var_dir: Path) -> None:
    from controlplane.audit.models import AuditEvent
    from controlplane.reports.retention import runs_expire

    report = _report(world_a, keep_runs=2)
    newest = [_run(report, age=timedelta(hours=h), parquet=h == 1) for h in (1, 2)]
    surplus = [_run(report, status=s, age=timedelta(days=d), parquet=d == 3)
               for s, d in (("failed", 3), ("cancelled", 4))]
    # Never deleted, however old or however many newer runs there are.
    running = _run(report, status="running", age=timedelta(days=90))
    queued = _run(report, status="queued", age=timedelta(days=91))
    other = _report(world_a, name="other")  # keeps 50: only age decides
    kept_elsewhere = _run(other, age=timedelta(days=29), parquet=True)
    old = _run(other, age=timedelta(days=31), parquet=True)

    result = runs_expire(batch=2)  # several batches
    assert result.runs == 3 and result.directories == 0
    left = set(ReportRun.objects.values_list("pk", flat=True))
    assert left == {r.pk for r in (*newest, running, queued, kept_elsewhere)}
    assert not ReportResultRow.objects.filter(run_id__in=[r.pk for r in (old, *surplus)]).exists()
    assert ReportResultRow.objects.filter(run=newest[1]).count() == 2
    on_disk = {p.name for p in (var_dir / "reports").iterdir()}
    assert on_disk == {str(newest[0].pk), str(kept_elsewhere.pk)}
    audit = dict(AuditEvent.objects.filter(action="report.runs.expire", actor_type="system")
                 .values_list("target_id", "data"))
    assert audit == {str(report.pk): {"runs": 2}, str(other.pk): {"runs": 1}}
    # Idempotent: nothing more to do.
    assert runs_expire().runs == 0 and AuditEvent.objects.filter(action="report.runs.expire").count() == 2


@pytest.mark.django_db
def test_no_age_limit_keeps_old_runs(world_a: TenantWorld, var_dir: Path, settings: Any) -> None:
    from controlplane.reports.retention import runs_expire

    settings.SLUICE_REPORT_RESULT_DAYS = 0
    report = _report(world_a)
    _run(report, age=timedelta(days=400))
    assert runs_expire().runs == 0 and ReportRun.objects.count() == 1


@pytest.mark.django_db
def test_directories_no_run_owns_are_removed(world_a: TenantWorld, var_dir: Path) -> None:
    """What a sweep killed between its commit and the files leaves (also a half-removed directory)."""
    import uuid

    from controlplane.reports.retention import runs_expire

    report = _report(world_a)
    alive = _run(report, parquet=True)
    running = _run(report, status="running")  # Spark is writing its result right now
    (var_dir / "reports" / str(running.pk)).mkdir()
    orphan = var_dir / "reports" / str(uuid.uuid4())
    (orphan / "sub").mkdir(parents=True)
    (orphan / "part-00001.parquet").write_bytes(b"x")  # part-00000 already removed
    (var_dir / "reports" / "notes.txt").write_text("not ours")
    assert runs_expire().directories == 1
    assert {p.name for p in (var_dir / "reports").iterdir()} == {str(alive.pk), str(running.pk), "notes.txt"}


def test_a_sweep_killed_midway_is_finished_by_the_next(transactional_db: None, world_a: TenantWorld,
                                                       var_dir: Path, tmp_path: Path) -> None:
    """A real process running the sweep is SIGKILLed once it has removed its first directory; whatever it had
    done by then, the next sweep leaves exactly the runs that should stay, and no file of the others."""
    from django.db import connection

    from controlplane.reports.retention import runs_expire

    report = _report(world_a, keep_runs=1)
    keep = _run(report, parquet=True)
    running = _run(report, status="running", age=timedelta(days=60))
    doomed = [_run(report, age=timedelta(minutes=m + 1), parquet=True) for m in range(120)]
    code = ("import django; django.setup(); from controlplane.reports.retention import runs_expire; "
            "runs_expire(batch=10)")
    env = {**os.environ, "DATABASE_URL": database_url(connection.settings_dict["NAME"]),
           "SLUICE_VAR_DIR": str(var_dir), "DJANGO_SETTINGS_MODULE": "controlplane.settings",
           "SECRET_KEY": settings.SECRET_KEY}
    sweeper = Process("sweeper", [sys.executable, "-c", code], env, tmp_path / "sweeper.log")
    sweeper.start()
    try:
        gone = [var_dir / "reports" / str(r.pk) for r in doomed]
        wait_for(lambda: any(not p.exists() for p in gone) or (sweeper.proc and sweeper.proc.poll() is not None),
                 60, "the sweeper to remove a directory", detail=sweeper.tail)
        sweeper.stop(signal.SIGKILL)
    finally:
        sweeper.stop(signal.SIGKILL)
    print("left by the killed sweeper:", ReportRun.objects.count(), "runs,",
          len(list((var_dir / "reports").iterdir())), "directories")
    runs_expire()
    assert set(ReportRun.objects.values_list("pk", flat=True)) == {keep.pk, running.pk}
    assert {p.name for p in (var_dir / "reports").iterdir()} == {str(keep.pk)}


@pytest.mark.django_db
def test_api_shows_expiry_and_takes_keep_runs(world_a: TenantWorld, var_dir: Path) -> None:
    report = _report(world_a)
    done = _run(report, age=timedelta(days=1))
    running = _run(report, status="running")
    base = f"{world_a.base}/clusters/{report.cluster_id}/reports/{report.pk}"
    viewer = world_a.client(Role.VIEWER)
    body = viewer.get(f"{base}/runs/{done.pk}").json()
    assert done.finished_at is not None
    assert body["expires_at"] == (done.finished_at + timedelta(days=30)).isoformat().replace("+00:00", "Z")
    assert viewer.get(f"{base}/runs/{running.pk}").json()["expires_at"] is None
    member = world_a.client(Role.MEMBER)
    for bad in (0, -1, "many", 10_001):
        response = member.patch(base, {"keep_runs": bad}, format="json")
        assert response.status_code == 400 and "keep_runs" in response.json()["extra"]["fields"], response.json()
    response = member.patch(base, {"keep_runs": 7}, format="json")
    assert response.status_code == 200 and response.json()["keep_runs"] == 7
    assert viewer.patch(base, {"keep_runs": 8}, format="json").status_code == 403


def test_the_sweep_is_a_beat_job_on_the_default_queue() -> None:
    from controlplane.celery_app import app

    app.loader.import_default_modules()
    entry = settings.CELERY_BEAT_SCHEDULE["reports-expire-runs"]
    assert entry["task"] == "reports.expire_runs" and entry["task"] in app.tasks
    assert entry["options"]["queue"] == settings.CELERY_TASK_DEFAULT_QUEUE
