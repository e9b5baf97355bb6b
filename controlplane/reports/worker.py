"""The reports worker's sandbox: one runner per worker process, started when the worker is ready (so the
first report does not wait for a JVM), stopped at shutdown with everything it started.

Celery's prefork children would each get their own (``worker_process_shutdown`` stops it); ``sluice up`` runs
the threads pool, where the one process owns it (``worker_shutdown``).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery.signals import worker_process_shutdown, worker_ready, worker_shutdown
from django.conf import settings

from controlplane.reports import sandboxes
from controlplane.reports.runner import runs_fail_orphaned
from controlplane.reports.sandbox.launcher import SHUTDOWN_GRACE, SandboxUnavailable
from controlplane.reports.sandboxes import sandbox

log = logging.getLogger(__name__)


def _is_reports_worker(sender: Any) -> bool:
    # worker_ready's sender is the worker's Consumer (Celery 5); a WorkController holds one as ``consumer``.
    consumer = getattr(sender, "consumer", None) or sender
    task_consumer = getattr(consumer, "task_consumer", None)
    names = {q.name for q in getattr(task_consumer, "queues", None) or ()}
    return settings.SLUICE_REPORTS_QUEUE in names


@worker_ready.connect
def _on_ready(sender: Any = None, **_: Any) -> None:
    hostname = getattr(sender, "hostname", "")
    if hostname:
        count = runs_fail_orphaned(worker=hostname)
        if count:
            log.warning("%d report run(s) left running by this worker's previous life were failed", count)
    if settings.SLUICE_REPORTS_PRESTART and _is_reports_worker(sender):
        threading.Thread(target=_prestart, name="sandbox-prestart", daemon=True).start()


def _prestart() -> None:
    box = sandbox()
    try:
        box.start()
    except SandboxUnavailable as e:  # each run will say so; a stop during the start is no error
        log.log(logging.INFO if box.stopped else logging.ERROR, "%s", e)


@worker_shutdown.connect
@worker_process_shutdown.connect
def _stop_sandbox(**_: Any) -> None:
    box = sandboxes.take()
    if box is not None:
        try:
            box.stop(SHUTDOWN_GRACE)
        except Exception:  # shutdown must go on
            log.exception("stopping the report runner failed")
