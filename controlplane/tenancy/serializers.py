"""Request and response shapes for tenancy endpoints. No business rules here."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from controlplane.audit.models import AuditEvent
from controlplane.audit.serializers import AuditEventSerializer
from controlplane.core.actors import kafka_principal
from controlplane.core.serializers import StrictSerializer
from controlplane.tenancy.models import ApiKey, Invitation, InvitationState, Membership, Role, ServiceAccount, Tenant
from controlplane.tenancy.names import AuditNamer, AuditNames, PrincipalDirectory

NON_OWNER_ROLES = [c for c in Role.choices if c[0] != Role.OWNER]


def principal_directory(context: dict[str, Any], tenant_id: int) -> PrincipalDirectory:
    """The request's directory of the tenant's principals (made once per serializer context)."""
    directory = context.get("principals")
    if not isinstance(directory, PrincipalDirectory) or directory.tenant_id != tenant_id:
        directory = context["principals"] = PrincipalDirectory(tenant_id)
    return directory


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

    owner_name = serializers.SerializerMethodField(
        help_text="The owner's name: the service account's, or the member's e-mail (or username); null when the "
                  "owner is no longer in the tenant.")
    cluster_name = serializers.SerializerMethodField(help_text="The scoped cluster's name; null: every cluster.")

    class Meta:
        model = ApiKey
        fields = ["key_id", "description", "owner", "owner_name", "principal", "cluster", "cluster_name",
                  "sasl_mechanisms", "created_at", "last_used_at", "revoked", "revoked_at"]
        read_only_fields = fields

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_owner_name(self, key: ApiKey) -> str | None:
        return principal_directory(self.context, key.tenant_id).name(key.principal)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_cluster_name(self, key: ApiKey) -> str | None:
        return key.cluster.name if key.cluster is not None else None

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


class PrincipalSerializer(serializers.Serializer[Any]):
    principal = serializers.CharField(help_text="What an ACL or quota names: 'User:sa-<id>', 'User:u-<id>', 'User:*'.")
    kind = serializers.ChoiceField(choices=["wildcard", "service_account", "user"])
    id = serializers.CharField()
    name = serializers.CharField(help_text="The account's name, the member's e-mail (or username), 'All principals'.")
    email = serializers.CharField(allow_null=True)


def _iso_times(data: Any, key: str = "") -> Any:
    """``data`` with epoch-seconds numbers under ``*_at`` keys as ISO 8601 strings (older security rows)."""
    if isinstance(data, dict):
        return {k: _iso_times(v, str(k)) for k, v in data.items()}
    if isinstance(data, list):
        return [_iso_times(v) for v in data]
    if key.endswith("_at") and isinstance(data, int | float) and not isinstance(data, bool):
        return datetime.fromtimestamp(data, UTC).isoformat()
    return data


@extend_schema_serializer(component_name="AuditEvent")  # the schema's name for an audit row, as before
class AuditRowSerializer(AuditEventSerializer):
    """An audit row as the console shows it: names beside the ids and one readable sentence; times in ``data``
    as ISO 8601. Names come from ``context["namer"]`` (one per page) or one made for the row's tenant."""

    actor_name = serializers.SerializerMethodField(help_text="The actor's name (account name, member's e-mail).")
    target_name = serializers.SerializerMethodField(help_text="The target's name; null when unknown.")
    summary = serializers.SerializerMethodField(help_text="One readable sentence: who did what to which.")

    class Meta(AuditEventSerializer.Meta):
        fields = [*AuditEventSerializer.Meta.fields, "actor_name", "target_name", "summary"]
        read_only_fields = fields

    def _names(self, row: AuditEvent) -> AuditNames:
        namer = self.context.get("namer")
        if not isinstance(namer, AuditNamer):
            namer = self.context["namer"] = AuditNamer(row.tenant_id or 0)
        return namer.names(row)

    def get_actor_name(self, row: AuditEvent) -> str:
        return self._names(row).actor_name

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_target_name(self, row: AuditEvent) -> str | None:
        return self._names(row).target_name

    def get_summary(self, row: AuditEvent) -> str:
        return self._names(row).summary

    def to_representation(self, instance: AuditEvent) -> Any:
        out = super().to_representation(instance)
        out["data"] = _iso_times(out.get("data"))  # times as ISO 8601, never epoch seconds
        return out


class MeUpdateSerializer(StrictSerializer):
    last_tenant = serializers.CharField(max_length=63, help_text="The slug of the tenant the user chose.")
