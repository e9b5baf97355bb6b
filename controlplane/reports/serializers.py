"""Request and response shapes for reports, runs and results."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rest_framework import serializers

from controlplane.core.serializers import StrictSerializer
from controlplane.reports.models import DEFAULT_KEEP_RUNS, Kind, Report, ReportRun
from controlplane.reports.retention import expires_at

MAX_KEEP_RUNS = 10_000


class ReportSerializer(serializers.ModelSerializer[Report]):
    cluster = serializers.UUIDField(source="cluster_id", read_only=True)
    last_run = serializers.SerializerMethodField()

    class Meta:
        model = Report
        fields = ["id", "cluster", "name", "description", "kind", "params", "time_range", "chart", "schedule",
                  "keep_runs", "created_by", "created_at", "updated_at", "last_run"]
        read_only_fields = fields

    def get_last_run(self, report: Report) -> dict[str, Any] | None:
        runs = getattr(report, "recent_runs", None)
        run = runs[0] if runs else None
        if run is None:
            return None
        return {"id": str(run.pk), "status": run.status, "queued_at": run.queued_at,
                "finished_at": run.finished_at}


_PARAMS_HELP = ("sql: {\"sql\": \"SELECT …\", \"topics\": [\"orders\"], \"starting_offsets\"?: \"earliest\"|JSON, "
                "\"ending_offsets\"?: \"latest\"|JSON}; throughput: {\"topic\", \"window\": \"1 minute\"}; "
                "top_keys: {\"topic\", \"limit\": 10}; value_size_histogram: {\"topic\", \"bucket_bytes\": 100}; "
                "json_aggregate: {\"topic\", \"field\": \"$.total\", \"group_by\"?: \"$.region\", "
                "\"functions\"?: [\"count\",\"sum\",\"avg\",\"min\",\"max\"]}; "
                "consumer_lag: {\"topic\", \"group\", \"window\": \"1 minute\"}.")


class ReportCreateSerializer(StrictSerializer):
    name = serializers.RegexField(r"^[A-Za-z0-9][A-Za-z0-9._ -]{0,127}$", max_length=128)
    description = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)
    kind = serializers.ChoiceField(choices=Kind.choices)
    params = serializers.JSONField(help_text=_PARAMS_HELP)
    time_range = serializers.JSONField(required=False, allow_null=True, default=None,
                                       help_text="{\"last_minutes\": N} or {\"start\": ISO, \"end\"?: ISO}.")
    chart = serializers.JSONField(required=False, allow_null=True, default=None,
                                  help_text="{\"kind\": \"line\"|\"bar\"|\"table\", \"x\": col, \"y\": [cols]}; "
                                            "built-in kinds have a default.")
    schedule = serializers.JSONField(required=False, allow_null=True, default=None,
                                     help_text="{\"interval_seconds\": N} or {\"cron\": \"*/5 * * * *\"} (UTC).")
    keep_runs = serializers.IntegerField(min_value=1, max_value=MAX_KEEP_RUNS, required=False,
                                         help_text=f"Finished runs kept with their results (default "
                                                   f"{DEFAULT_KEEP_RUNS}); older ones are deleted (as are runs "
                                                   f"older than SLUICE_REPORT_RESULT_DAYS).")


class ReportUpdateSerializer(StrictSerializer):
    name = serializers.RegexField(r"^[A-Za-z0-9][A-Za-z0-9._ -]{0,127}$", max_length=128, required=False)
    description = serializers.CharField(required=False, allow_blank=True, max_length=2000)
    params = serializers.JSONField(required=False)
    time_range = serializers.JSONField(required=False, allow_null=True)
    chart = serializers.JSONField(required=False, allow_null=True)
    schedule = serializers.JSONField(required=False, allow_null=True)
    keep_runs = serializers.IntegerField(min_value=1, max_value=MAX_KEEP_RUNS, required=False,
                                         help_text="Finished runs kept with their results; older ones are deleted "
                                                   "(as are runs older than SLUICE_REPORT_RESULT_DAYS).")


class ReportRunSerializer(serializers.ModelSerializer[ReportRun]):
    report = serializers.UUIDField(source="report_id", read_only=True)
    expires_at = serializers.SerializerMethodField(
        help_text="When the run and its result are deleted (null while it runs, or when results never expire by "
                  "age); sooner if its report gets more than keep_runs newer runs.")

    class Meta:
        model = ReportRun
        fields = ["id", "report", "status", "trigger", "requested_by", "queued_at", "started_at", "finished_at",
                  "duration_ms", "records_scanned", "error", "columns", "row_count", "storage",
                  "cancel_requested_at", "progress", "worker", "definition", "expires_at"]
        read_only_fields = fields

    def get_expires_at(self, run: ReportRun) -> datetime | None:
        return expires_at(run)


class ResultPageSerializer(serializers.Serializer[Any]):
    count = serializers.IntegerField(help_text="Rows in the whole result.")
    columns = serializers.ListField(child=serializers.DictField(), help_text="[{\"name\", \"type\"}] in order.")
    chart = serializers.DictField()
    results = serializers.ListField(child=serializers.DictField(),
                                    help_text="This page's rows as objects keyed by column name.")
    next = serializers.CharField(allow_null=True)
    previous = serializers.CharField(allow_null=True)
