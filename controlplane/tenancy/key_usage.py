"""An API key's ``last_used_at`` from uses the control plane does not see itself: Kafka logins at brokers.

Coalesced like the management API's touch (``authentication._touch_last_used``): a key's row is written only
when its recorded use is older than ``API_KEY_LAST_USED_RESOLUTION_SECONDS``, so a key that logs in all the
time costs at most one UPDATE per key per window, whatever the login rate.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q

from controlplane.tenancy.models import ApiKey


def api_keys_used(*, tenant_id: int, used: Mapping[str, datetime]) -> int:
    """Record that the tenant's keys (by key id) were used at the given times; the number of rows written.

    Only the tenant's own keys move: a cluster reports usernames, and a cluster is one tenant's."""
    window = timedelta(seconds=settings.API_KEY_LAST_USED_RESOLUTION_SECONDS)
    written = 0
    for key_id, at in used.items():
        written += ApiKey.objects.filter(
            Q(last_used_at__isnull=True) | Q(last_used_at__lte=at - window),
            tenant_id=tenant_id, key_id=key_id).update(last_used_at=at)
    return written
