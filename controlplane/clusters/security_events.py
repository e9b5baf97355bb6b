"""Brokers' security failures into the tenant's audit trail.

Brokers count SASL failures and ACL denials per (principal, what, host) and write the counts to their
metadata store every few seconds (``dataplane.security.events``, bounded per broker and interval). A beat
task takes them from there (DELETE ... RETURNING, so two workers never ingest a row twice) and records
each as a rate-limited security event of the cluster's tenant, with its count. Why the metadata store and
not the agents' reports: it is already every broker's shared, durable channel to the control plane, works
for brokers on any host, and survives a control plane that is down for a while (counts wait there).

Successful SCRAM/PLAIN logins come the same way (kind ``sasl_ok``, one per key id per broker and flush) and move
the API key's ``last_used_at`` (coalesced, ``tenancy.key_usage``) instead of the audit trail.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime

from controlplane.audit.security import KAFKA_AUTH_FAILED, KAFKA_DENIED, security_event_record
from controlplane.clusters.metadata import take_security_events
from controlplane.clusters.models import Cluster
from controlplane.tenancy.key_usage import api_keys_used
from dataplane.security.events import SASL_FAILED, SASL_OK, SecurityEvent

log = logging.getLogger(__name__)

BATCH = 5000


def security_events_ingest(*, cluster: Cluster) -> int:
    """Move what the cluster's brokers reported into the audit trail; the number of reports taken."""
    events = take_security_events(cluster.kafka_cluster_id, BATCH)
    security_events_audit(cluster=cluster, events=[e for e in events if e.kind != SASL_OK])
    logins: dict[str, datetime] = {}
    for event in events:
        if event.kind == SASL_OK:
            at = datetime.fromtimestamp(event.last_at, UTC)
            logins[event.detail] = max(at, logins.get(event.detail, at))
    if logins:
        api_keys_used(tenant_id=cluster.tenant_id, used=logins)
    return len(events)


def security_events_audit(*, cluster: Cluster, events: Sequence[SecurityEvent]) -> None:
    """Record brokers' reports as the cluster's tenant's security events (rate-limited, with their counts)."""
    for event in events:
        failed_login = event.kind == SASL_FAILED
        resource = event.detail.split(" ", 2)
        security_event_record(
            tenant_id=cluster.tenant_id, action=KAFKA_AUTH_FAILED if failed_login else KAFKA_DENIED,
            subject=event.principal, subject_type="principal",
            target_type="cluster" if failed_login or len(resource) < 3 else resource[1].lower(),
            target_id=cluster.kafka_cluster_id if failed_login or len(resource) < 3
            else f"{cluster.kafka_cluster_id}/{resource[2]}",
            data={"detail": event.detail, "host": event.host,
                  "first_at": datetime.fromtimestamp(event.first_at, UTC).isoformat(),
                  "last_at": datetime.fromtimestamp(event.last_at, UTC).isoformat()},
            count=event.count)


def security_events_ingest_all() -> int:
    """Every live cluster's reports (beat); one cluster's failure does not stop the others'."""
    taken = 0
    for cluster in Cluster.objects.filter(deletion_requested_at__isnull=True):
        try:
            taken += security_events_ingest(cluster=cluster)
        except Exception:
            log.exception("ingesting security events of cluster %s failed", cluster.pk)
    return taken
