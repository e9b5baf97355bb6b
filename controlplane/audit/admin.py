from django.contrib import admin

from controlplane.audit.models import AuditEvent


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["created_at", "tenant_slug", "actor_display", "action", "target_type", "target_id"]
    list_filter = ["action"]

    def has_change_permission(self, request: object, obj: object = None) -> bool:
        return False  # the trail is append-only
