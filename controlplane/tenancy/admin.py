from django.contrib import admin

from controlplane.tenancy.models import ApiKey, Membership, ServiceAccount, Tenant


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["tenant", "user", "role", "created_at"]
    list_filter = ["role"]


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
