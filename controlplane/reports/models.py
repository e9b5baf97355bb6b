"""Reports: a Spark query over a cluster's topics, its schedule, and its runs with their results.

A ``Report`` is the definition (what to compute and when); a ``ReportRun`` is one execution (status, timings,
records scanned, the error, where the result is). Small results live in ``ReportResultRow`` (one row per result
row, so pages are index range scans); large ones as Parquet under ``var/reports/<run id>/``.
"""

from __future__ import annotations

import uuid

from django.db import models


class Kind(models.TextChoices):
    SQL = "sql", "Spark SQL over topic views"
    THROUGHPUT = "throughput", "Records and bytes per time window"
    TOP_KEYS = "top_keys", "Most frequent keys"
    VALUE_SIZE_HISTOGRAM = "value_size_histogram", "Value sizes in fixed-width buckets"
    JSON_AGGREGATE = "json_aggregate", "count/sum/avg/min/max of a JSON field"
    CONSUMER_LAG = "consumer_lag", "A consumer group's lag per time window"


class RunStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINISHED = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)
DEFAULT_KEEP_RUNS = 50  # a report's runs kept with their results unless it says otherwise


class Report(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    cluster = models.ForeignKey("clusters.Cluster", on_delete=models.CASCADE, related_name="reports")
    name = models.CharField(max_length=128)
    description = models.TextField(blank=True, default="")
    kind = models.CharField(max_length=32, choices=Kind.choices)
    # sql: {"sql": str, "topics": [str], "starting_offsets": str?, "ending_offsets": str?, "value_format": str?,
    #       "value_subject": str?, "value_version": int?, "key_…" the same, "mode": str?} (reports.typed);
    # built-in kinds: their parameters (see reports.kinds). Validated by reports.validation.
    params = models.JSONField(default=dict)
    # {"last_minutes": N} or {"start": iso, "end": iso?}, or {} for everything in the topics.
    time_range = models.JSONField(default=dict, blank=True)
    # {"kind": "line"|"bar"|"table", "x": column, "y": [columns]} for the console.
    chart = models.JSONField(default=dict, blank=True)
    # {"interval_seconds": N} or {"cron": "m h dom mon dow"}, or {} for run-now only.
    schedule = models.JSONField(default=dict, blank=True)
    # The beat entry that carries ``schedule`` (django-celery-beat's table: beat reads it from there).
    periodic_task = models.OneToOneField("django_celery_beat.PeriodicTask", null=True, blank=True,
                                         on_delete=models.SET_NULL, related_name="+")
    # Runs kept: finished runs beyond the newest ``keep_runs`` are deleted with their results (reports.retention),
    # as are those older than SLUICE_REPORT_RESULT_DAYS.
    keep_runs = models.PositiveIntegerField(default=DEFAULT_KEEP_RUNS)
    created_by = models.CharField(max_length=255, blank=True, default="")
    # The Kafka principal the report's runs read as (its creator's), so the cluster's ACLs decide what it sees.
    owner_principal = models.CharField(max_length=255, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="uniq_report_name")]

    def __str__(self) -> str:
        return self.name


class ReportRun(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    report = models.ForeignKey(Report, on_delete=models.CASCADE, related_name="runs")
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.QUEUED)
    trigger = models.CharField(max_length=16, choices=[("manual", "manual"), ("schedule", "schedule")],
                               default="manual")
    # What was run: the report's definition when the run was queued (a later edit does not change a run).
    definition = models.JSONField(default=dict)
    celery_task_id = models.CharField(max_length=64, blank=True, default="")
    worker = models.CharField(max_length=255, blank=True, default="")  # the Celery worker running it
    requested_by = models.CharField(max_length=255, blank=True, default="")
    queued_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveBigIntegerField(null=True, blank=True)
    records_scanned = models.PositiveBigIntegerField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    # [{"name": str, "type": str}], Spark's simple type names.
    columns = models.JSONField(default=list, blank=True)
    row_count = models.PositiveBigIntegerField(null=True, blank=True)
    storage = models.CharField(max_length=8, choices=[("", "none"), ("rows", "rows"), ("parquet", "parquet")],
                               blank=True, default="")
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    # While running: Spark's view of the run's jobs, {"jobs": n, "tasks": n, "tasks_done": n, "tasks_active": n}.
    progress = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-queued_at"]
        indexes = [models.Index(fields=["report", "-queued_at"], name="reportrun_report_recent"),
                   models.Index(fields=["finished_at"], name="reportrun_finished")]  # the expiry sweep


class ReportResultRow(models.Model):
    """One row of a small result, values in column order (JSON-safe: timestamps ISO 8601, binary base64)."""

    run = models.ForeignKey(ReportRun, on_delete=models.CASCADE, related_name="result_rows")
    ordinal = models.PositiveIntegerField()
    values = models.JSONField()

    class Meta:
        ordering = ["ordinal"]
        constraints = [models.UniqueConstraint(fields=["run", "ordinal"], name="uniq_result_row")]
