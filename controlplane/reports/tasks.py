"""Report tasks: thin callers of ``reports.runner``. They run on the reports queue
(``SLUICE_REPORTS_QUEUE``), whose workers hold the Spark session."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="reports.run", acks_late=False)
def run_report(run_id: str) -> str:
    # acks_late off: a run killed with its worker is not re-run by itself (it may have been the run that
    # killed it); it stays "running" until someone looks, and a new run is one request away.
    from controlplane.reports.runner import run_execute

    return run_execute(run_id=run_id)


@shared_task(name="reports.run_scheduled")
def run_scheduled(report_id: str) -> str | None:
    from controlplane.reports.runner import run_scheduled as queue_run

    return queue_run(report_id=report_id)
