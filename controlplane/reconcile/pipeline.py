"""Reconcile one managed cluster: run the steps in order, then write its status.

The one walk from a spec change to a Ready cluster: the ``clusters.reconcile`` task (``reconcile.tasks``) calls
:func:`reconcile_cluster`, which runs, under the cluster's advisory lock,

1. ``nodes``: place, start, retire and remove brokers (``node_plan``);
2. once every broker has registered, with one admin client and one topic snapshot (``PassContext``):
   ``credentials`` (API keys into the metadata store), the plan's partition limit, ``topics``, ``acls``,
   ``quotas``, ``secrets`` (internal-credential rotation and broker rolls) and, when nothing else is pending,
   ``rebalance``;
3. ``status.cluster_status`` from the typed results, written with a queryset update so a concurrent spec
   change is never overwritten.

Every step is idempotent, so a worker killed at any point leaves work the next pass finishes; a step the cluster
refuses reports it in its result (and the passes keep coming) rather than stopping the others.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.db import connection

from controlplane.clusters import metadata
from controlplane.clusters.models import Cluster
from controlplane.reconcile import acls, credentials, nodes, quotas, rebalance, secrets, topics
from controlplane.reconcile.context import PassContext, bootstrap_of
from controlplane.reconcile.results import PassResults
from controlplane.reconcile.status import cluster_status

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Outcome:
    done: bool  # nothing left to do until the spec or the world changes
    busy: bool = False  # another worker holds the cluster's lock


@contextmanager
def cluster_lock(cluster_id: uuid.UUID) -> Iterator[bool]:
    """A session-level advisory lock on the cluster; yields whether this worker got it."""
    key = int.from_bytes(cluster_id.bytes[:8], "big", signed=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        got = bool(cursor.fetchone()[0])
    try:
        yield got
    finally:
        if got:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [key])


def _resource_steps(ctx: PassContext, results: PassResults) -> PassResults:
    """Step 2: the cluster's resources, once its brokers serve."""
    cluster = ctx.cluster
    done_credentials = credentials.run(ctx)
    # Before the topics: the brokers hold Kafka-protocol creates to the plan's limit too.
    if metadata.set_partition_limit(cluster.kafka_cluster_id, cluster.max_partitions):
        log.info("cluster %s: partition limit set to %d", cluster.name, cluster.max_partitions)
    done_topics = topics.run(ctx)
    done_acls = acls.run(ctx)
    done_quotas = quotas.run(ctx)
    done_secrets = secrets.run(ctx, in_sync=not done_topics.under_replicated)
    pending = done_credentials.pending + done_topics.pending + done_acls.pending + done_quotas.pending
    done_rebalance = rebalance.run(ctx) if not pending else None
    return PassResults(results.nodes, credentials=done_credentials, topics=done_topics, acls=done_acls,
                       quotas=done_quotas, secrets=done_secrets, rebalance=done_rebalance)


def _done(results: PassResults) -> bool:
    """Nothing left to do: under-replicated partitions keep the passes coming until they are back in sync."""
    return (results.nodes.brokers_ready and not results.nodes.view.deleting and not results.pending
            and not (results.topics and results.topics.under_replicated)
            and not (results.rebalance and results.rebalance.in_progress)
            and not (results.secrets and results.secrets.pending))


def reconcile_cluster(cluster_id: uuid.UUID, *, resync: bool = False) -> Outcome:
    with cluster_lock(cluster_id) as got:
        if not got:
            return Outcome(done=False, busy=True)
        cluster = Cluster.objects.filter(pk=cluster_id).select_related("tenant").first()
        if cluster is None:
            return Outcome(done=True)
        generation = cluster.generation
        done_nodes, brokers = nodes.run(cluster, resync=resync)
        if done_nodes.finalized:
            return Outcome(done=True)
        results = PassResults(done_nodes)
        if done_nodes.brokers_ready:
            with PassContext(cluster, bootstrap_of(brokers), resync=resync, view=done_nodes.view,
                             nodes=brokers) as ctx:
                results = _resource_steps(ctx, results)
        done = _done(results)
        observed = generation if done else cluster.status.get("observed_generation", 0)
        status = cluster_status(cluster, results, brokers, observed_generation=observed)
        Cluster.objects.filter(pk=cluster.pk).update(status=status)
        return Outcome(done=done)
