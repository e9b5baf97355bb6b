"""The tenant's audit trail, read-only, for admins (audit's rows, served here because tenancy's viewsets scope it:
audit sits below tenancy, which writes audit rows)."""

from __future__ import annotations

import django_filters
from django.db.models import QuerySet
from rest_framework import mixins

from controlplane.audit.models import AuditEvent
from controlplane.audit.serializers import AuditEventSerializer
from controlplane.tenancy.models import Role, Tenant
from controlplane.tenancy.viewsets import TenantScopedViewSet


class AuditEventFilter(django_filters.FilterSet):
    since = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    until = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="lt")
    action = django_filters.CharFilter()
    target_type = django_filters.CharFilter()
    actor_id = django_filters.CharFilter()

    class Meta:
        model = AuditEvent
        fields = ["action", "target_type", "actor_id", "since", "until"]


class AuditEventViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantScopedViewSet):
    model = AuditEvent
    queryset = AuditEvent.objects.none()
    serializer_class = AuditEventSerializer
    read_role = Role.ADMIN
    write_role = Role.OWNER
    lookup_value_regex = "[0-9a-fA-F-]{36}"
    filterset_class = AuditEventFilter
    ordering_fields = ["created_at"]

    def tenant_queryset(self, tenant: Tenant) -> QuerySet[AuditEvent]:
        return AuditEvent.objects.filter(tenant=tenant)
