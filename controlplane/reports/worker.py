"""The reports worker's Spark: one session per worker process, made on first use, stopped at shutdown.

Celery's prefork children each get their own (``worker_process_shutdown`` stops it); with the threads or
solo pool the one process owns it (``worker_shutdown``). ``stop_spark`` also ends the JVM and with it
Spark's Python workers, so a stopped worker leaves no process behind.

``CancelWatch`` is the thread that turns a cancel request (a Redis flag set by the API) into
``cancelJobGroup``: the run's own thread is blocked inside a Spark action and cannot look.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from celery.signals import worker_process_shutdown, worker_ready, worker_shutdown

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)
POLL_SECONDS = 0.25


def spark() -> SparkSession:
    from dataplane.client.spark.session import spark_session

    return spark_session(app_name="sluice-reports")


@worker_ready.connect
def _fail_orphaned_runs(sender: Any = None, **_: Any) -> None:
    from controlplane.reports.runner import runs_fail_orphaned

    hostname = getattr(sender, "hostname", "")
    if hostname:
        count = runs_fail_orphaned(worker=hostname)
        if count:
            log.warning("%d report run(s) left running by this worker's previous life were failed", count)


@worker_shutdown.connect
@worker_process_shutdown.connect
def _stop_spark(**_: Any) -> None:
    from dataplane.client.spark.session import stop_spark

    try:
        stop_spark()
    except Exception:  # shutdown must go on; the JVM is killed by stop_spark's own fallback
        log.exception("stopping Spark failed")


class CancelWatch:
    """A thread beside a running report: turns a cancel request into ``cancelJobGroup`` and records the run's
    Spark progress. Started and stopped by the run's thread (a context manager); the run's thread is blocked
    inside a Spark action meanwhile and cannot look itself."""

    def __init__(self, spark: SparkSession, run_id: str, job_group: str) -> None:
        self._spark = spark
        self._run_id = run_id
        self._group = job_group
        self._done = threading.Event()
        self.cancelled = threading.Event()
        self._progress: dict[str, int] = {}
        self._thread = threading.Thread(target=self._watch, name=f"cancel-watch-{run_id}", daemon=True)

    def __enter__(self) -> CancelWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _watch(self) -> None:
        from django.db import connection

        from controlplane.reports.services import cancel_requested

        try:
            while not self._done.wait(POLL_SECONDS):
                try:
                    if cancel_requested(self._run_id):
                        self.cancelled.set()
                        self._spark.sparkContext.cancelJobGroup(self._group)
                        return
                    self._record_progress()
                except Exception:  # a Redis or database hiccup: try again at the next poll
                    log.warning("watch of report run %s: check failed", self._run_id, exc_info=True)
        finally:
            connection.close()  # this thread's own connection

    def _record_progress(self) -> None:
        from controlplane.reports.models import ReportRun

        tracker = self._spark.sparkContext.statusTracker()
        jobs = tracker.getJobIdsForGroup(self._group)
        tasks = done = active = 0
        for job_id in jobs:
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job is not None else ():
                stage = tracker.getStageInfo(stage_id)
                if stage is not None:
                    tasks += stage.numTasks
                    done += stage.numCompletedTasks
                    active += stage.numActiveTasks
        progress = {"jobs": len(jobs), "tasks": tasks, "tasks_done": done, "tasks_active": active}
        if progress != self._progress:
            ReportRun.objects.filter(pk=self._run_id).update(progress=progress)
            self._progress = progress
