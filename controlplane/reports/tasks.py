"""Report tasks: thin callers of ``reports.runner``. They run on the reports queue
(``SLUICE_REPORTS_QUEUE``), whose workers hold the Spark session."""

from __future__ import annotations

from celery import Task, current_app, shared_task

from controlplane.reports.retention import runs_expire
from controlplane.reports.runner import DEFERRED, run_execute, runs_reap_lost
from controlplane.reports.runner import run_scheduled as queue_run

DEFER_SECONDS = 1.0


@shared_task(name="reports.run", acks_late=False, bind=True)
def run_report(self: Task, run_id: str) -> str:
    # acks_late off: a run killed with its worker is not re-run by itself (it may have been the run that
    # killed it); reap_lost_runs, or the worker's next start, records it failed.
    status = run_execute(run_id=run_id, worker=self.request.hostname or "")
    if status == DEFERRED:  # the tenant's share of the runner is in use: the run waits its turn, queued
        run_report.apply_async(args=[run_id], queue=self.request.delivery_info.get("routing_key") or None,
                               countdown=DEFER_SECONDS)
    return status


@shared_task(name="reports.run_scheduled")
def run_scheduled(report_id: str) -> str | None:
    return queue_run(report_id=report_id)


@shared_task(name="reports.reap_lost_runs")
def reap_lost_runs() -> int:
    """Beat, every minute: runs whose worker no longer answers a ping are failed."""
    live = {name for reply in current_app.control.ping(timeout=2.0) or [] for name in reply}
    return runs_reap_lost(live_workers=live)


@shared_task(name="reports.expire_runs")
def expire_runs() -> int:
    """Beat: delete expired runs with their results (on the default queue: no Spark involved)."""
    return runs_expire().runs
