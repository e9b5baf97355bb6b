"""Telling every web process that credentials stopped working, so their open connections end at once.

A key revoked, a member removed or a service account deleted ends REST and Kafka access by itself (the
caller caches are short; the credential reconcile closes Kafka connections), but a WebSocket tail or a v2
consumer instance opened with those credentials is checked only when it is opened. Each service that
ends credentials publishes a :class:`Revocation` on the Redis channel :data:`CHANNEL` once its transaction
commits; every web process that holds such connections listens (``controlplane.kafkarest.revocation``) and
ends the ones it matches. Redis pub/sub is fire-and-forget, so a process that was not listening at that
moment finds the connections with :func:`credentials_revoked` on its periodic sweep.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import redis
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q

from controlplane.tenancy.models import ApiKey, Membership

log = logging.getLogger(__name__)

CHANNEL = "sluice:revocations"


@dataclass(frozen=True, slots=True)
class Credential:
    """What a long-lived connection was opened with: an API key (by key id), or a console session's user,
    reaching a cluster of ``tenant_id``."""

    tenant_id: int
    api_key_id: str | None = None
    user_id: int | None = None  # for a session (api_key_id None): the signed-in user


@dataclass(frozen=True, slots=True)
class Revocation:
    """Credentials that stopped working: keys (by key id), and with ``user_id`` a user's sessions in a tenant
    (the user was removed from it)."""

    tenant_id: int
    key_ids: tuple[str, ...] = ()
    user_id: int | None = None

    def matches(self, credential: Credential) -> bool:
        if credential.api_key_id is not None:
            return credential.api_key_id in self.key_ids
        return (self.user_id is not None and credential.user_id == self.user_id
                and credential.tenant_id == self.tenant_id)

    @property
    def reason(self) -> str:
        """What a client whose connection ends is told."""
        if self.user_id is not None:
            return "The user was removed from the tenant: the connection's credentials no longer work."
        return "The API key this connection was opened with was revoked."

    def to_json(self) -> str:
        return json.dumps({"tenant_id": self.tenant_id, "key_ids": list(self.key_ids), "user_id": self.user_id})

    @classmethod
    def from_json(cls, text: str | bytes) -> Revocation:
        """Parse a published message; ValueError if it is not one."""
        data: Any = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("a revocation is a JSON object")
        tenant_id, key_ids, user_id = data.get("tenant_id"), data.get("key_ids", []), data.get("user_id")
        if not isinstance(tenant_id, int) or not isinstance(key_ids, list) \
                or not all(isinstance(k, str) for k in key_ids) or not (user_id is None or isinstance(user_id, int)):
            raise ValueError(f"not a revocation: {data!r}")
        return cls(tenant_id, tuple(key_ids), user_id)


def publish(revocation: Revocation) -> None:
    """Publish now; a failure is logged, not raised (the listeners' sweep finds what a lost message missed)."""
    try:
        client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5, socket_connect_timeout=5)
        try:
            client.publish(CHANNEL, revocation.to_json())
        finally:
            client.close()
    except redis.RedisError:
        log.exception("could not publish %s; open connections end at the next sweep", revocation)


def publish_on_commit(revocation: Revocation) -> None:
    """Publish once the current transaction commits (nothing is said about a change that was rolled back)."""
    if revocation.key_ids or revocation.user_id is not None:
        transaction.on_commit(lambda: publish(revocation))


def credentials_revoked(credentials: Iterable[Credential]) -> set[Credential]:
    """Those of ``credentials`` that no longer work: a key revoked, deleted (its service account was) or whose
    user left the key's tenant; a session whose user is no longer a member of the tenant. Two queries."""
    wanted = set(credentials)
    key_ids = {c.api_key_id for c in wanted if c.api_key_id is not None}
    sessions = {(c.user_id, c.tenant_id) for c in wanted if c.api_key_id is None}
    valid_keys: set[str] = set()
    if key_ids:
        valid_keys = set(ApiKey.objects.filter(key_id__in=key_ids, revoked_at__isnull=True).filter(
            Q(owner_service_account__isnull=False) | Q(owner_user__memberships__tenant=F("tenant")),
        ).values_list("key_id", flat=True))
    members: set[tuple[int | None, int]] = set()
    if sessions:
        members = set(Membership.objects.filter(user_id__in={u for u, _ in sessions},
                                                tenant_id__in={t for _, t in sessions})
                      .values_list("user_id", "tenant_id"))
    return {c for c in wanted
            if (c.api_key_id is not None and c.api_key_id not in valid_keys)
            or (c.api_key_id is None and (c.user_id, c.tenant_id) not in members)}
