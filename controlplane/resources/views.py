"""Topic, ACL and client quota endpoints, nested under a cluster of the caller's tenant."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.clusters import observability
from controlplane.clusters.viewsets import ClusterChildViewSet
from controlplane.resources import selectors, services
from controlplane.resources.models import AclBinding, ClientQuota, Topic
from controlplane.resources.permissions import topic_permissions
from controlplane.resources.serializers import (
    AclSerializer,
    AclWriteSerializer,
    ClientQuotaSerializer,
    ClientQuotaWriteSerializer,
    DeleteRecordsSerializer,
    LowWatermarkSerializer,
    PartitionViewSerializer,
    TopicCreateSerializer,
    TopicPermissionsSerializer,
    TopicSerializer,
    TopicUpdateSerializer,
)
from controlplane.tenancy.models import Role, Tenant
from controlplane.tenancy.viewsets import WHOLE_LIST, ServiceWriteMixin


class TopicFilter(django_filters.FilterSet):
    name = django_filters.CharFilter(lookup_expr="icontains")
    prefix = django_filters.CharFilter(field_name="name", lookup_expr="startswith")

    class Meta:
        model = Topic
        fields = ["name", "prefix"]


class TopicViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ClusterChildViewSet):
    model = Topic
    queryset = Topic.objects.none()
    serializer_class = TopicSerializer
    lookup_field = "name"
    lookup_value_regex = "[^/]+"
    write_role = Role.MEMBER
    filterset_class = TopicFilter
    ordering_fields = ["name", "created_at", "partitions"]

    def tenant_queryset(self, tenant: Tenant) -> QuerySet[Topic]:
        return Topic.objects.filter(cluster__tenant=tenant, cluster=self.cluster)

    def list(self, request: Request, tenant_slug: str, cluster_pk: str) -> Response:
        """The page of topics, each with its size, records, replication health and produce rate (one batched
        round to the cluster for the page, cached briefly; null where unknown)."""
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        topics = list(page if page is not None else self.filter_queryset(self.get_queryset()))
        figures = selectors.topic_figures(self.cluster, [t.name for t in topics])
        data = TopicSerializer(topics, many=True, context={"request": request, "figures": figures}).data
        return self.get_paginated_response(data) if page is not None else Response(data)

    def retrieve(self, request: Request, tenant_slug: str, cluster_pk: str, name: str) -> Response:
        topic = self.get_object()
        figures = selectors.topic_figures(self.cluster, [topic.name])
        return Response(TopicSerializer(topic, context={"request": request, "figures": figures}).data)

    @extend_schema(request=TopicCreateSerializer, responses={201: TopicSerializer})
    def create(self, request: Request, tenant_slug: str, cluster_pk: str) -> Response:
        data = TopicCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        topic = services.topic_create(cluster=self.cluster, actor=self.actor, **data.validated_data)
        return Response(TopicSerializer(topic).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=TopicUpdateSerializer, responses={200: TopicSerializer})
    def update(self, request: Request, tenant_slug: str, cluster_pk: str, name: str) -> Response:
        topic = self.get_object()  # first: another tenant's topic is a 404, whatever the body
        data = TopicUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        topic = services.topic_update(topic=topic, actor=self.actor,
                                      replace_configs=request.method == "PUT", **data.validated_data)
        return Response(TopicSerializer(topic).data)

    @extend_schema(request=TopicUpdateSerializer, responses={200: TopicSerializer})
    def partial_update(self, request: Request, tenant_slug: str, cluster_pk: str, name: str) -> Response:
        return self.update(request, tenant_slug, cluster_pk, name)

    def required_write_role(self) -> str:
        return Role.ADMIN if self.action == "delete_records" else self.write_role

    @extend_schema(responses={200: PartitionViewSerializer(many=True)})
    @action(detail=True, methods=["get"], **WHOLE_LIST)
    def partitions(self, request: Request, tenant_slug: str, cluster_pk: str, name: str) -> Response:
        """Leader, replicas, ISR, size and start/end offsets of each partition, as the cluster reports them."""
        return Response(observability.partitions(self.cluster, self.get_object().name))

    @extend_schema(responses={200: TopicPermissionsSerializer})
    @action(detail=True, methods=["get"], **WHOLE_LIST)
    def permissions(self, request: Request, tenant_slug: str, cluster_pk: str, name: str) -> Response:
        """What the caller may do with this topic (produce, read, edit configs, delete), each with the reason
        when not: the tenant role and the cluster's ACLs for the caller's principal, as the console needs to
        hide or disable what would be refused."""
        topic = self.get_object()
        rights = topic_permissions(cluster=self.cluster, topic=topic.name, role=self.role,
                                   principal=self.actor.principal)
        return Response(TopicPermissionsSerializer(rights).data)

    @extend_schema(request=DeleteRecordsSerializer, responses={200: LowWatermarkSerializer(many=True)})
    @action(detail=True, methods=["post"], url_path="delete-records", **WHOLE_LIST)
    def delete_records(self, request: Request, tenant_slug: str, cluster_pk: str, name: str) -> Response:
        """Delete each named partition's records below an offset (-1: all of them). Admins only."""
        topic = self.get_object()  # first: another tenant's topic is a 404, whatever the body
        data = DeleteRecordsSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        before = {int(k): v for k, v in data.validated_data["partitions"].items()}
        return Response(observability.delete_records(self.cluster, topic.name, before, actor=self.actor))

    @extend_schema(responses={202: TopicSerializer, 204: None})
    def destroy(self, request: Request, tenant_slug: str, cluster_pk: str, name: str) -> Response:
        """204 when the topic is gone; 202 with the topic while reconcile deletes it from the cluster."""
        topic = self.get_object()
        if services.topic_delete(topic=topic, actor=self.actor):
            return Response(status=status.HTTP_204_NO_CONTENT)
        topic.refresh_from_db()
        return Response(TopicSerializer(topic).data, status=status.HTTP_202_ACCEPTED)


class AclViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ServiceWriteMixin, ClusterChildViewSet):
    model = AclBinding
    queryset = AclBinding.objects.none()
    serializer_class = AclSerializer
    write_serializer_class = AclWriteSerializer
    write_role = Role.ADMIN
    lookup_value_regex = "[0-9a-fA-F-]{36}"
    filterset_fields = ["principal", "resource_type", "pattern_type", "resource_name", "operation", "permission",
                        "host"]
    ordering_fields = ["created_at", "principal", "resource_name"]

    def tenant_queryset(self, tenant: Tenant) -> QuerySet[AclBinding]:
        return AclBinding.objects.filter(cluster__tenant=tenant, cluster=self.cluster).select_related("cluster")

    def service_create(self, data: dict[str, Any]) -> AclBinding:
        return services.acl_create(cluster=self.cluster, actor=self.actor, **data)

    def service_update(self, instance: AclBinding, changes: dict[str, Any]) -> AclBinding:
        return services.acl_update(acl=instance, actor=self.actor, **changes)

    def service_delete(self, instance: AclBinding) -> None:
        services.acl_delete(acl=instance, actor=self.actor)


class ClientQuotaViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ServiceWriteMixin, ClusterChildViewSet):
    """Kafka client quotas of the cluster's principals, applied to its brokers by reconcile (AlterClientQuotas)."""

    model = ClientQuota
    queryset = ClientQuota.objects.none()
    serializer_class = ClientQuotaSerializer
    write_serializer_class = ClientQuotaWriteSerializer
    write_role = Role.ADMIN
    lookup_value_regex = "[0-9a-fA-F-]{36}"
    filterset_fields = ["principal", "client_id"]
    ordering_fields = ["created_at", "principal"]

    def tenant_queryset(self, tenant: Tenant) -> QuerySet[ClientQuota]:
        return ClientQuota.objects.filter(cluster__tenant=tenant, cluster=self.cluster).select_related("cluster")

    def service_create(self, data: dict[str, Any]) -> ClientQuota:
        return services.quota_create(cluster=self.cluster, actor=self.actor, **data)

    def service_update(self, instance: ClientQuota, changes: dict[str, Any]) -> ClientQuota:
        return services.quota_update(quota=instance, actor=self.actor, **changes)

    def service_delete(self, instance: ClientQuota) -> None:
        services.quota_delete(quota=instance, actor=self.actor)
