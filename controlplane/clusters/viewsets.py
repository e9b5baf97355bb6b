"""The base viewset of everything under ``/clusters/{cluster_pk}/`` (topics, ACLs, quotas, reports, rebalances)."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import QuerySet
from rest_framework import exceptions
from rest_framework.request import Request

from controlplane.clusters.models import Cluster
from controlplane.tenancy.viewsets import TenantScopedViewSet


def key_scoped(request: Request, clusters: QuerySet[Cluster]) -> QuerySet[Cluster]:
    """Only the key's cluster when the caller's API key is scoped to one (others are a 404)."""
    cluster_id = getattr(request.auth, "cluster_id", None)
    return clusters if cluster_id is None else clusters.filter(pk=cluster_id)


class ClusterChildViewSet(TenantScopedViewSet):
    """Resolves ``cluster_pk`` within the tenant: another tenant's cluster is a 404."""

    cluster: Cluster

    def resolve_parents(self, kwargs: dict[str, Any]) -> None:
        try:
            cluster_id = uuid.UUID(str(kwargs["cluster_pk"]))
        except ValueError:
            raise exceptions.NotFound("Not found.") from None
        cluster = key_scoped(self.request, Cluster.objects.filter(tenant=self.tenant, pk=cluster_id)).first()
        if cluster is None:
            raise exceptions.NotFound("Not found.")
        self.cluster = cluster
