"""The credentials step: a cluster's SASL credentials are its tenant's API keys, written to the metadata store.

Why the store and not Kafka's AlterUserScramCredentials: KIP-554 sends the *salted password*, which is
password-equivalent for SCRAM (it yields the ClientKey, so whoever holds it can log in), and Kafka has
no API at all for PLAIN credentials. The control plane already reaches each cluster's metadata store
(``clusters.metadata``), where brokers read credentials from: it writes there the key's SHA-256 hash
(PLAIN) and its StoredKey/ServerKey (SCRAM), neither of which lets anyone authenticate, in one
transaction that NOTIFYs the brokers. Brokers re-read and close the connections of credentials that
went (see ``dataplane.server.broker.Broker._close_revoked``).

Desired: the tenant's keys that are not revoked, whose owner still exists (and, for a user, is still a
member), and which are not scoped to another cluster; each authenticates as its owner's principal.
Run by every cluster reconcile pass (new clusters get every key) and, at once, by the
``clusters.reconcile_credentials`` task on key create / revoke, membership removal and service account
deletion. A per-cluster advisory lock (waited for, not tried) orders two passes, so the last one to run
reads the latest keys: a pass that read a key before it was revoked can never write it back after.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from django.db import connection
from django.db.models import Q

from controlplane.clusters import metadata
from controlplane.clusters.models import Cluster
from controlplane.reconcile.context import PassContext
from controlplane.reconcile.credential_plan import DesiredCredential, plan_credentials
from controlplane.reconcile.results import CredentialsResult
from controlplane.tenancy.kafka_credentials import scram_credentials
from controlplane.tenancy.keys import KEY_ID_RE
from controlplane.tenancy.models import ApiKey, Membership

log = logging.getLogger(__name__)


def desired_credentials(cluster: Cluster) -> list[DesiredCredential]:
    members = set(Membership.objects.filter(tenant_id=cluster.tenant_id).values_list("user_id", flat=True))
    keys = ApiKey.objects.filter(tenant_id=cluster.tenant_id, revoked_at__isnull=True).filter(
        Q(cluster__isnull=True) | Q(cluster_id=cluster.pk))
    return [DesiredCredential(key.key_id, key.principal, key.secret_hash, scram_credentials(key.scram_credentials))
            for key in keys if key.owner_user_id is None or key.owner_user_id in members]


def _managed(username: str) -> bool:
    return KEY_ID_RE.match(username) is not None


@contextmanager
def _credentials_lock(cluster_id: uuid.UUID) -> Iterator[None]:
    # Not the reconcile lock (that one is tried, and held through slow admin calls): the second half of the id.
    key = int.from_bytes(cluster_id.bytes[8:], "big", signed=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [key])
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [key])


def run(ctx: PassContext) -> CredentialsResult:
    return reconcile_credentials(ctx.cluster)


def reconcile_credentials(cluster: Cluster) -> CredentialsResult:
    """Write the cluster's credentials now (also outside a pass: a key made or revoked is at once)."""
    with _credentials_lock(cluster.pk):
        desired = desired_credentials(cluster)
        try:
            with metadata.security(cluster.kafka_cluster_id) as security:
                if security is None:  # no broker has started yet: the pass after they register writes them
                    return CredentialsResult(keys=len(desired), pending=len(desired))
                plan = plan_credentials(desired, security.credentials(), managed=_managed)
                if plan:
                    security.apply_credentials(plain=plan.plain, scram=plan.scram, delete_plain=plan.delete_plain,
                                               delete_scram=plan.delete_scram)
                    log.info("cluster %s: %d credential(s) written, %d deleted", cluster.kafka_cluster_id,
                             len(plan.plain) + len(plan.scram), len(plan.delete_plain) + len(plan.delete_scram))
        except psycopg.Error as exc:
            log.warning("cluster %s: credential reconcile failed: %s", cluster.kafka_cluster_id, exc)
            return CredentialsResult(keys=len(desired), pending=1, errors=(f"credentials: {exc}",))
    return CredentialsResult(keys=len(desired))
