"""Request and response shapes for tenancy endpoints. No business rules here."""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from controlplane.core.actors import kafka_principal
from controlplane.core.serializers import StrictSerializer
from controlplane.tenancy.models import ApiKey, Invitation, InvitationState, Membership, Role, ServiceAccount, Tenant

NON_OWNER_ROLES = [c for c in Role.choices if c[0] != Role.OWNER]


class TenantSerializer(serializers.ModelSerializer[Tenant]):
    role = serializers.SerializerMethodField()

    class Meta:
        model = Tenant
        fields = ["slug", "name", "created_at", "role"]
        read_only_fields = fields

    def get_role(self, tenant: Tenant) -> str | None:
        roles: dict[int, str] = self.context.get("roles", {})
        return roles.get(tenant.pk)


class TenantCreateSerializer(StrictSerializer):
    slug = serializers.CharField(max_length=63, trim_whitespace=False)
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class TenantUpdateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=200)


class MembershipSerializer(serializers.ModelSerializer[Membership]):
    email = serializers.EmailField(source="user.email", read_only=True)
    username = serializers.CharField(source="user.username", read_only=True)
    principal = serializers.SerializerMethodField()

    class Meta:
        model = Membership
        fields = ["id", "username", "email", "role", "principal", "created_at"]
        read_only_fields = fields

    def get_principal(self, membership: Membership) -> str:
        return kafka_principal("user", membership.user_id)


INVITATION_STATES = [*InvitationState.choices, ("expired", "Expired")]


class InvitationSerializer(serializers.ModelSerializer[Invitation]):
    """An invitation as the tenant's owners see it."""

    state = serializers.SerializerMethodField()

    class Meta:
        model = Invitation
        fields = ["id", "email", "role", "state", "invited_by", "created_at", "expires_at", "responded_at"]
        read_only_fields = fields

    @extend_schema_field(serializers.ChoiceField(choices=INVITATION_STATES))
    def get_state(self, invitation: Invitation) -> str:
        if invitation.state == InvitationState.PENDING and invitation.expires_at <= timezone.now():
            return "expired"
        return str(invitation.state)


class InvitationCreatedSerializer(InvitationSerializer):
    """A new invitation with its one-time link (shown this once) and whether it was mailed to the address."""

    join_url = serializers.CharField(read_only=True)
    emailed = serializers.BooleanField(read_only=True)

    class Meta(InvitationSerializer.Meta):
        fields = [*InvitationSerializer.Meta.fields, "join_url", "emailed"]
        read_only_fields = fields


class InvitationJoinSerializer(StrictSerializer):
    token = serializers.CharField(max_length=200)
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=200, trim_whitespace=False, style={"input_type": "password"})


class InvitationCreateSerializer(StrictSerializer):
    email = serializers.EmailField()
    role = serializers.ChoiceField(choices=Role.choices, default=Role.MEMBER)


class MyInvitationSerializer(serializers.ModelSerializer[Invitation]):
    """An open invitation as its invitee sees it: which tenant, which role, from whom."""

    tenant = serializers.CharField(source="tenant.slug", read_only=True)
    tenant_name = serializers.CharField(source="tenant.name", read_only=True)

    class Meta:
        model = Invitation
        fields = ["id", "tenant", "tenant_name", "role", "invited_by", "created_at", "expires_at"]
        read_only_fields = fields


class MembershipUpdateSerializer(StrictSerializer):
    role = serializers.ChoiceField(choices=Role.choices)


class ServiceAccountSerializer(serializers.ModelSerializer[ServiceAccount]):
    principal = serializers.CharField(read_only=True)

    class Meta:
        model = ServiceAccount
        fields = ["id", "name", "description", "role", "principal", "created_at"]
        read_only_fields = fields


class ServiceAccountWriteSerializer(StrictSerializer):
    name = serializers.RegexField(r"^[a-zA-Z0-9][a-zA-Z0-9._-]{0,63}\Z", max_length=64, trim_whitespace=False,
                                  error_messages={"invalid": "Use 1-64 letters, digits, '.', '_' or '-'."})
    description = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")
    role = serializers.ChoiceField(choices=NON_OWNER_ROLES, default=Role.MEMBER)


class ApiKeySerializer(serializers.ModelSerializer[ApiKey]):
    """A key as listed: never the secret, nor its hash."""

    owner = serializers.SerializerMethodField()
    principal = serializers.CharField(read_only=True)
    cluster = serializers.UUIDField(source="cluster_id", read_only=True, allow_null=True,
                                    help_text="The one cluster this key reaches (its id); null: every cluster "
                                              "of the tenant.")
    revoked = serializers.SerializerMethodField()
    sasl_mechanisms = serializers.ListField(
        child=serializers.CharField(), read_only=True,
        help_text="How the key authenticates to the tenant's Kafka clusters (username = key id, password = "
                  "secret). Keys made before SCRAM credentials were derived have PLAIN only.")

    class Meta:
        model = ApiKey
        fields = ["key_id", "description", "owner", "principal", "cluster", "sasl_mechanisms", "created_at",
                  "last_used_at", "revoked", "revoked_at"]
        read_only_fields = fields

    def get_owner(self, key: ApiKey) -> dict[str, str]:
        if key.owner_service_account_id is not None:
            return {"type": "service_account", "id": str(key.owner_service_account_id)}
        return {"type": "user", "id": str(key.owner_user_id)}

    def get_revoked(self, key: ApiKey) -> bool:
        return key.revoked_at is not None


class IssuedApiKeySerializer(ApiKeySerializer):
    secret = serializers.SerializerMethodField(help_text="Shown only in this response; store it now.")

    class Meta(ApiKeySerializer.Meta):
        fields = [*ApiKeySerializer.Meta.fields, "secret"]
        read_only_fields = fields

    def get_secret(self, key: ApiKey) -> str:
        return str(self.context["secret"])


class ApiKeyCreateSerializer(StrictSerializer):
    description = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")
    service_account = serializers.UUIDField(required=False, allow_null=True, default=None,
                                            help_text="Owner service account; omit for a key of your own.")
    cluster = serializers.UUIDField(required=False, allow_null=True, default=None,
                                    help_text="Scope the key to this cluster of the tenant (its id): it then reaches "
                                              "that cluster only, and REST Proxy v2 clients may use root paths "
                                              "(/topics, /consumers, /brokers).")


class ApiKeyUpdateSerializer(StrictSerializer):
    description = serializers.CharField(max_length=500, allow_blank=True)
