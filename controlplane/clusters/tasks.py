"""Cluster tasks, and the one way to ask for a reconcile pass.

``enqueue_reconcile`` sends the ``clusters.reconcile`` task (``controlplane.reconcile.tasks``) by name: the
layers above (reconcile) are never imported from here. A Redis key (SET NX with an expiry) keeps at most one
pass queued per cluster, however many spec changes, agent reports and resyncs ask; the expiry means a pass lost
with a killed worker only delays the next one.
"""

from __future__ import annotations

import functools
import logging
import uuid

import redis
from celery import current_app, shared_task
from django.conf import settings
from django.db import transaction

from controlplane.clusters.models import Cluster
from controlplane.clusters.security_events import security_events_ingest_all
from controlplane.clusters.throughput import sample

log = logging.getLogger(__name__)

PENDING_TTL_SECONDS = 10
RECONCILE = "clusters.reconcile"  # the reconcile tasks' names (controlplane.reconcile.tasks)
RECONCILE_CREDENTIALS = "clusters.reconcile_credentials"


@functools.cache
def redis_client() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL)


def pending_key(cluster_id: str) -> str:
    return f"sluice:reconcile-pending:{cluster_id}"


def enqueue_reconcile(cluster_id: uuid.UUID | str, *, countdown: float = 0, resync: bool = False,
                      attempt: int = 0) -> bool:
    if not redis_client().set(pending_key(str(cluster_id)), "1", nx=True, ex=PENDING_TTL_SECONDS):
        return False
    current_app.send_task(RECONCILE, args=[str(cluster_id)], kwargs={"resync": resync, "attempt": attempt},
                          countdown=countdown)
    return True


def request_reconcile(cluster: Cluster) -> None:
    """Ask for a reconcile pass once the current transaction commits (the worker must see the change)."""
    cluster_id = cluster.pk
    transaction.on_commit(lambda: enqueue_reconcile(cluster_id))


def enqueue_reconcile_by_kafka_id(kafka_cluster_id: str) -> None:
    for pk in Cluster.objects.filter(kafka_cluster_id=kafka_cluster_id).values_list("pk", flat=True):
        enqueue_reconcile(pk)


def enqueue_credentials(tenant_id: int, *, cluster_id: uuid.UUID | None = None) -> None:
    """Rewrite the credentials of the tenant's clusters (or one) now: a key was made, revoked or lost its owner."""
    clusters = Cluster.objects.filter(tenant_id=tenant_id, deletion_requested_at__isnull=True)
    if cluster_id is not None:
        clusters = clusters.filter(pk=cluster_id)
    for pk in clusters.values_list("pk", flat=True):
        current_app.send_task(RECONCILE_CREDENTIALS, args=[str(pk)])


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


@shared_task(name="clusters.ingest_security_events", ignore_result=True)
def ingest_security_events() -> int:
    """Every 10 s (beat): brokers' SASL failures and ACL denials into the tenants' audit trails."""
    return security_events_ingest_all()
