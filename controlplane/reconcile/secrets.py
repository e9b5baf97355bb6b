"""The secrets step: carry out ``secret_plan`` (the store's internal credentials, the roll of the brokers, the
promotion of a rotated secret).

Each action is idempotent: the credentials are compared with the store before any write, a ``Roll`` re-sends a
spec the agent already has without effect, and ``Promote`` only moves a row still waiting for it.
"""

from __future__ import annotations

import logging

import psycopg
from django.db import transaction
from django.utils import timezone

from controlplane.clusters import internal_secrets, metadata
from controlplane.clusters.internal_secrets import INTERNAL_PRINCIPAL, INTERNAL_USERNAME, InternalSecrets
from controlplane.clusters.models import BrokerNode, Cluster, ClusterSecret
from controlplane.reconcile.context import PassContext
from controlplane.reconcile.node_plan import ClusterView
from controlplane.reconcile.nodes import send_ensure
from controlplane.reconcile.results import SecretsResult
from controlplane.reconcile.secret_plan import (
    NodeSecrets,
    Promote,
    Roll,
    SecretsView,
    plan_internal_credentials,
    plan_secrets,
)

log = logging.getLogger(__name__)


def sync_internal_credentials(cluster: Cluster, versions: list[InternalSecrets]) -> bool:
    """Make the store hold exactly these versions' credentials; whether it does (False: no store yet, or failed)."""
    desired = {v.username: (v.password, None if v.username == INTERNAL_USERNAME else INTERNAL_PRINCIPAL)
               for v in versions}
    try:
        with metadata.security(cluster.kafka_cluster_id) as security:
            if security is None:
                return False
            plan = plan_internal_credentials(desired, security.credentials(),
                                             internal=internal_secrets.is_internal_username)
            if plan:
                security.apply_credentials(scram=plan.scram, delete_plain=plan.delete_plain,
                                           delete_scram=plan.delete_scram)
                log.info("cluster %s: internal credentials %s written, %s deleted", cluster.kafka_cluster_id,
                         [s[0] for s in plan.scram], sorted({d[0] for d in plan.delete_scram}))
    except psycopg.Error as exc:
        log.warning("cluster %s: internal credential sync failed: %s", cluster.kafka_cluster_id, exc)
        return False
    return True


def _promote(cluster: Cluster, version: int) -> bool:
    with transaction.atomic():
        row = ClusterSecret.objects.select_for_update().get(cluster_id=cluster.pk)
        if row.next_version != version:
            return False
        row.version, row.internal_password, row.token_key = version, row.next_internal_password, row.next_token_key
        row.next_internal_password = row.next_token_key = ""
        row.rotated_at = timezone.now()
        row.save()
    log.info("cluster %s: every broker runs secrets version %d; the control plane uses it now",
             cluster.kafka_cluster_id, version)
    return True


def run(ctx: PassContext, *, in_sync: bool) -> SecretsResult:
    """``in_sync``: no partition under-replicated, so a broker may be rolled."""
    assert ctx.view is not None, "the secrets step runs after the nodes step"
    return reconcile_secrets(ctx.cluster, ctx.view, ctx.nodes, in_sync=in_sync)


def reconcile_secrets(cluster: Cluster, view: ClusterView, nodes: list[BrokerNode], *,
                      in_sync: bool) -> SecretsResult:
    current = internal_secrets.current(cluster)
    target = internal_secrets.pending(cluster)
    versions = [current, *([target] if target else [])]
    if not sync_internal_credentials(cluster, versions):
        return SecretsResult(version=current.version, rotating=target is not None, pending=1)
    registered = {n.node_id: n.registered for n in view.nodes}
    secrets_view = SecretsView(current.version, target.version if target else None, tuple(
        NodeSecrets(n.node_id, n.secrets_version, n.process.get("secrets_version"), registered.get(n.node_id, False),
                    n.removal_requested_at is not None) for n in nodes), in_sync)
    by_id = {n.node_id: n for n in nodes}
    promoted = False
    for action in plan_secrets(secrets_view):
        if isinstance(action, Roll):
            node = by_id[action.node_id]
            if node.secrets_version != action.version:
                log.info("cluster %s: broker %d moves to secrets version %d", cluster.kafka_cluster_id,
                         node.node_id, action.version)
                BrokerNode.objects.filter(pk=node.pk).update(secrets_version=action.version)
                node.secrets_version = action.version
            send_ensure(cluster, node)
        elif isinstance(action, Promote):
            promoted = _promote(cluster, action.version)
    if promoted:  # the old credential goes now: whatever still logs in with it is closed
        current, target = internal_secrets.current(cluster), None
        sync_internal_credentials(cluster, [current])
    rotating = target is not None
    waiting = any(n.secrets_version != current.version or n.process.get("secrets_version") != current.version
                  for n in nodes if n.removal_requested_at is None)
    return SecretsResult(version=current.version, rotating=rotating, pending=int(rotating or waiting))
