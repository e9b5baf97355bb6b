"""Request and response shapes for reports, runs and results."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from controlplane.core.serializers import StrictSerializer
from controlplane.reports.models import DEFAULT_KEEP_RUNS, Kind, Report, ReportRun
from controlplane.reports.retention import expires_at
from controlplane.reports.selectors import run_progress

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
                "\"ending_offsets\"?: \"latest\"|JSON, "
                "\"value_format\"?: \"binary\"|\"avro\"|\"jsonschema\"|\"protobuf\", "
                "\"value_subject\"?: str (default <topic>-value), \"value_version\"?: int (default latest), "
                "\"value_message\"?: str (protobuf; default the schema's first message), "
                "\"key_format\"?, \"key_subject\"?, \"key_version\"?, \"key_message\"? (the same for keys), "
                "\"mode\"?: \"FAILFAST\"|\"PERMISSIVE\"}; throughput: {\"topic\", \"window\": \"1 minute\"}; "
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

    stage = serializers.SerializerMethodField(help_text=(
        "queued (waiting for a worker), starting (running, Spark has no job yet), running (Spark's jobs under "
        "way: see progress), done (succeeded, failed or cancelled)."))
    elapsed_ms = serializers.SerializerMethodField(help_text=(
        "Milliseconds since the run started (while it runs), or its duration once finished; null while queued."))
    progress_percent = serializers.SerializerMethodField(help_text=(
        "Spark tasks done of all its tasks so far, 0-100, while running (jobs are planned as the query goes, so "
        "it can step back); 100 once succeeded; null when unknown (queued, no job yet, failed, cancelled)."))

    class Meta:
        model = ReportRun
        fields = ["id", "report", "status", "trigger", "requested_by", "queued_at", "started_at", "finished_at",
                  "duration_ms", "records_scanned", "error", "columns", "row_count", "storage",
                  "cancel_requested_at", "progress", "worker", "definition", "expires_at", "stage", "elapsed_ms",
                  "progress_percent"]
        read_only_fields = fields

    def get_expires_at(self, run: ReportRun) -> datetime | None:
        return expires_at(run)

    @extend_schema_field(serializers.ChoiceField(choices=["queued", "starting", "running", "done"]))
    def get_stage(self, run: ReportRun) -> str:
        return run_progress(run).stage

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_elapsed_ms(self, run: ReportRun) -> int | None:
        return run_progress(run).elapsed_ms

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_progress_percent(self, run: ReportRun) -> float | None:
        return run_progress(run).percent


class ReportParameterSerializer(serializers.Serializer[Any]):
    """One parameter of a kind (fields made in ``get_fields``: ``required`` and ``help`` would shadow the
    serializer's own attributes as class attributes)."""

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        return {
            "name": serializers.CharField(),
            "type": serializers.ChoiceField(choices=["string", "integer", "topic", "topics", "sql", "window",
                                                     "json_path", "choice", "choice_list", "offsets"]),
            "required": serializers.BooleanField(),
            "default": serializers.JSONField(allow_null=True, help_text="Used when the parameter is left out."),
            "help": serializers.CharField(),
            "choices": serializers.ListField(child=serializers.CharField(), allow_null=True),
            "minimum": serializers.IntegerField(allow_null=True),
            "maximum": serializers.IntegerField(allow_null=True),
        }


class ReportKindSerializer(serializers.Serializer[Any]):
    """A report kind as a form offers it (fields made in ``get_fields``: ``label`` is a serializer attribute)."""

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        return {
            "kind": serializers.CharField(),
            "label": serializers.CharField(),
            "description": serializers.CharField(),
            "parameters": ReportParameterSerializer(many=True),
            "columns": serializers.ListField(child=serializers.CharField(), allow_null=True,
                                             help_text="The result's columns; null for sql (the query's own)."),
            "default_chart": serializers.DictField(),
        }


class ResultPageSerializer(serializers.Serializer[Any]):
    count = serializers.IntegerField(help_text="Rows in the whole result.")
    columns = serializers.ListField(child=serializers.DictField(), help_text="[{\"name\", \"type\"}] in order.")
    chart = serializers.DictField()
    results = serializers.ListField(child=serializers.DictField(),
                                    help_text="This page's rows as objects keyed by column name.")
    next = serializers.CharField(allow_null=True)
    previous = serializers.CharField(allow_null=True)
