"""The reconcile tasks: thin callers of the pipeline (asked for through ``clusters.tasks.enqueue_reconcile``)."""

from __future__ import annotations

import logging
import uuid

from celery import shared_task

from controlplane.clusters.models import Cluster
from controlplane.clusters.tasks import RECONCILE, RECONCILE_CREDENTIALS, enqueue_reconcile, pending_key, redis_client
from controlplane.reconcile.credentials import reconcile_credentials as write_credentials
from controlplane.reconcile.pipeline import reconcile_cluster

log = logging.getLogger(__name__)

RETRY_SECONDS = 1.0
SLOW_RETRY_SECONDS = 5.0
FAST_ATTEMPTS = 60


@shared_task(name=RECONCILE, ignore_result=True)
def reconcile(cluster_id: str, resync: bool = False, attempt: int = 0) -> None:
    redis_client().delete(pending_key(cluster_id))
    try:
        outcome = reconcile_cluster(uuid.UUID(cluster_id), resync=resync)
    except Exception:
        log.exception("reconcile of cluster %s failed; retrying", cluster_id)
        enqueue_reconcile(cluster_id, countdown=SLOW_RETRY_SECONDS, attempt=attempt + 1)
        return
    if outcome.busy:  # another worker's pass is running: come back soon, and it is not an attempt of ours
        enqueue_reconcile(cluster_id, countdown=0.2, attempt=attempt)
    elif not outcome.done:
        wait = RETRY_SECONDS if attempt < FAST_ATTEMPTS else SLOW_RETRY_SECONDS
        enqueue_reconcile(cluster_id, countdown=wait, attempt=attempt + 1)


@shared_task(name=RECONCILE_CREDENTIALS, ignore_result=True)
def reconcile_credentials(cluster_id: str) -> None:
    """Rewrite one cluster's credentials now: a key was made, revoked or lost its owner."""
    cluster = Cluster.objects.filter(pk=cluster_id, deletion_requested_at__isnull=True).first()
    if cluster is None:
        return
    if write_credentials(cluster).pending:  # brokers not up yet, or the store unreachable
        enqueue_reconcile(cluster.pk, countdown=RETRY_SECONDS)
