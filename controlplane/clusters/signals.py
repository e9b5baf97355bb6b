"""The clusters' reactions to what the layers below announce (connected in ``ClustersConfig.ready``)."""

from __future__ import annotations

import uuid
from typing import Any

from controlplane.clusters.models import Cluster
from controlplane.clusters.tasks import enqueue_credentials, enqueue_reconcile


def on_kafka_access_changed(*, tenant_id: int, cluster_id: uuid.UUID | None, acls: bool, **_: Any) -> None:
    """Rewrite the tenant's clusters' credentials now; reconcile them when role-derived ACLs changed."""
    enqueue_credentials(tenant_id, cluster_id=cluster_id)
    if acls:
        for pk in Cluster.objects.filter(tenant_id=tenant_id).values_list("pk", flat=True):
            enqueue_reconcile(pk)
