from django.contrib import admin

from controlplane.resources.models import AclBinding, ClientQuota, Topic


@admin.register(Topic)
class TopicAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["name", "cluster", "partitions", "replication_factor", "generation"]
    search_fields = ["name"]


@admin.register(AclBinding)
class AclBindingAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["principal", "permission", "operation", "resource_type", "pattern_type", "resource_name", "host"]


@admin.register(ClientQuota)
class ClientQuotaAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["principal", "client_id", "cluster", "producer_byte_rate", "consumer_byte_rate",
                    "request_percentage", "max_connections"]
