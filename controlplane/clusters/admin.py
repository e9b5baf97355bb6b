from django.contrib import admin

from controlplane.clusters.models import Cluster


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["name", "tenant", "plan", "generation", "created_at"]
    list_filter = ["plan"]
