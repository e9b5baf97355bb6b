"""Tenancy endpoints: thin adapters from HTTP to services and selectors."""

from __future__ import annotations

from typing import Any, cast

import django_filters
from django.contrib.auth.models import User
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import exceptions, mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.viewsets import GenericViewSet

from controlplane.core.actors import kafka_principal
from controlplane.core.serializers import bodiless
from controlplane.tenancy import services
from controlplane.tenancy.authentication import ServiceAccountIdentity
from controlplane.tenancy.models import ApiKey, Invitation, InvitationState, Membership, Role, ServiceAccount, Tenant
from controlplane.tenancy.names import principals_of
from controlplane.tenancy.selectors import actor_for, invitations_for, last_tenant, tenants_for
from controlplane.tenancy.serializers import (
    ApiKeyCreateSerializer,
    ApiKeySerializer,
    ApiKeyUpdateSerializer,
    InvitationCreatedSerializer,
    InvitationCreateSerializer,
    InvitationSerializer,
    IssuedApiKeySerializer,
    MembershipSerializer,
    MembershipUpdateSerializer,
    MeUpdateSerializer,
    MyInvitationSerializer,
    PrincipalSerializer,
    ServiceAccountSerializer,
    ServiceAccountWriteSerializer,
    TenantCreateSerializer,
    TenantSerializer,
    TenantUpdateSerializer,
)
from controlplane.tenancy.viewsets import TenantScopedViewSet


def _api_key(request: Request) -> ApiKey | None:
    return request.auth if isinstance(request.auth, ApiKey) else None


def _user(request: Request) -> User:
    """The Django user behind a request that is not a service account's."""
    return cast(User, request.user)


def _roles(request: Request, tenants: list[Tenant]) -> dict[int, str]:
    if isinstance(request.user, ServiceAccountIdentity):
        return {t.pk: str(request.user.service_account.role) for t in tenants}
    rows = Membership.objects.filter(user=_user(request), tenant__in=tenants).values_list("tenant_id", "role")
    return dict(rows)


class TenantViewSet(mixins.ListModelMixin, GenericViewSet):  # type: ignore[type-arg]
    """The tenants the caller belongs to. An API key sees only its own tenant."""

    model = Tenant
    queryset = Tenant.objects.none()
    serializer_class = TenantSerializer
    lookup_field = "slug"
    lookup_url_kwarg = "tenant_slug"
    lookup_value_regex = "[^/]+"
    ordering_fields = ["slug", "created_at"]

    def get_queryset(self) -> QuerySet[Tenant]:
        if getattr(self, "swagger_fake_view", False):
            return Tenant.objects.none()
        return tenants_for(user=self.request.user, api_key=_api_key(self.request)).order_by("slug")

    def get_serializer_context(self) -> dict[str, Any]:
        context = super().get_serializer_context()
        if not getattr(self, "swagger_fake_view", False) and self.request.user is not None:
            context["roles"] = _roles(self.request, list(self.get_queryset()))
        return context

    def _scoped(self, request: Request, tenant_slug: str, required: str) -> Tenant:
        tenant, role = TenantScopedViewSet.resolve_tenant(request, tenant_slug)
        if not services.role_at_least(role, required):
            raise exceptions.PermissionDenied(f"This action needs the '{required}' role in tenant '{tenant.slug}'.")
        return tenant

    def retrieve(self, request: Request, tenant_slug: str) -> Response:
        tenant = self._scoped(request, tenant_slug, Role.VIEWER)
        return Response(TenantSerializer(tenant, context=self.get_serializer_context()).data)

    @extend_schema(request=TenantCreateSerializer, responses={201: TenantSerializer})
    def create(self, request: Request) -> Response:
        if request.auth is not None:
            raise exceptions.PermissionDenied("API keys are bound to one tenant and cannot create tenants.")
        data = TenantCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        tenant = services.tenant_create(owner=_user(request), actor=actor_for(request.user), **data.validated_data)
        return Response(TenantSerializer(tenant, context={"roles": {tenant.pk: Role.OWNER}}).data,
                        status=status.HTTP_201_CREATED)

    @extend_schema(request=TenantUpdateSerializer, responses={200: TenantSerializer})
    def partial_update(self, request: Request, tenant_slug: str) -> Response:
        tenant = self._scoped(request, tenant_slug, Role.OWNER)
        data = TenantUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        tenant = services.tenant_update(tenant=tenant, actor=actor_for(request.user), **data.validated_data)
        return Response(TenantSerializer(tenant, context=self.get_serializer_context()).data)

    @extend_schema(request=TenantUpdateSerializer, responses={200: TenantSerializer})
    def update(self, request: Request, tenant_slug: str) -> Response:
        return self.partial_update(request, tenant_slug)

    def destroy(self, request: Request, tenant_slug: str) -> Response:
        tenant = self._scoped(request, tenant_slug, Role.OWNER)
        services.tenant_delete(tenant=tenant, actor=actor_for(request.user))
        return Response(status=status.HTTP_204_NO_CONTENT)


class MembershipFilter(django_filters.FilterSet):
    role = django_filters.ChoiceFilter(choices=Role.choices)
    email = django_filters.CharFilter(field_name="user__email", lookup_expr="icontains")

    class Meta:
        model = Membership
        fields = ["role", "email"]


class MembershipViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantScopedViewSet):
    """Members of a tenant and their roles; only owners change them. People join by accepting an invitation."""

    model = Membership
    queryset = Membership.objects.none()
    serializer_class = MembershipSerializer
    write_role = Role.OWNER
    filterset_class = MembershipFilter
    ordering_fields = ["created_at", "role"]

    def tenant_queryset(self, tenant: Tenant) -> QuerySet[Membership]:
        return Membership.objects.filter(tenant=tenant).select_related("user")

    @extend_schema(request=MembershipUpdateSerializer, responses={200: MembershipSerializer})
    def partial_update(self, request: Request, tenant_slug: str, pk: str) -> Response:
        membership = self.get_object()  # first: another tenant's membership is a 404, whatever the body
        data = MembershipUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        membership = services.membership_update(membership=membership, actor=self.actor, **data.validated_data)
        return Response(MembershipSerializer(membership).data)

    @extend_schema(request=MembershipUpdateSerializer, responses={200: MembershipSerializer})
    def update(self, request: Request, tenant_slug: str, pk: str) -> Response:
        return self.partial_update(request, tenant_slug, pk)

    def destroy(self, request: Request, tenant_slug: str, pk: str) -> Response:
        services.membership_remove(membership=self.get_object(), actor=self.actor)
        return Response(status=status.HTTP_204_NO_CONTENT)


class InvitationFilter(django_filters.FilterSet):
    state = django_filters.ChoiceFilter(choices=InvitationState.choices)

    class Meta:
        model = Invitation
        fields = ["state"]


class InvitationViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantScopedViewSet):
    """Invitations to join the tenant. Owners invite (the answer never says whether the address has an account;
    it carries the invitation's one-time join link, shown this once) and revoke (DELETE); the invitee accepts or
    declines under ``/api/v1/invitations``, or, without an account, joins through the link (``/api/v1/auth/join``)."""

    model = Invitation
    queryset = Invitation.objects.none()
    serializer_class = InvitationSerializer
    read_role = Role.ADMIN
    write_role = Role.OWNER
    filterset_class = InvitationFilter
    ordering_fields = ["created_at", "expires_at"]

    def tenant_queryset(self, tenant: Tenant) -> QuerySet[Invitation]:
        return Invitation.objects.filter(tenant=tenant)

    @extend_schema(request=InvitationCreateSerializer, responses={201: InvitationCreatedSerializer})
    def create(self, request: Request, tenant_slug: str) -> Response:
        data = InvitationCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        issued = services.invitation_create(tenant=self.tenant, actor=self.actor,
                                            site_url=request.build_absolute_uri("/"), **data.validated_data)
        body = {**InvitationSerializer(issued.invitation).data, "join_url": issued.join_url, "emailed": issued.emailed}
        return Response(body, status=status.HTTP_201_CREATED)

    def destroy(self, request: Request, tenant_slug: str, pk: str) -> Response:
        services.invitation_revoke(invitation=self.get_object(), actor=self.actor)
        return Response(status=status.HTTP_204_NO_CONTENT)


class MyInvitationViewSet(mixins.ListModelMixin, GenericViewSet):  # type: ignore[type-arg]
    """The signed-in user's open invitations, matched on their account's e-mail; accept or decline each.

    Session users only: an API key is bound to one tenant and acts in no other. Anyone else's invitation is a 404.
    """

    model = Invitation
    queryset = Invitation.objects.none()
    serializer_class = MyInvitationSerializer
    lookup_value_regex = "[0-9a-fA-F-]{36}"
    filter_backends: list[type] = []  # paginated still: any tenant may invite any address

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if request.auth is not None or isinstance(request.user, ServiceAccountIdentity):
            raise exceptions.PermissionDenied("Invitations are answered signed in to the console, not with API keys.")

    def get_queryset(self) -> QuerySet[Invitation]:
        if getattr(self, "swagger_fake_view", False):
            return Invitation.objects.none()
        return invitations_for(user=self.request.user).order_by("-created_at")

    @extend_schema(request=None, responses={200: TenantSerializer})
    @action(detail=True, methods=["post"])
    @bodiless
    def accept(self, request: Request, pk: str) -> Response:
        """Join the tenant with the invitation's role."""
        membership = services.invitation_accept(invitation=self.get_object(), user=_user(request))
        tenant = membership.tenant
        return Response(TenantSerializer(tenant, context={"roles": {tenant.pk: membership.role}}).data)

    @extend_schema(request=None, responses={204: None})
    @action(detail=True, methods=["post"])
    @bodiless
    def decline(self, request: Request, pk: str) -> Response:
        services.invitation_decline(invitation=self.get_object(), user=_user(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ServiceAccountViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantScopedViewSet):
    model = ServiceAccount
    queryset = ServiceAccount.objects.none()
    serializer_class = ServiceAccountSerializer
    write_role = Role.ADMIN
    filterset_fields = ["name", "role"]
    ordering_fields = ["name", "created_at"]

    def tenant_queryset(self, tenant: Tenant) -> QuerySet[ServiceAccount]:
        return ServiceAccount.objects.filter(tenant=tenant)

    @extend_schema(request=ServiceAccountWriteSerializer, responses={201: ServiceAccountSerializer})
    def create(self, request: Request, tenant_slug: str) -> Response:
        data = ServiceAccountWriteSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        account = services.service_account_create(tenant=self.tenant, actor=self.actor, **data.validated_data)
        return Response(ServiceAccountSerializer(account).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=ServiceAccountWriteSerializer, responses={200: ServiceAccountSerializer})
    def update(self, request: Request, tenant_slug: str, pk: str) -> Response:
        account = self.get_object()  # first: another tenant's account is a 404, whatever the body
        data = ServiceAccountWriteSerializer(data=request.data, partial=request.method == "PATCH")
        data.is_valid(raise_exception=True)
        account = services.service_account_update(account=account, actor=self.actor, **data.validated_data)
        return Response(ServiceAccountSerializer(account).data)

    @extend_schema(request=ServiceAccountWriteSerializer, responses={200: ServiceAccountSerializer})
    def partial_update(self, request: Request, tenant_slug: str, pk: str) -> Response:
        return self.update(request, tenant_slug, pk)

    def destroy(self, request: Request, tenant_slug: str, pk: str) -> Response:
        services.service_account_delete(account=self.get_object(), actor=self.actor)
        return Response(status=status.HTTP_204_NO_CONTENT)


class PrincipalViewSet(TenantScopedViewSet):
    """Every principal an ACL or quota may name in this tenant, with its name: ``User:*``, the service accounts,
    the members (the console's principal picker)."""

    model = ServiceAccount
    queryset = ServiceAccount.objects.none()
    pagination_class = None
    filter_backends: list[type] = []

    @extend_schema(responses={200: PrincipalSerializer(many=True)})
    def list(self, request: Request, tenant_slug: str) -> Response:
        return Response(PrincipalSerializer(principals_of(self.tenant.pk), many=True).data)


class ApiKeyFilter(django_filters.FilterSet):
    revoked = django_filters.BooleanFilter(field_name="revoked_at", lookup_expr="isnull", exclude=True)
    service_account = django_filters.UUIDFilter(field_name="owner_service_account_id")

    class Meta:
        model = ApiKey
        fields = ["revoked", "service_account"]


class ApiKeyViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantScopedViewSet):
    """API keys. Admins manage every key of the tenant; anyone else, only their own.

    DELETE revokes (the row stays for the audit trail, marked revoked).
    """

    model = ApiKey
    queryset = ApiKey.objects.none()
    serializer_class = ApiKeySerializer
    lookup_field = "key_id"
    write_role = Role.MEMBER
    filterset_class = ApiKeyFilter
    ordering_fields = ["created_at", "last_used_at"]

    def tenant_queryset(self, tenant: Tenant) -> QuerySet[ApiKey]:
        keys = ApiKey.objects.filter(tenant=tenant).select_related("cluster")
        if services.role_at_least(self.role, Role.ADMIN):
            return keys
        if isinstance(self.request.user, ServiceAccountIdentity):
            return keys.filter(owner_service_account=self.request.user.service_account)
        return keys.filter(owner_user=_user(self.request))

    def required_write_role(self) -> str:
        if self.request.method == "POST" and self.request.data.get("service_account"):
            return Role.ADMIN
        return Role.MEMBER

    @extend_schema(request=ApiKeyCreateSerializer, responses={201: IssuedApiKeySerializer})
    def create(self, request: Request, tenant_slug: str) -> Response:
        data = ApiKeyCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        account_id = data.validated_data["service_account"]
        owner_user = owner_account = None
        if account_id is not None:
            owner_account = ServiceAccount.objects.filter(tenant=self.tenant, id=account_id).first()
            if owner_account is None:
                raise exceptions.ValidationError({"service_account": ["No such service account in this tenant."]})
        elif isinstance(request.user, ServiceAccountIdentity):
            owner_account = request.user.service_account
        else:
            owner_user = _user(request)
        issued = services.api_key_create(tenant=self.tenant, actor=self.actor, owner_user=owner_user,
                                         owner_service_account=owner_account,
                                         cluster_id=data.validated_data["cluster"],
                                         description=data.validated_data["description"])
        body = IssuedApiKeySerializer(issued.api_key, context={"secret": issued.secret}).data
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(request=ApiKeyUpdateSerializer, responses={200: ApiKeySerializer})
    def partial_update(self, request: Request, tenant_slug: str, key_id: str) -> Response:
        key = self.get_object()  # first: another tenant's key is a 404, whatever the body
        data = ApiKeyUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        key = services.api_key_update(api_key=key, actor=self.actor, **data.validated_data)
        return Response(ApiKeySerializer(key).data)

    @extend_schema(request=ApiKeyUpdateSerializer, responses={200: ApiKeySerializer})
    def update(self, request: Request, tenant_slug: str, key_id: str) -> Response:
        return self.partial_update(request, tenant_slug, key_id)

    def destroy(self, request: Request, tenant_slug: str, key_id: str) -> Response:
        services.api_key_revoke(api_key=self.get_object(), actor=self.actor)
        return Response(status=status.HTTP_204_NO_CONTENT)


ME = inline_serializer("Me", {
    "type": serializers.CharField(), "id": serializers.CharField(), "display": serializers.CharField(),
    "principal": serializers.CharField(), "api_key": serializers.CharField(allow_null=True),
    "tenants": TenantSerializer(many=True),
    "last_tenant": serializers.CharField(allow_null=True, help_text=(
        "The tenant to land on after sign-in: the one last chosen (PATCH me), or an API key's own; null: none "
        "yet (or no longer a member there)."))})


class MeView(APIView):
    """Who the caller is, the tenants and roles it has, and the tenant it last chose."""

    @extend_schema(responses={200: ME})
    def get(self, request: Request) -> Response:
        actor = actor_for(request.user)
        api_key = _api_key(request)
        tenants = list(tenants_for(user=request.user, api_key=api_key).order_by("slug"))
        principal = (request.user.service_account.principal if isinstance(request.user, ServiceAccountIdentity)
                     else kafka_principal("user", request.user.pk))
        return Response({
            "type": actor.type, "id": actor.id, "display": actor.display, "principal": principal,
            "api_key": api_key.key_id if api_key is not None else None,
            "tenants": TenantSerializer(tenants, many=True, context={"roles": _roles(request, tenants)}).data,
            "last_tenant": last_tenant(user=request.user, api_key=api_key),
        })

    @extend_schema(request=MeUpdateSerializer, responses={200: ME})
    def patch(self, request: Request) -> Response:
        """Remember the tenant the user chose (sign-in lands there next time). Signed-in users only."""
        if request.auth is not None or isinstance(request.user, ServiceAccountIdentity):
            raise exceptions.PermissionDenied("An API key is bound to its tenant: there is nothing to choose.")
        data = MeUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        services.membership_choose(user=_user(request), tenant_slug=data.validated_data["last_tenant"])
        return self.get(request)


