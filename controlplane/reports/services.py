"""Report definitions, schedules and runs: every change goes through here (one transaction, one audit row).

A report's schedule is a django-celery-beat ``PeriodicTask`` that this module alone writes, so beat (which
reads its table) runs ``reports.run_scheduled`` with the report's id. Runs are queued with
``transaction.on_commit`` on the reports queue; cancelling sets a Redis flag that the running task watches
(``reports.worker``) and revokes a run that has not started.
"""

from __future__ import annotations

import json
import shutil
from typing import Any

from celery import current_app
from celery.schedules import ParseException, crontab
from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone
from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

from controlplane.audit.services import audit_record
from controlplane.clusters.models import Cluster
from controlplane.clusters.observability import admin_for
from controlplane.core.actors import Actor
from controlplane.core.errors import Conflict, QuotaExceeded, ValidationFailed
from controlplane.reports import kinds
from controlplane.reports.kinds import ParamError
from controlplane.reports.models import DEFAULT_KEEP_RUNS, FINISHED, Report, ReportRun, RunStatus
from controlplane.reports.sqlcheck import check_sql
from controlplane.reports.typed import SubjectProblem, typed_check
from controlplane.tenancy.models import Tenant
from dataplane.client.spark.options import SparkSourceError, parse_source_options

RUN_REPORT = "reports.run"  # the task (controlplane.reports.tasks)

CANCEL_KEY = "sluice:reports:cancel:{run_id}"
CANCEL_TTL_SECONDS = 24 * 3600
MIN_INTERVAL_SECONDS = 1


def _fail(e: ParamError) -> ValidationFailed:
    return ValidationFailed({e.field: [e.message]})


def _normalize_schedule(value: object) -> dict[str, Any]:
    if value is None or value == {}:
        return {}
    if not isinstance(value, dict) or len(value) != 1 or not ({"interval_seconds", "cron"} & set(value)):
        raise ParamError("schedule", "must be {\"interval_seconds\": N} or {\"cron\": \"m h dom mon dow\"}")
    if "interval_seconds" in value:
        n = value["interval_seconds"]
        if isinstance(n, bool) or not isinstance(n, int) or n < MIN_INTERVAL_SECONDS:
            raise ParamError("schedule.interval_seconds", f"must be an integer of at least {MIN_INTERVAL_SECONDS}")
        return {"interval_seconds": n}
    cron = value["cron"]
    fields = cron.split() if isinstance(cron, str) else []
    if len(fields) != 5:
        raise ParamError("schedule.cron", "must have five fields: minute hour day-of-month month day-of-week")
    try:
        crontab(*fields)
    except (ParseException, ValueError) as e:
        raise ParamError("schedule.cron", f"is not a valid cron expression: {e}") from None
    return {"cron": " ".join(fields)}


def _check_topics(cluster: Cluster, topics: list[str], field: str) -> None:
    """Each topic must exist in the cluster (asked live: topics made by clients count too)."""
    with admin_for(cluster) as admin:
        known = set(admin.topics())
    missing = [t for t in topics if t not in known]
    if missing:
        raise ValidationFailed({field: [
            f"unknown topic {', '.join(map(repr, missing))} in cluster '{cluster.name}'"]})


def _check_offsets(params: dict[str, Any], topics: list[str]) -> None:
    """startingOffsets/endingOffsets with the source's own rules (same words as a Spark job gets)."""
    options = {"kafka.bootstrap.servers": "validation:9092", "subscribe": ",".join(topics)}
    for field, option in (("starting_offsets", "startingOffsets"), ("ending_offsets", "endingOffsets")):
        if params.get(field) is not None:
            options[option] = params[field]
    try:
        parse_source_options(options, streaming=False)
    except SparkSourceError as e:
        field = "params.ending_offsets" if "ending" in str(e).lower() else "params.starting_offsets"
        raise ValidationFailed({field: [str(e)]}) from None


def validate_definition(*, cluster: Cluster, kind: str, params: object, time_range: object, chart: object,
                        schedule: object, check_topics: bool = True, owner: str = "") -> dict[str, Any]:
    """The normalized definition, or ``ValidationFailed`` naming the field (unknown topics asked live; typed
    sides' subjects in the cluster's registry, readable by ``owner``, the principal the report reads as)."""
    try:
        if kind not in kinds.KINDS:
            raise ParamError("kind", f"must be one of {', '.join(kinds.KINDS)}")
        clean = kinds.normalize_params(kind, params)
        if kind == "sql":
            check_sql(clean["sql"], clean["topics"])
        definition = {"kind": kind, "params": clean, "time_range": kinds.normalize_time_range(time_range),
                      "chart": kinds.normalize_chart(kind, clean, chart), "schedule": _normalize_schedule(schedule)}
    except ParamError as e:
        raise _fail(e) from None
    topics = kinds.topics_of(kind, clean)
    if kind == "sql":
        _check_offsets(clean, topics)
    if check_topics:
        _check_topics(cluster, topics, "params.topics" if kind == "sql" else "params.topic")
        if kind == "sql" and kinds.typed_sides(clean):
            try:
                typed_check(cluster=cluster, principal=owner, params=clean)
            except SubjectProblem as e:
                raise ValidationFailed({e.field: [e.message]}) from None
    return definition


def _sync_schedule(report: Report) -> None:
    """Make the report's beat entry match ``report.schedule`` (create, change or delete it)."""
    task = report.periodic_task
    if not report.schedule:
        if task is not None:
            report.periodic_task = None
            report.save(update_fields=["periodic_task"])
            task.delete()
        return
    interval = crontab = None
    if "interval_seconds" in report.schedule:
        interval, _ = IntervalSchedule.objects.get_or_create(every=report.schedule["interval_seconds"],
                                                             period=IntervalSchedule.SECONDS)
    else:
        minute, hour, dom, month, dow = report.schedule["cron"].split()
        crontab, _ = CrontabSchedule.objects.get_or_create(minute=minute, hour=hour, day_of_month=dom,
                                                           month_of_year=month, day_of_week=dow, timezone="UTC")
    fields = {"interval": interval, "crontab": crontab, "task": "reports.run_scheduled",
              "args": json.dumps([str(report.pk)]), "enabled": True,
              "description": f"report {report.name} of cluster {report.cluster_id}"}
    if task is None:
        task = PeriodicTask.objects.create(name=f"report:{report.pk}", **fields)
        report.periodic_task = task
        report.save(update_fields=["periodic_task"])
    else:
        for key, value in fields.items():
            setattr(task, key, value)
        task.save()


def report_create(*, cluster: Cluster, actor: Actor, name: str, kind: str, params: object,
                  description: str = "", time_range: object = None, chart: object = None,
                  schedule: object = None, keep_runs: int = DEFAULT_KEEP_RUNS) -> Report:
    definition = validate_definition(cluster=cluster, kind=kind, params=params, time_range=time_range,
                                     chart=chart, schedule=schedule, owner=actor.principal or "")
    with transaction.atomic():
        if Report.objects.filter(cluster=cluster, name=name).exists():
            raise Conflict(f"A report named '{name}' already exists in this cluster.", code="report_exists")
        report = Report.objects.create(cluster=cluster, name=name, description=description,
                                       created_by=actor.display, owner_principal=actor.principal or "",
                                       keep_runs=keep_runs, **definition)
        _sync_schedule(report)
        audit_record(tenant=cluster.tenant, actor=actor, action="report.create", target_type="report",
                     target_id=str(report.pk), data={"name": name, "kind": kind})
    return report


def report_update(*, report: Report, actor: Actor, **changes: Any) -> Report:
    """Change any of name, description, params, time_range, chart, schedule, keep_runs (kind is fixed)."""
    merged = {"kind": report.kind, "params": report.params, "time_range": report.time_range,
              "chart": report.chart, "schedule": report.schedule}
    for key in ("params", "time_range", "chart", "schedule"):
        if key in changes:
            merged[key] = changes[key]
    if "params" in changes and "chart" not in changes:
        # Keep the chart while it still fits the new parameters' columns, else the kind's default.
        try:
            kinds.normalize_chart(report.kind, kinds.normalize_params(report.kind, changes["params"]), report.chart)
        except ParamError:
            merged["chart"] = None
    # The cluster is asked about topics only when they may have changed (a rename works while it is down).
    definition = validate_definition(cluster=report.cluster, check_topics="params" in changes,
                                     owner=report.owner_principal, **merged)
    with transaction.atomic():
        name = changes.get("name", report.name)
        if name != report.name and Report.objects.filter(cluster=report.cluster_id, name=name).exists():
            raise Conflict(f"A report named '{name}' already exists in this cluster.", code="report_exists")
        report.name = name
        report.description = changes.get("description", report.description)
        report.keep_runs = changes.get("keep_runs", report.keep_runs)
        for key in ("params", "time_range", "chart", "schedule"):
            setattr(report, key, definition[key])
        report.save()
        _sync_schedule(report)
        audit_record(tenant=report.cluster.tenant, actor=actor, action="report.update", target_type="report",
                     target_id=str(report.pk), data={"fields": sorted(changes)})
    return report


def report_delete(*, report: Report, actor: Actor) -> None:
    run_ids = [str(pk) for pk in report.runs.values_list("pk", flat=True)]
    with transaction.atomic():
        for run in report.runs.exclude(status__in=FINISHED):
            _request_cancel(run)
        task = report.periodic_task
        audit_record(tenant=report.cluster.tenant, actor=actor, action="report.delete", target_type="report",
                     target_id=str(report.pk), data={"name": report.name})
        report.delete()
        if task is not None:
            task.delete()

        def remove_files() -> None:
            for rid in run_ids:
                shutil.rmtree(run_dir(rid), ignore_errors=True)

        transaction.on_commit(remove_files)


def run_dir(run_id: str) -> Any:
    return settings.VAR_DIR / "reports" / str(run_id)


def _definition(report: Report) -> dict[str, Any]:
    return {"kind": report.kind, "params": report.params, "time_range": report.time_range, "chart": report.chart}


def run_request(*, report: Report, actor: Actor, trigger: str = "manual") -> ReportRun:
    """Queue a run of the report as it is now ("run now", or beat's schedule)."""
    with transaction.atomic():
        tenant = Tenant.objects.select_for_update().get(pk=report.cluster.tenant_id)
        waiting = ReportRun.objects.filter(report__cluster__tenant=tenant, status=RunStatus.QUEUED).count()
        if waiting >= settings.SLUICE_REPORTS_TENANT_QUEUED:
            raise QuotaExceeded(f"This tenant already has {waiting} report runs waiting (the limit is "
                                f"{settings.SLUICE_REPORTS_TENANT_QUEUED}); try again when they have run.",
                                code="too_many_runs", http_status=429)
        run = ReportRun.objects.create(report=report, trigger=trigger, definition=_definition(report),
                                       requested_by=actor.display)
        if trigger == "manual":  # a schedule's runs are the report's own (audited when it was scheduled)
            audit_record(tenant=report.cluster.tenant, actor=actor, action="report.run", target_type="report_run",
                         target_id=str(run.pk), data={"report": str(report.pk)})

        def enqueue() -> None:
            # By name: the tasks module is the reports' entry point, above this one.
            result = current_app.send_task(RUN_REPORT, args=[str(run.pk)], queue=settings.SLUICE_REPORTS_QUEUE)
            ReportRun.objects.filter(pk=run.pk, celery_task_id="").update(celery_task_id=result.id)

        transaction.on_commit(enqueue)
    return run


def _request_cancel(run: ReportRun) -> None:
    cache.set(CANCEL_KEY.format(run_id=run.pk), "1", CANCEL_TTL_SECONDS)
    run_id = str(run.pk)

    def revoke() -> None:
        task_id = ReportRun.objects.filter(pk=run_id).values_list("celery_task_id", flat=True).first()
        if task_id:
            current_app.control.revoke(task_id)  # a queued run is dropped by the worker; a running one sees the flag

    transaction.on_commit(revoke)


def cancel_requested(run_id: str) -> bool:
    return cache.get(CANCEL_KEY.format(run_id=run_id)) is not None


def run_cancel(*, run: ReportRun, actor: Actor) -> ReportRun:
    """Queued: cancelled at once. Running: the worker cancels its Spark job group and records ``cancelled``.
    Finished: a 409."""
    with transaction.atomic():
        run = ReportRun.objects.select_for_update().get(pk=run.pk)
        if run.status in FINISHED:
            raise Conflict(f"The run has already {run.status}.", code="run_finished")
        run.cancel_requested_at = timezone.now()
        fields = ["cancel_requested_at"]
        if run.status == RunStatus.QUEUED:
            run.status = RunStatus.CANCELLED
            run.finished_at = run.cancel_requested_at
            fields += ["status", "finished_at"]
        run.save(update_fields=fields)
        _request_cancel(run)
        audit_record(tenant=run.report.cluster.tenant, actor=actor, action="report.run.cancel",
                     target_type="report_run", target_id=str(run.pk), data={"report": str(run.report_id)})
    return run
