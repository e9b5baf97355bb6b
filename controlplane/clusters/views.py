"""Cluster endpoints. Admins change clusters; everyone in the tenant reads them."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.clusters import services
from controlplane.clusters.models import Cluster
from controlplane.clusters.serializers import ClusterSerializer, ClusterWriteSerializer
from controlplane.core.viewsets import TenantScopedViewSet
from controlplane.tenancy.models import Role, Tenant


class ClusterViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantScopedViewSet):
    model = Cluster
    queryset = Cluster.objects.none()
    serializer_class = ClusterSerializer
    write_role = Role.ADMIN
    lookup_value_regex = "[0-9a-fA-F-]{36}"
    filterset_fields = ["name", "plan"]
    ordering_fields = ["name", "created_at"]

    def tenant_queryset(self, tenant: Tenant) -> QuerySet[Cluster]:
        return Cluster.objects.filter(tenant=tenant)

    @extend_schema(request=ClusterWriteSerializer, responses={201: ClusterSerializer})
    def create(self, request: Request, tenant_slug: str) -> Response:
        data = ClusterWriteSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        cluster = services.cluster_create(tenant=self.tenant, actor=self.actor, **data.validated_data)
        return Response(ClusterSerializer(cluster).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=ClusterWriteSerializer, responses={200: ClusterSerializer})
    def update(self, request: Request, tenant_slug: str, pk: str) -> Response:
        data = ClusterWriteSerializer(data=request.data, partial=request.method == "PATCH")
        data.is_valid(raise_exception=True)
        given = {k: v for k, v in data.validated_data.items() if k in data.initial_data}
        cluster = services.cluster_update(cluster=self.get_object(), actor=self.actor, **given)
        return Response(ClusterSerializer(cluster).data)

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
