"""What tenancy announces to the layers above it, which react without tenancy importing them.

``kafka_access_changed`` is sent once a transaction that changed who may log in to a tenant's clusters commits
(a key made or revoked, a member removed, a service account deleted); ``acls`` is True when the ACLs implied by
roles changed too. ``controlplane.clusters`` receives it and rewrites the clusters' credentials (and reconciles).
"""

from __future__ import annotations

from django.dispatch import Signal

# kwargs: tenant_id (int), cluster_id (uuid.UUID | None: every cluster of the tenant), acls (bool)
kafka_access_changed = Signal()
