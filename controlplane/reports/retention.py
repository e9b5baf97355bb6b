"""Result expiry: finished runs older than ``SLUICE_REPORT_RESULT_DAYS``, or past their report's newest
``keep_runs``, are deleted with their result rows and Parquet files.

Called by beat's ``reports.expire_runs`` (on the default queue, no Spark needed). The database is the truth and
goes first: each batch of runs is deleted in one transaction (their ``ReportResultRow`` rows cascade, one audit row
per report), and only after it commits are their directories removed. A worker killed mid-batch rolls the batch
back (the next sweep redoes it); one killed after the commit leaves directories with no run, which every sweep
removes (``orphans_remove``), as it does those a deleted report's ``on_commit`` cleanup never reached. Queued and
running runs are never candidates: only rows whose status is final are deleted, checked in the DELETE itself.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, QuerySet, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from controlplane.audit.services import audit_record
from controlplane.core.actors import SYSTEM_ACTOR
from controlplane.reports.models import FINISHED, Report, ReportRun
from controlplane.reports.services import run_dir

log = logging.getLogger(__name__)
BATCH_RUNS = 200


@dataclass(frozen=True, slots=True)
class Expired:
    runs: int
    directories: int


def expires_at(run: ReportRun) -> datetime | None:
    """When the run's time-based expiry deletes it (None while it is not finished, or when runs never expire).
    A report with more than ``keep_runs`` newer runs loses it sooner, at the next sweep."""
    days = settings.SLUICE_REPORT_RESULT_DAYS
    if run.finished_at is None or run.status not in FINISHED or days <= 0:
        return None
    return run.finished_at + timedelta(days=days)


def expired_runs(*, now: datetime) -> QuerySet[ReportRun]:
    """Finished runs past the age limit or beyond their report's newest ``keep_runs`` (newest by queue time)."""
    ranked = ReportRun.objects.annotate(
        newer=Window(RowNumber(), partition_by=[F("report_id")], order_by=[F("queued_at").desc(), F("id").desc()]))
    condition = Q(pk__in=ranked.filter(newer__gt=F("report__keep_runs")).values("pk"))
    days = settings.SLUICE_REPORT_RESULT_DAYS
    if days > 0:
        condition |= Q(finished_at__lt=now - timedelta(days=days))
    return ReportRun.objects.filter(condition, status__in=FINISHED)


def runs_expire(*, now: datetime | None = None, batch: int = BATCH_RUNS) -> Expired:
    """Delete every expired run (in batches of ``batch``), then directories no run owns. Idempotent."""
    now = now or timezone.now()
    deleted = 0
    while True:
        picked = list(expired_runs(now=now).values_list("pk", "report_id")[:batch])
        if not picked:
            break
        ids = [pk for pk, _ in picked]
        with transaction.atomic():
            # The status is checked again in the DELETE: a run cannot be deleted while it is queued or running.
            gone = ReportRun.objects.filter(pk__in=ids, status__in=FINISHED)
            per_report = Counter(gone.values_list("report_id", flat=True))
            gone.delete()
            reports = Report.objects.filter(pk__in=per_report).select_related("cluster__tenant")
            for report in reports:
                audit_record(tenant=report.cluster.tenant, actor=SYSTEM_ACTOR, action="report.runs.expire",
                             target_type="report", target_id=str(report.pk),
                             data={"runs": per_report[report.pk]})
        deleted += sum(per_report.values())
        for pk in ids:  # after the commit: the rows are gone for good, so the files may go
            shutil.rmtree(run_dir(str(pk)), ignore_errors=True)
        if len(picked) < batch:
            break
    directories = orphans_remove()
    if deleted or directories:
        log.info("expired %d report runs, removed %d result directories no run owns", deleted, directories)
    return Expired(runs=deleted, directories=directories)


def orphans_remove() -> int:
    """Remove ``var/reports/<uuid>`` directories whose run no longer exists (its deletion committed before the
    files went). A directory is only ever made for a run whose row exists, so no row means no one needs it."""
    root = settings.VAR_DIR / "reports"
    if not root.is_dir():
        return 0
    found: dict[uuid.UUID, Path] = {}
    for path in root.iterdir():
        try:
            found[uuid.UUID(path.name)] = path
        except ValueError:
            continue  # not ours
    if not found:
        return 0
    alive = set(ReportRun.objects.filter(pk__in=list(found)).values_list("pk", flat=True))
    removed = 0
    for run_id, path in found.items():
        if run_id not in alive:
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
    return removed
