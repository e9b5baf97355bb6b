"""Cluster and rebalance endpoints. Admins change clusters; everyone in the tenant reads them."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.clusters import observability, rebalancing, selectors, services, throughput
from controlplane.clusters.models import Cluster, Rebalance
from controlplane.clusters.serializers import (
    BrokerViewSerializer,
    ClusterSerializer,
    ClusterWriteSerializer,
    GroupDetailSerializer,
    GroupSummarySerializer,
    RebalanceSerializer,
    RebalanceWriteSerializer,
    ResetOffsetsSerializer,
    ResetPlanSerializer,
    ThroughputPointSerializer,
    ThroughputQuerySerializer,
    TransactionSerializer,
)
from controlplane.clusters.viewsets import ClusterChildViewSet, key_scoped
from controlplane.core.serializers import bodiless
from controlplane.tenancy.models import Role, Tenant
from controlplane.tenancy.viewsets import WHOLE_LIST, TenantScopedViewSet


class ClusterViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantScopedViewSet):
    model = Cluster
    queryset = Cluster.objects.none()
    serializer_class = ClusterSerializer
    write_role = Role.ADMIN
    lookup_value_regex = "[0-9a-fA-F-]{36}"
    filterset_fields = ["name", "plan"]
    ordering_fields = ["name", "created_at"]

    def tenant_queryset(self, tenant: Tenant) -> QuerySet[Cluster]:
        return key_scoped(self.request, Cluster.objects.filter(tenant=tenant))

    def list(self, request: Request, tenant_slug: str) -> Response:
        """The page of clusters, each with brokers up of total, throughput in and out, and storage used (from
        what the control plane holds: no call to the clusters, so one that is down cannot slow the list)."""
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        clusters = list(page if page is not None else self.filter_queryset(self.get_queryset()))
        context = {**self.get_serializer_context(), "figures": selectors.cluster_figures(clusters)}
        data = ClusterSerializer(clusters, many=True, context=context).data
        return self.get_paginated_response(data) if page is not None else Response(data)

    @extend_schema(request=ClusterWriteSerializer, responses={201: ClusterSerializer})
    def create(self, request: Request, tenant_slug: str) -> Response:
        data = ClusterWriteSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        cluster = services.cluster_create(tenant=self.tenant, actor=self.actor, **data.validated_data)
        return Response(ClusterSerializer(cluster).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=ClusterWriteSerializer, responses={200: ClusterSerializer})
    def update(self, request: Request, tenant_slug: str, pk: str) -> Response:
        cluster = self.get_object()  # first: another tenant's cluster is a 404, whatever the body
        data = ClusterWriteSerializer(data=request.data, partial=request.method == "PATCH")
        data.is_valid(raise_exception=True)
        given = {k: v for k, v in data.validated_data.items() if k in data.initial_data}
        cluster = services.cluster_update(cluster=cluster, actor=self.actor, **given)
        return Response(ClusterSerializer(cluster).data)

    @extend_schema(responses={200: BrokerViewSerializer(many=True)})
    @action(detail=True, methods=["get"], **WHOLE_LIST)
    def brokers(self, request: Request, tenant_slug: str, pk: str) -> Response:
        """Each broker: host, port, rack, up or down, partitions led and followed, bytes on disk."""
        return Response(observability.brokers(self.get_object()))

    @extend_schema(responses={200: GroupSummarySerializer(many=True)})
    @action(detail=True, methods=["get"], url_path="consumer-groups", **WHOLE_LIST)
    def consumer_groups(self, request: Request, tenant_slug: str, pk: str) -> Response:
        """Every consumer group: state, members and total lag."""
        return Response(observability.groups(self.get_object()))

    @extend_schema(responses={200: GroupDetailSerializer})
    @action(detail=True, methods=["get"], url_path=r"consumer-groups/(?P<group_id>[^/]+)")
    def consumer_group(self, request: Request, tenant_slug: str, pk: str, group_id: str) -> Response:
        """A group's members and assignments, and the lag of every partition it committed to or owns."""
        return Response(observability.group(self.get_object(), group_id))

    @extend_schema(request=ResetOffsetsSerializer, responses={200: ResetPlanSerializer})
    @action(detail=True, methods=["post"], url_path=r"consumer-groups/(?P<group_id>[^/]+)/reset-offsets")
    def reset_offsets(self, request: Request, tenant_slug: str, pk: str, group_id: str) -> Response:
        """Reset a group's offsets (earliest, latest, timestamp, offset, shift-by); ``dry_run`` (the default)
        only shows the plan. Only an empty group can be reset (409 otherwise)."""
        cluster = self.get_object()  # first: another tenant's cluster is a 404, whatever the body
        data = ResetOffsetsSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(observability.reset_offsets(cluster, group_id, actor=self.actor, **data.validated_data))

    @extend_schema(responses={200: TransactionSerializer(many=True)})
    @action(detail=True, methods=["get"], **WHOLE_LIST)
    def transactions(self, request: Request, tenant_slug: str, pk: str) -> Response:
        """Every open transaction: id, state, producer, partitions and age."""
        return Response(observability.transactions(self.get_object()))

    @extend_schema(request=None, responses={204: None})
    @action(detail=True, methods=["post"], url_path=r"transactions/(?P<transactional_id>[^/]+)/abort")
    @bodiless
    def abort_transaction(self, request: Request, tenant_slug: str, pk: str, transactional_id: str) -> Response:
        """Abort an open transaction (admins): its producer is fenced, as when a new instance of it starts, and
        nothing it wrote in the transaction becomes readable."""
        cluster = self.get_object()
        observability.abort_transaction(cluster, transactional_id, actor=self.actor)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(parameters=[ThroughputQuerySerializer], responses={200: ThroughputPointSerializer(many=True)})
    @action(detail=True, methods=["get"], **WHOLE_LIST)
    def throughput(self, request: Request, tenant_slug: str, pk: str) -> Response:
        """Per-minute records and bytes in, records consumed and bytes sent to consumers, per topic or per broker,
        for charts (48 h)."""
        cluster = self.get_object()  # (query parameters named like the cluster filters would filter it away)
        query = ThroughputQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        given = query.validated_data
        name = given["topic"] if given["scope"] == "topic" else (
            None if given["broker"] is None else str(given["broker"]))
        return Response(throughput.history(cluster, scope=given["scope"], name=name, minutes=given["minutes"]))

    @extend_schema(request=None, responses={202: ClusterSerializer})
    @action(detail=True, methods=["post"], url_path="rotate-secrets")
    @bodiless
    def rotate_secrets(self, request: Request, tenant_slug: str, pk: str) -> Response:
        """Replace the cluster's internal password and token key (admins): brokers restart one at a time onto
        the new ones, then the old ones stop working. ``status.secrets`` shows the version and the roll;
        asking again during a roll changes nothing."""
        cluster = self.get_object()
        services.cluster_secrets_rotate(cluster=cluster, actor=self.actor)
        cluster.refresh_from_db()
        return Response(ClusterSerializer(cluster).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=ClusterWriteSerializer, responses={200: ClusterSerializer})
    def partial_update(self, request: Request, tenant_slug: str, pk: str) -> Response:
        return self.update(request, tenant_slug, pk)

    @extend_schema(responses={202: ClusterSerializer, 204: None})
    def destroy(self, request: Request, tenant_slug: str, pk: str) -> Response:
        """204 when the cluster is gone; 202 with the cluster while its brokers are stopped and removed."""
        cluster = self.get_object()
        if services.cluster_delete(cluster=cluster, actor=self.actor):
            return Response(status=status.HTTP_204_NO_CONTENT)
        cluster.refresh_from_db()
        return Response(ClusterSerializer(cluster).data, status=status.HTTP_202_ACCEPTED)


class RebalanceViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ClusterChildViewSet):
    """Proposals to even out a cluster; approve one to carry it out, stop it, or refresh a stale one."""

    model = Rebalance
    queryset = Rebalance.objects.none()
    serializer_class = RebalanceSerializer
    write_role = Role.ADMIN
    lookup_value_regex = "[0-9a-fA-F-]{36}"
    filterset_fields = ["state"]

    def tenant_queryset(self, tenant: Tenant) -> QuerySet[Rebalance]:
        return Rebalance.objects.filter(cluster__tenant=tenant, cluster=self.cluster)

    @extend_schema(request=RebalanceWriteSerializer, responses={201: RebalanceSerializer})
    def create(self, request: Request, tenant_slug: str, cluster_pk: str) -> Response:
        data = RebalanceWriteSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        rebalance = rebalancing.rebalance_create(cluster=self.cluster, actor=self.actor,
                                                 replication_throttle=data.validated_data["replication_throttle"])
        return Response(RebalanceSerializer(rebalance).data, status=status.HTTP_201_CREATED)

    def _act(self, change: Any) -> Response:
        rebalance = change(rebalance=self.get_object(), actor=self.actor)
        rebalance.refresh_from_db()
        return Response(RebalanceSerializer(rebalance).data)

    @extend_schema(request=None, responses={200: RebalanceSerializer})
    @action(detail=True, methods=["post"])
    @bodiless
    def approve(self, request: Request, tenant_slug: str, cluster_pk: str, pk: str) -> Response:
        """Carry out a ready proposal (409 when it is not ready or was approved already)."""
        return self._act(rebalancing.rebalance_approve)

    @extend_schema(request=None, responses={200: RebalanceSerializer})
    @action(detail=True, methods=["post"])
    @bodiless
    def stop(self, request: Request, tenant_slug: str, cluster_pk: str, pk: str) -> Response:
        """Stop: partitions still moving go back to where they were."""
        return self._act(rebalancing.rebalance_stop)

    @extend_schema(request=None, responses={200: RebalanceSerializer})
    @action(detail=True, methods=["post"])
    @bodiless
    def refresh(self, request: Request, tenant_slug: str, cluster_pk: str, pk: str) -> Response:
        """Compute a fresh proposal for a ready, stopped or failed rebalance."""
        return self._act(rebalancing.rebalance_refresh)
