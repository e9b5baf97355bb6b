"""Cluster tasks: thin callers of the reconcile service.

``enqueue_reconcile`` is the one way to ask for a pass. A Redis key (SET NX with
an expiry) keeps at most one pass queued per cluster, however many spec
changes, agent reports and resyncs ask; the expiry means a pass lost with a
killed worker only delays the next one.
"""

from __future__ import annotations

import functools
import logging
import uuid

import redis
from celery import shared_task
from django.conf import settings

from controlplane.clusters.models import Cluster
from controlplane.clusters.reconcile import reconcile_cluster

log = logging.getLogger(__name__)

PENDING_TTL_SECONDS = 10
RETRY_SECONDS = 1.0
SLOW_RETRY_SECONDS = 5.0
FAST_ATTEMPTS = 60


@functools.cache
def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL)


def _pending_key(cluster_id: str) -> str:
    return f"sluice:reconcile-pending:{cluster_id}"


def enqueue_reconcile(cluster_id: uuid.UUID | str, *, countdown: float = 0, resync: bool = False,
                      attempt: int = 0) -> bool:
    if not _redis().set(_pending_key(str(cluster_id)), "1", nx=True, ex=PENDING_TTL_SECONDS):
        return False
    reconcile.apply_async(args=[str(cluster_id)], kwargs={"resync": resync, "attempt": attempt},
                          countdown=countdown)
    return True


def enqueue_reconcile_by_kafka_id(kafka_cluster_id: str) -> None:
    for pk in Cluster.objects.filter(kafka_cluster_id=kafka_cluster_id).values_list("pk", flat=True):
        enqueue_reconcile(pk)


@shared_task(name="clusters.reconcile", ignore_result=True)
def reconcile(cluster_id: str, resync: bool = False, attempt: int = 0) -> None:
    _redis().delete(_pending_key(cluster_id))
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


def enqueue_credentials(tenant_id: int, *, cluster_id: uuid.UUID | None = None) -> None:
    """Rewrite the credentials of the tenant's clusters (or one) now: a key was made, revoked or lost its owner."""
    clusters = Cluster.objects.filter(tenant_id=tenant_id, deletion_requested_at__isnull=True)
    if cluster_id is not None:
        clusters = clusters.filter(pk=cluster_id)
    for pk in clusters.values_list("pk", flat=True):
        reconcile_credentials.apply_async(args=[str(pk)])


@shared_task(name="clusters.reconcile_credentials", ignore_result=True)
def reconcile_credentials(cluster_id: str) -> None:
    from controlplane.clusters.credential_reconcile import reconcile_credentials as reconcile_cluster_credentials

    cluster = Cluster.objects.filter(pk=cluster_id, deletion_requested_at__isnull=True).first()
    if cluster is None:
        return
    if reconcile_cluster_credentials(cluster).get("pending"):  # brokers not up yet, or the store unreachable
        enqueue_reconcile(cluster.pk, countdown=RETRY_SECONDS)


@shared_task(name="clusters.resync_all", ignore_result=True)
def resync_all() -> int:
    """The periodic pass over every cluster: a lost task or a crashed worker only delays."""
    count = 0
    for pk in Cluster.objects.values_list("pk", flat=True):
        count += enqueue_reconcile(pk, resync=True)
    return count


@shared_task(name="clusters.sample_throughput", ignore_result=True)
def sample_throughput() -> int:
    """Once a minute (beat): a throughput sample of every Ready cluster."""
    from controlplane.clusters.throughput import sample

    written = 0
    for cluster in Cluster.objects.filter(deletion_requested_at__isnull=True):
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in cluster.status.get("conditions", []))
        if not ready:
            continue
        try:
            written += sample(cluster)
        except Exception:  # one unreachable cluster must not stop the others' samples
            log.exception("throughput sample of cluster %s failed", cluster.pk)
    return written
