from django.contrib import admin

from controlplane.tenancy.models import ApiKey, Invitation, Membership, ServiceAccount, Tenant


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Staff set a tenant's limits here (empty: SLUICE_TENANT_MAX_CLUSTERS / SLUICE_TENANT_MAX_BROKERS)."""

    list_display = ["slug", "name", "max_clusters", "max_brokers", "created_at"]
    search_fields = ["slug", "name"]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["tenant", "user", "role", "created_at"]
    list_filter = ["role"]


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["email", "tenant", "role", "state", "expires_at", "created_at"]
    list_filter = ["state"]
    readonly_fields = ["tenant", "email", "role", "state", "invited_by", "created_at", "expires_at", "responded_at"]

    def has_add_permission(self, request: object) -> bool:
        return False  # invitations are made through the API, so they are audited


@admin.register(ServiceAccount)
class ServiceAccountAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["name", "tenant", "role", "created_at"]


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["key_id", "tenant", "owner_user", "owner_service_account", "last_used_at", "revoked_at"]
    exclude = ["secret_hash"]
    readonly_fields = ["key_id", "tenant", "owner_user", "owner_service_account", "last_used_at", "created_at"]

    def has_add_permission(self, request: object) -> bool:
        return False  # keys are issued through the API, which shows the secret once
