"""The one place a request's tenant is resolved; every tenant view builds on it.

Scoping fails closed: a subclass can only reach rows through
``tenant_queryset(tenant)``, and a tenant the caller cannot see is a 404 —
the same answer as a tenant that does not exist.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.db.models import Model, QuerySet
from rest_framework import exceptions
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request
from rest_framework.viewsets import GenericViewSet

from controlplane.core.actors import Actor
from controlplane.tenancy.models import ApiKey, Role, Tenant
from controlplane.tenancy.selectors import actor_for, caller_role
from controlplane.tenancy.services import role_at_least


class TenantScopedViewSet(GenericViewSet):  # type: ignore[type-arg]
    """Base for every endpoint under ``/api/v1/tenants/{tenant_slug}/``."""

    model: ClassVar[type[Model]]
    read_role: ClassVar[str] = Role.VIEWER
    write_role: ClassVar[str] = Role.MEMBER
    lookup_value_regex = "[^/]+"

    tenant: Tenant
    role: str
    actor: Actor

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        self.tenant, self.role = self.resolve_tenant(request, kwargs["tenant_slug"])
        self.actor = actor_for(request.user)
        self.resolve_parents(kwargs)
        required = self.read_role if request.method in SAFE_METHODS else self.required_write_role()
        if not role_at_least(self.role, required):
            raise exceptions.PermissionDenied(
                f"This action needs the '{required}' role in tenant '{self.tenant.slug}'; you have '{self.role}'.")

    @staticmethod
    def resolve_tenant(request: Request, slug: str) -> tuple[Tenant, str]:
        tenant = Tenant.objects.filter(slug=slug).first()
        api_key = request.auth if isinstance(request.auth, ApiKey) else None
        role = None if tenant is None else caller_role(tenant=tenant, user=request.user, api_key=api_key)
        if tenant is None or role is None:
            raise exceptions.NotFound("Not found.")
        return tenant, role

    def required_write_role(self) -> str:
        return self.write_role

    def resolve_parents(self, kwargs: dict[str, Any]) -> None:
        """Load objects named in the URL above this one (404 when outside the tenant)."""

    def tenant_queryset(self, tenant: Tenant) -> QuerySet[Any]:
        raise NotImplementedError

    def get_queryset(self) -> QuerySet[Any]:
        if getattr(self, "swagger_fake_view", False):
            return self.model._default_manager.none()
        return self.tenant_queryset(self.tenant)


# For detail actions that answer with one whole list (a cluster's brokers or groups, a topic's partitions): no
# pagination envelope and no list filters, so the schema says what the response is (a plain array) and a
# query parameter named like a list filter cannot hide the object.
WHOLE_LIST: dict[str, Any] = {"pagination_class": None, "filter_backends": []}
