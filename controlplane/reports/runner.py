"""``run_execute``: one report run, from queued to a final status, in a reports worker.

The status moves queued → running → succeeded | failed | cancelled with compare-and-set updates, so a run
cancelled while queued never starts, and a run is executed once even if its task is delivered twice. The
claim also holds the tenant's share: with ``SLUICE_REPORTS_TENANT_RUNNING`` of its runs already running, a run
stays queued and its task comes back a moment later (the tenant row is locked while counting, so two workers
cannot both take the last place).

The query itself runs in the sandboxed runner (``reports.sandbox``): this process prepares what the runner may
have (the definition, a token for the report's owner, the time range, the limits, for consumer lag the
group's commits, and for typed SQL reports the subjects' schemas, never registry access) and stores what comes
back.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from controlplane.core.actors import SYSTEM_ACTOR
from controlplane.reports import engine, kinds
from controlplane.reports.connection import check_group_access, connection_options, group_commits
from controlplane.reports.models import Report, ReportResultRow, ReportRun, RunStatus
from controlplane.reports.sandbox.launcher import RunnerLost, SandboxUnavailable
from controlplane.reports.sandboxes import sandbox
from controlplane.reports.services import cancel_requested, run_dir, run_request
from controlplane.reports.typed import SubjectProblem, typed_options
from controlplane.tenancy.models import Tenant

log = logging.getLogger(__name__)
CANCELLED_MESSAGE = "Cancelled."
LOST_MESSAGE = "The worker running this report stopped before it finished ({worker}); run it again."
LOST_AFTER_SECONDS = 60
RUNNER_DIED_MESSAGE = ("This run stopped the report engine (its Spark JVM exited while it ran alone), so it "
                       "was stopped; other tenants' runs were retried.")
DEFERRED = "deferred"


def _claim(run_id: str, worker: str) -> bool | None:
    """queued → running; None when the tenant is at its limit of running runs (the run stays queued)."""
    with transaction.atomic():
        tenant_id = (ReportRun.objects.filter(pk=run_id).values_list("report__cluster__tenant_id", flat=True)
                     .first())
        if tenant_id is None:
            return False
        Tenant.objects.select_for_update().filter(pk=tenant_id).first()
        running = ReportRun.objects.filter(report__cluster__tenant_id=tenant_id, status=RunStatus.RUNNING).count()
        if running >= settings.SLUICE_REPORTS_TENANT_RUNNING and ReportRun.objects.filter(
                pk=run_id, status=RunStatus.QUEUED).exists():
            return None
        return bool(ReportRun.objects.filter(pk=run_id, status=RunStatus.QUEUED).update(
            status=RunStatus.RUNNING, started_at=timezone.now(), worker=worker))


def _request(run: ReportRun, started: datetime) -> dict[str, Any]:
    """Everything the runner gets for the run: nothing of the control plane's own access."""
    definition = run.definition
    window = kinds.resolve_time_range(definition.get("time_range") or {}, started)
    request: dict[str, Any] = {
        "run": str(run.pk), "definition": definition, "connection": connection_options(run.report),
        "time_range": [window.start_ms, window.end_ms],
        "limits": {"run_seconds": settings.SLUICE_REPORTS_RUN_SECONDS, "rows": settings.SLUICE_REPORTS_RESULT_ROWS,
                   "bytes": settings.SLUICE_REPORTS_RESULT_BYTES},
    }
    if definition["kind"] == "sql" and kinds.typed_sides(definition["params"]):
        try:
            request["typed"] = typed_options(cluster=run.report.cluster, principal=run.report.owner_principal,
                                             params=definition["params"])
        except SubjectProblem as e:
            raise engine.ReportError(e.message) from None
    if definition["kind"] == "consumer_lag":
        params = definition["params"]
        check_group_access(run.report, params["group"], params["topic"])
        request["commits"] = group_commits(run.report, params["group"], params["topic"], window.end_ms)
    return request


def _progress_recorder(run_id: str) -> Any:
    def record(progress: dict[str, int]) -> None:
        ReportRun.objects.filter(pk=run_id).update(progress=progress)
    return record


def _run_sandboxed(run: ReportRun, request: dict[str, Any]) -> Any:
    """The runner's reply; a run in flight when the runner died is retried alone (see ``launcher``)."""
    run_id = str(run.pk)
    exclusive = False
    for _ in range(3):
        try:
            return sandbox().run(request, out=run_dir(run_id), cancelled=lambda: cancel_requested(run_id),
                                 on_progress=_progress_recorder(run_id), exclusive=exclusive)
        except RunnerLost as lost:
            if lost.alone:
                raise engine.ReportError(RUNNER_DIED_MESSAGE) from None
            log.warning("report run %s: the runner died with other runs in flight; retrying it alone", run_id)
            exclusive = True
    raise engine.ReportError(RUNNER_DIED_MESSAGE)


def run_execute(*, run_id: str, worker: str = "") -> str:
    """Execute the run; returns its final status, its current one when it was not queued, or ``deferred``
    when the tenant is at its limit (the caller queues the task again)."""
    claimed = _claim(run_id, worker)
    if claimed is None:
        return DEFERRED
    run = ReportRun.objects.select_related("report__cluster").filter(pk=run_id).first()
    if run is None or not claimed:
        return run.status if run is not None else "missing"
    clock = time.monotonic()
    outcome: engine.Outcome | None = None
    error = ""
    status = RunStatus.SUCCEEDED
    scanned = None
    try:
        if cancel_requested(run_id):
            raise engine.ReportError(CANCELLED_MESSAGE)
        reply = _run_sandboxed(run, _request(run, run.started_at or timezone.now()))
        scanned = reply.scanned
        if reply.ok:
            outcome = engine.load_result(run_dir(run_id), reply.columns)
        elif reply.reason == "cancel" or cancel_requested(run_id):
            status, error = RunStatus.CANCELLED, CANCELLED_MESSAGE
        else:
            status, error = RunStatus.FAILED, reply.error
    except SandboxUnavailable as e:
        status, error = RunStatus.FAILED, f"Reports are unavailable: {e}"
        log.error("report run %s: %s", run_id, e)
    except BaseException as e:
        if cancel_requested(run_id):
            status, error = RunStatus.CANCELLED, CANCELLED_MESSAGE
        else:
            status, error = RunStatus.FAILED, engine.readable_error(e)
            log.info("report run %s failed: %s", run_id, error, exc_info=not isinstance(e, Exception))
        if not isinstance(e, Exception):
            _finish(run, status, error, scanned, None, clock)
            raise
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
