"""The tenant's audit trail, read-only, for admins (audit's rows, served here because tenancy's viewsets scope it:
audit sits below tenancy, which writes audit rows)."""

from __future__ import annotations

from typing import Any

import django_filters
from django import forms
from django.contrib.auth import get_user_model
from django.db.models import CharField, Q, QuerySet, Subquery
from django.db.models.functions import Cast
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import mixins, serializers
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.audit.models import AuditEvent
from controlplane.tenancy.models import Role, Tenant
from controlplane.tenancy.names import AuditNamer
from controlplane.tenancy.selectors import audit_facets
from controlplane.tenancy.serializers import AuditRowSerializer
from controlplane.tenancy.viewsets import WHOLE_LIST, TenantScopedViewSet


class AuditFilterForm(forms.Form):
    """Cross-field checks of the filters: a bad combination is a 400 naming the field, like a bad value."""

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        since, until = cleaned.get("since"), cleaned.get("until")
        if since is not None and until is not None and until <= since:
            self.add_error("until", "Must be after since.")
        return cleaned


def _actor(queryset: QuerySet[AuditEvent], name: str, value: str) -> QuerySet[AuditEvent]:
    """An actor by id, display name, e-mail (substring) or Kafka principal (``User:u-1``, ``User:sa-…``),
    case-insensitive. Rows name a person by user id and username, so an e-mail is matched through the users
    table; the queryset is already the tenant's, so matching another tenant's user finds nothing."""
    value = value.strip()
    if not value:
        return queryset
    match = Q(actor_id__iexact=value) | Q(actor_display__icontains=value)  # security rows: the principal itself
    if "@" in value:
        by_email = get_user_model().objects.filter(email__icontains=value).annotate(
            key=Cast("pk", CharField())).values("key")
        match |= Q(actor_type="user", actor_id__in=Subquery(by_email))
    kind, _, ident = value.removeprefix("User:").partition("-")
    if value.startswith("User:") and kind in ("u", "sa") and ident:
        match |= Q(actor_type="user" if kind == "u" else "service_account", actor_id=ident)
    return queryset.filter(match)


class AuditEventFilter(django_filters.FilterSet):
    since = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="gte",
                                             help_text="Rows at or after this ISO 8601 time.")
    until = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="lt",
                                             help_text="Rows before this ISO 8601 time (after since).")
    action = django_filters.CharFilter(help_text="Exactly this action, e.g. topic.create.")
    action_prefix = django_filters.CharFilter(field_name="action", lookup_expr="startswith",
                                              help_text="Actions starting with this, e.g. 'topic.' or 'security.'.")
    target_type = django_filters.CharFilter(help_text="e.g. topic, acl, cluster, api_key, service_account.")
    target_id = django_filters.CharFilter(help_text="The target's id as rows carry it (a topic's is "
                                                    "'<cluster id>/<name>').")
    actor_type = django_filters.ChoiceFilter(choices=[(c, c) for c in ("user", "service_account", "system",
                                                                      "principal", "api_key")])
    actor_id = django_filters.CharFilter()
    actor = django_filters.CharFilter(method=_actor,
                                      help_text="Actor id, name or e-mail (substrings) or Kafka principal.")

    class Meta:
        model = AuditEvent
        fields = ["action", "action_prefix", "target_type", "target_id", "actor_type", "actor_id", "actor",
                  "since", "until"]
        form = AuditFilterForm


class AuditEventViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantScopedViewSet):
    model = AuditEvent
    queryset = AuditEvent.objects.none()
    serializer_class = AuditRowSerializer
    read_role = Role.ADMIN
    write_role = Role.OWNER
    lookup_value_regex = "[0-9a-fA-F-]{36}"
    filterset_class = AuditEventFilter
    ordering_fields = ["created_at"]

    def tenant_queryset(self, tenant: Tenant) -> QuerySet[AuditEvent]:
        return AuditEvent.objects.filter(tenant=tenant)

    def get_serializer_context(self) -> dict[str, Any]:
        context = super().get_serializer_context()
        if not getattr(self, "swagger_fake_view", False):
            context["namer"] = AuditNamer(self.tenant.pk)  # names for the whole page, each loaded once
        return context

    @extend_schema(responses={200: inline_serializer("AuditFacets", {
        "actions": serializers.ListField(child=serializers.CharField()),
        "target_types": serializers.ListField(child=serializers.CharField()),
        "actor_types": serializers.ListField(child=serializers.CharField())})})
    @action(detail=False, methods=["get"], **WHOLE_LIST)
    def facets(self, request: Request, tenant_slug: str) -> Response:
        """The actions, target types and actor types present in the tenant's trail (for filter choices)."""
        return Response(audit_facets(tenant=self.tenant))
