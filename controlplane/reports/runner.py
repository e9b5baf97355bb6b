"""``run_execute``: one report run, from queued to a final status, in a reports worker.

The status moves queued → running → succeeded | failed | cancelled with compare-and-set updates, so a run
cancelled while queued never starts, and a run is executed once even if its task is delivered twice.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import time
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from controlplane.reports import engine, kinds
from controlplane.reports.connection import connection_options, internal_options
from controlplane.reports.models import Report, ReportResultRow, ReportRun, RunStatus
from controlplane.reports.services import cancel_requested, run_dir

log = logging.getLogger(__name__)
CANCELLED_MESSAGE = "Cancelled."


LOST_MESSAGE = "The worker running this report stopped before it finished ({worker}); run it again."
LOST_AFTER_SECONDS = 60


def run_execute(*, run_id: str, worker: str = "") -> str:
    """Execute the run; returns its final status (or its current one when it was not queued)."""
    started = timezone.now()
    claimed = ReportRun.objects.filter(pk=run_id, status=RunStatus.QUEUED).update(
        status=RunStatus.RUNNING, started_at=started, worker=worker)
    run = ReportRun.objects.select_related("report__cluster").filter(pk=run_id).first()
    if run is None or not claimed:
        return run.status if run is not None else "missing"
    clock = time.monotonic()
    from controlplane.reports.worker import CancelWatch, spark

    group = f"sluice-report-run-{run.pk}"
    outcome: engine.Outcome | None = None
    error = ""
    status = RunStatus.SUCCEEDED
    scanned = None
    watch: CancelWatch | None = None
    try:
        if cancel_requested(str(run.pk)):
            raise engine.ReportError(CANCELLED_MESSAGE)
        session = spark().newSession()
        session.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        sc = session.sparkContext
        sc.setJobGroup(group, f"report {run.report.name} run {run.pk}", interruptOnCancel=True)
        with CancelWatch(session, str(run.pk), group) as watch:
            definition = run.definition
            window = kinds.resolve_time_range(definition.get("time_range") or {}, started)
            df, scanned = engine.prepare(session, definition, connection_options(run.report), window,
                                         offsets_connection=internal_options(run.report.cluster))
            if cancel_requested(str(run.pk)):
                raise engine.ReportError(CANCELLED_MESSAGE)
            outcome = engine.store(df, run_dir(str(run.pk)))
    except BaseException as e:
        if cancel_requested(str(run.pk)) or (watch is not None and watch.cancelled.is_set()):
            status, error = RunStatus.CANCELLED, CANCELLED_MESSAGE
        else:
            status, error = RunStatus.FAILED, engine.readable_error(e)
            log.info("report run %s failed: %s", run.pk, error, exc_info=not isinstance(e, Exception))
        if not isinstance(e, Exception):
            _finish(run, status, error, scanned, None, clock)
            raise
    finally:
        with contextlib.suppress(Exception):  # the session may be gone with the worker
            spark().sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    if status != RunStatus.SUCCEEDED:  # a failed write's partial files (a cancelled task may add more: best effort)
        shutil.rmtree(run_dir(str(run.pk)), ignore_errors=True)
    _finish(run, status, error, scanned, outcome, clock)
    return status


def _finish(run: ReportRun, status: str, error: str, scanned: int | None, outcome: engine.Outcome | None,
            clock: float) -> None:
    fields = {"status": status, "finished_at": timezone.now(), "error": error,
              "duration_ms": int((time.monotonic() - clock) * 1000), "records_scanned": scanned}
    with transaction.atomic():
        if outcome is not None and status == RunStatus.SUCCEEDED:
            fields.update(columns=outcome.columns, row_count=outcome.row_count, storage=outcome.storage)
            ReportResultRow.objects.bulk_create(
                [ReportResultRow(run_id=run.pk, ordinal=i, values=row) for i, row in enumerate(outcome.rows)],
                batch_size=2000)
        ReportRun.objects.filter(pk=run.pk).update(**fields)


def run_scheduled(*, report_id: str) -> str | None:
    """Beat's entry point: queue a run of the report (gone reports are skipped)."""
    from controlplane.core.actors import SYSTEM_ACTOR
    from controlplane.reports.services import run_request

    report = Report.objects.select_related("cluster__tenant").filter(pk=report_id).first()
    if report is None:
        return None
    return str(run_request(report=report, actor=SYSTEM_ACTOR, trigger="schedule").pk)


def runs_fail_orphaned(*, worker: str) -> int:
    """A worker that starts fails the runs its previous life left running (same hostname, so a ping
    would take them for alive)."""
    return ReportRun.objects.filter(status=RunStatus.RUNNING, worker=worker).update(
        status=RunStatus.FAILED, finished_at=timezone.now(), error=LOST_MESSAGE.format(worker=worker))


def runs_reap_lost(*, live_workers: set[str], now: datetime | None = None) -> int:
    """Fail runs left ``running`` by a worker that is gone (killed, or its machine lost): a run is never
    "running" forever. ``live_workers`` are the hostnames that answered a ping; a run younger than
    ``LOST_AFTER_SECONDS`` is left alone (its worker may not have been asked yet)."""
    cutoff = (now or timezone.now()) - timedelta(seconds=LOST_AFTER_SECONDS)
    reaped = 0
    for run in ReportRun.objects.filter(status=RunStatus.RUNNING, started_at__lt=cutoff).exclude(
            worker__in=live_workers).only("pk", "worker"):
        reaped += ReportRun.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(
            status=RunStatus.FAILED, finished_at=timezone.now(),
            error=LOST_MESSAGE.format(worker=run.worker or "unknown worker"))
    return reaped
