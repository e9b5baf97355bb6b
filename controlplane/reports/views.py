"""Report endpoints under ``/api/v1/tenants/{slug}/clusters/{id}/reports`` (+ runs, results, downloads).

Viewers read everything; members create, change, run and cancel. Another tenant's report or run is a 404
(the cluster is resolved within the tenant first, every queryset starts from it).
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import OuterRef, Prefetch, QuerySet, Subquery
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, mixins, status
from rest_framework.decorators import action
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.clusters.viewsets import ClusterChildViewSet
from controlplane.core.errors import ApplicationError, ValidationFailed
from controlplane.core.serializers import bodiless
from controlplane.reports import selectors, services
from controlplane.reports.kinds import describe_kinds
from controlplane.reports.models import Kind, Report, ReportRun, RunStatus
from controlplane.reports.serializers import (
    ReportCreateSerializer,
    ReportKindSerializer,
    ReportRunSerializer,
    ReportSerializer,
    ReportUpdateSerializer,
    ResultPageSerializer,
)
from controlplane.tenancy.models import Role, Tenant

RESULT_PAGE_DEFAULT = 100
RESULT_PAGE_MAX = 1000
UUID_RE = "[0-9a-fA-F-]{36}"


class ReportViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ClusterChildViewSet):
    """Report definitions: a Spark SQL query over topic views or a built-in kind, with an optional schedule."""

    model = Report
    queryset = Report.objects.none()
    serializer_class = ReportSerializer
    write_role = Role.MEMBER
    lookup_value_regex = UUID_RE
    filterset_fields = ["kind", "name"]
    ordering_fields = ["created_at", "name"]

    def tenant_queryset(self, tenant: Tenant) -> QuerySet[Report]:
        newest = ReportRun.objects.filter(report=OuterRef("report")).order_by("-queued_at").values("pk")[:1]
        latest = ReportRun.objects.filter(pk__in=Subquery(newest))
        return Report.objects.filter(cluster__tenant=tenant, cluster=self.cluster).prefetch_related(
            Prefetch("runs", queryset=latest, to_attr="recent_runs"))

    @extend_schema(request=ReportCreateSerializer, responses={201: ReportSerializer})
    def create(self, request: Request, tenant_slug: str, cluster_pk: str) -> Response:
        data = ReportCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        report = services.report_create(cluster=self.cluster, actor=self.actor, **data.validated_data)
        return Response(ReportSerializer(report).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=ReportUpdateSerializer, responses={200: ReportSerializer})
    def partial_update(self, request: Request, tenant_slug: str, cluster_pk: str, pk: str) -> Response:
        report = self.get_object()
        data = ReportUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        given = {k: v for k, v in data.validated_data.items() if k in data.initial_data}
        report = services.report_update(report=report, actor=self.actor, **given)
        return Response(ReportSerializer(report).data)

    def destroy(self, request: Request, tenant_slug: str, cluster_pk: str, pk: str) -> Response:
        services.report_delete(report=self.get_object(), actor=self.actor)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(responses={200: ReportKindSerializer(many=True)})
    @action(detail=False, methods=["get"], pagination_class=None, filter_backends=[])
    def kinds(self, request: Request, tenant_slug: str, cluster_pk: str) -> Response:
        """Every report kind with its parameters (name, type, required, default, help, choices, bounds), result
        columns and default chart: what a form needs to offer them."""
        return Response(describe_kinds(dict(Kind.choices)))

    @extend_schema(request=None, responses={202: ReportRunSerializer})
    @action(detail=True, methods=["post"])
    @bodiless
    def run(self, request: Request, tenant_slug: str, cluster_pk: str, pk: str) -> Response:
        """Run now: queue a run of the report as it is defined now."""
        run = services.run_request(report=self.get_object(), actor=self.actor)
        return Response(ReportRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class _AnyRenderer(BaseRenderer):
    media_type = "*/*"
    format = "download"


class ReportRunViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ClusterChildViewSet):
    """A report's runs: status, timings, records scanned, the error; results paged or downloaded."""

    model = ReportRun
    queryset = ReportRun.objects.none()
    serializer_class = ReportRunSerializer
    write_role = Role.MEMBER
    lookup_value_regex = UUID_RE
    filterset_fields = ["status", "trigger"]
    ordering_fields = ["queued_at"]

    report: Report

    def resolve_parents(self, kwargs: dict[str, Any]) -> None:
        super().resolve_parents(kwargs)
        try:
            report_id = uuid.UUID(str(kwargs["report_pk"]))
        except ValueError:
            raise exceptions.NotFound("Not found.") from None
        report = Report.objects.filter(cluster=self.cluster, pk=report_id).first()
        if report is None:
            raise exceptions.NotFound("Not found.")
        self.report = report

    def tenant_queryset(self, tenant: Tenant) -> QuerySet[ReportRun]:
        return ReportRun.objects.filter(report__cluster__tenant=tenant, report=self.report)

    def perform_content_negotiation(self, request: Request, force: bool = False) -> tuple[BaseRenderer, str]:
        if self.action == "download":  # ?format=csv|json names the file type, not a DRF renderer
            return JSONRenderer(), JSONRenderer.media_type
        return super().perform_content_negotiation(request, force)

    @extend_schema(request=None, responses={200: ReportRunSerializer})
    @action(detail=True, methods=["post"])
    @bodiless
    def cancel(self, request: Request, tenant_slug: str, cluster_pk: str, report_pk: str, pk: str) -> Response:
        """Cancel a queued or running run (Spark's jobs are interrupted); 409 when it has finished."""
        run = services.run_cancel(run=self.get_object(), actor=self.actor)
        return Response(ReportRunSerializer(run).data)

    def _succeeded(self) -> ReportRun:
        run: ReportRun = self.get_object()
        if run.status != RunStatus.SUCCEEDED:
            raise ApplicationError(f"The run has no result: it is {run.status}.", code="no_result",
                                   http_status=status.HTTP_409_CONFLICT)
        return run

    @extend_schema(parameters=[OpenApiParameter("limit", OpenApiTypes.INT, description=f"Rows per page (at most "
                                                f"{RESULT_PAGE_MAX}; default {RESULT_PAGE_DEFAULT})."),
                               OpenApiParameter("offset", OpenApiTypes.INT)],
                   responses={200: ResultPageSerializer})
    @action(detail=True, methods=["get"])
    def results(self, request: Request, tenant_slug: str, cluster_pk: str, report_pk: str, pk: str) -> Response:
        """A page of the result's rows, with the columns and the report's chart description."""
        run = self._succeeded()
        limit = _int_param(request, "limit", RESULT_PAGE_DEFAULT, 1, RESULT_PAGE_MAX)
        offset = _int_param(request, "offset", 0, 0, None)
        count = run.row_count or 0
        base = request.build_absolute_uri(request.path)
        return Response({
            "count": count, "columns": run.columns, "chart": run.definition.get("chart") or {"kind": "table"},
            "results": selectors.result_page(run, offset=offset, limit=limit),
            "next": f"{base}?limit={limit}&offset={offset + limit}" if offset + limit < count else None,
            "previous": f"{base}?limit={limit}&offset={max(0, offset - limit)}" if offset > 0 else None,
        })

    @extend_schema(parameters=[OpenApiParameter("format", OpenApiTypes.STR, enum=["csv", "json"],
                                                description="File type (default csv).")],
                   responses={(200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="The whole result."),
                              (200, "application/json"): OpenApiResponse(OpenApiTypes.ANY,
                                                                         description="An array of row objects.")})
    @action(detail=True, methods=["get"])
    def download(self, request: Request, tenant_slug: str, cluster_pk: str, report_pk: str,
                 pk: str) -> StreamingHttpResponse:
        """The whole result as CSV (a header row) or JSON (an array of objects), streamed."""
        run = self._succeeded()
        kind = request.query_params.get("format", "csv").lower()
        if kind not in ("csv", "json"):
            raise ValidationFailed({"format": ["must be csv or json"]})
        stream = selectors.stream_csv(run) if kind == "csv" else selectors.stream_json(run)
        response = StreamingHttpResponse(stream, content_type="text/csv; charset=utf-8" if kind == "csv"
                                         else "application/json")
        safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in run.report.name)
        response["Content-Disposition"] = f'attachment; filename="{safe}-{run.pk}.{kind}"'
        return response


def _int_param(request: Request, name: str, default: int, lo: int, hi: int | None) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValidationFailed({name: ["must be an integer"]}) from None
    if value < lo:
        raise ValidationFailed({name: [f"must be at least {lo}"]})
    return min(value, hi) if hi is not None else value
