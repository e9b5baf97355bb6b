"""Whether a cluster's brokers may tier closed segments to object storage, and where (decision 0032).

Two things decide it: the plan (``PlanLimits.tiered_storage``) and the deployment (an object store in
``settings.SLUICE_REMOTE_STORAGE``). The store's keys stay on the hosts: the agent reads them through
:func:`remote_storage` when it writes a broker's config; a node spec only says whether the broker may tier.
"""

from __future__ import annotations

from django.conf import settings

from controlplane.agent.processes import RemoteStorage
from controlplane.clusters.models import Cluster
from controlplane.clusters.plans import PLAN_LIMITS


def remote_storage() -> RemoteStorage | None:
    """The deployment's object store, or None when it has none (tiering is then off for every cluster)."""
    conf = settings.SLUICE_REMOTE_STORAGE
    if not conf["endpoint"] or not conf["bucket"]:
        return None
    return RemoteStorage(endpoint=conf["endpoint"], bucket=conf["bucket"], prefix=conf["prefix"].strip("/"),
                         region=conf["region"], access_key=conf["access_key"], secret_key=conf["secret_key"],
                         task_interval_ms=settings.SLUICE_REMOTE_LOG_MANAGER_INTERVAL_MS)


def tiering_enabled(cluster: Cluster) -> bool:
    """Whether ``cluster``'s topics may set ``remote.storage.enable=true``."""
    return PLAN_LIMITS[cluster.plan].tiered_storage and remote_storage() is not None
