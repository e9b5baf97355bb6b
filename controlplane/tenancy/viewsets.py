"""The one place a request's tenant is resolved; every tenant view builds on it.

Scoping fails closed: a subclass can only reach rows through
``tenant_queryset(tenant)``, and a tenant the caller cannot see is a 404 —
the same answer as a tenant that does not exist.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.db.models import Model, QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import exceptions, status
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import Serializer
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


class ServiceWriteMixin(GenericViewSet):  # type: ignore[type-arg]
    """Create, update (PUT and PATCH) and destroy through a subclass's service functions.

    A write parses the body with ``write_serializer_class`` and calls one hook (``service_create``,
    ``service_update`` with only the fields the body gave, ``service_delete``); the answer renders the row with
    ``serializer_class``. The schema names both serializers for every subclass that sets
    ``write_serializer_class`` (done once, when the class is defined). List it after DRF's mixins, as the base
    viewsets are: drf-spectacular publishes the first docstring above them as the subclass's description.
    """

    write_serializer_class: ClassVar[type[Serializer[Any]]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        write = cls.__dict__.get("write_serializer_class")
        if write is not None:
            read = cls.serializer_class
            extend_schema_view(create=extend_schema(request=write, responses={201: read}),
                               update=extend_schema(request=write, responses={200: read}),
                               partial_update=extend_schema(request=write, responses={200: read}))(cls)

    def service_create(self, data: dict[str, Any]) -> Model:
        raise NotImplementedError

    def service_update(self, instance: Any, changes: dict[str, Any]) -> Model:
        raise NotImplementedError

    def service_delete(self, instance: Any) -> None:
        raise NotImplementedError

    # No docstrings on the actions below: drf-spectacular would publish them as every subclass's descriptions.
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = self.write_serializer_class(data=request.data)
        data.is_valid(raise_exception=True)
        row = self.service_create(dict(data.validated_data))
        return Response(self.get_serializer_class()(row).data, status=status.HTTP_201_CREATED)

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        instance = self.get_object()  # first: another tenant's object is a 404, whatever the body
        data = self.write_serializer_class(data=request.data, partial=request.method == "PATCH")
        data.is_valid(raise_exception=True)
        given = {k: v for k, v in data.validated_data.items() if k in data.initial_data}
        return Response(self.get_serializer_class()(self.service_update(instance, given)).data)

    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return self.update(request, *args, **kwargs)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        self.service_delete(self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


# For detail actions that answer with one whole list (a cluster's brokers or groups, a topic's partitions): no
# pagination envelope and no list filters, so the schema says what the response is (a plain array) and a
# query parameter named like a list filter cannot hide the object.
WHOLE_LIST: dict[str, Any] = {"pagination_class": None, "filter_backends": []}
