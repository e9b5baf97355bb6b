"""DRF authentication by API key (``Authorization: Bearer <key id>:<secret>``).

HTTP Basic with the same pair is accepted too, as Confluent Cloud's REST APIs
do, so existing REST tooling works unchanged. Secrets never reach a log line.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request

from controlplane.audit.security import API_KEY_AUTH_FAILED, UNKNOWN_SUBJECT, security_event_record
from controlplane.tenancy import keys
from controlplane.tenancy.models import ApiKey, Membership, ServiceAccount

log = logging.getLogger(__name__)

_DUMMY_HASH = keys.hash_secret("timing-equaliser")


class ServiceAccountIdentity:
    """What ``request.user`` is when a service account's key authenticated."""

    is_authenticated = True
    is_anonymous = False
    is_active = True
    is_staff = False
    is_superuser = False
    pk = None
    id = None

    def __init__(self, service_account: ServiceAccount) -> None:
        self.service_account = service_account

    @property
    def username(self) -> str:
        return f"sa:{self.service_account.name}"

    def __str__(self) -> str:
        return self.username


def authenticate_key(key_id: str, secret: str) -> ApiKey:
    """The live key for the pair, or AuthenticationFailed with a clear reason.

    Unknown key ids and wrong secrets get the same answer (and the same work),
    so the response does not reveal which key ids exist. Every refusal is audited
    (rate-limited): to the key's tenant when the key exists, else with no tenant.
    """
    if not keys.KEY_ID_RE.match(key_id) or not keys.SECRET_RE.match(secret):
        raise _refused(None, "malformed", "Malformed API key: expected '<16-character key id>:<secret>'.")
    api_key = (ApiKey.objects.select_related("tenant", "owner_user", "owner_service_account", "cluster")
               .filter(key_id=key_id).first())
    if api_key is None:
        keys.secret_matches(secret, _DUMMY_HASH)
        raise _refused(None, "unknown_key", "Invalid API key or secret.")
    if not keys.secret_matches(secret, api_key.secret_hash):
        log.info("api key %s: wrong secret", key_id)
        raise _refused(api_key, "wrong_secret", "Invalid API key or secret.")
    if api_key.revoked_at is not None:
        raise _refused(api_key, "revoked", "This API key has been revoked.")
    if api_key.owner_user is not None:
        if not api_key.owner_user.is_active:
            raise _refused(api_key, "owner_deactivated", "The owner of this API key is deactivated.")
        if not Membership.objects.filter(tenant=api_key.tenant_id, user=api_key.owner_user_id).exists():
            raise _refused(api_key, "owner_not_member",
                           "The owner of this API key is no longer a member of its tenant.")
    _touch_last_used(api_key)
    return api_key


def _refused(api_key: ApiKey | None, reason: str, message: str) -> exceptions.AuthenticationFailed:
    """Audit a refused key (never its secret) and make the exception to raise."""
    if api_key is None:
        security_event_record(tenant_id=None, action=API_KEY_AUTH_FAILED, subject=UNKNOWN_SUBJECT,
                              subject_type="api_key", data={"reason": reason})
    else:
        security_event_record(tenant_id=api_key.tenant_id, action=API_KEY_AUTH_FAILED, subject=api_key.key_id,
                              subject_type="api_key", target_type="api_key", target_id=api_key.key_id,
                              data={"reason": reason, "principal": api_key.principal})
    return exceptions.AuthenticationFailed(message)


def _touch_last_used(api_key: ApiKey) -> None:
    """Record use at most once per resolution window, so reads stay reads."""
    now = timezone.now()
    window = timedelta(seconds=settings.API_KEY_LAST_USED_RESOLUTION_SECONDS)
    if api_key.last_used_at is None or now - api_key.last_used_at >= window:
        ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        api_key.last_used_at = now


# Successful key lookups by Authorization header, for views that opt in (``cache_key_authentication``): the
# REST Proxy's data paths run many small requests with one key, and the lookup (key, owner, membership) was
# most of their cost. A revoked key stops working there within CACHE_SECONDS; the management API never caches.
CACHE_SECONDS = 2.0
_remembered: dict[bytes, tuple[float, tuple[Any, ApiKey]]] = {}
_remembered_lock = threading.Lock()


_forget_hooks: list[Callable[[], None]] = []


def on_forget(hook: Callable[[], None]) -> None:
    """Have ``hook`` clear another cache of authenticated callers whenever :func:`forget_authenticated` runs
    (the Schema Registry's granted accesses: it cannot import the REST Proxy, which hears revocations)."""
    _forget_hooks.append(hook)


def forget_authenticated() -> None:
    with _remembered_lock:
        _remembered.clear()
    for hook in _forget_hooks:
        hook()


def caller_of_header(header: str) -> tuple[Any, ApiKey]:
    """(the key's owner: a user or a ``ServiceAccountIdentity``, the key) for an ``Authorization`` header holding
    an API key (Bearer or HTTP Basic ``key:secret``); ``AuthenticationFailed`` with a readable message otherwise.
    The one check behind the API, the REST Proxy and the Schema Registry."""
    try:
        parsed = keys.parse_authorization(header)
    except keys.MalformedCredentials as exc:
        raise exceptions.AuthenticationFailed(f"Malformed Authorization header: {exc}") from exc
    if parsed is None:
        raise exceptions.AuthenticationFailed(
            "Unsupported Authorization scheme: use 'Bearer <key id>:<secret>' or HTTP Basic.")
    api_key = authenticate_key(*parsed)
    if api_key.owner_service_account is not None:
        return ServiceAccountIdentity(api_key.owner_service_account), api_key
    return api_key.owner_user, api_key


class ApiKeyAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[Any, ApiKey] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        view = (request.parser_context or {}).get("view")
        if not getattr(view, "cache_key_authentication", False):
            return self._authenticate(header)
        digest = hashlib.sha256(header.encode()).digest()
        now = time.monotonic()
        with _remembered_lock:
            hit = _remembered.get(digest)
        if hit is not None and hit[0] > now:
            return hit[1]
        result = self._authenticate(header)
        with _remembered_lock:
            if len(_remembered) > 4096:
                _remembered.clear()
            _remembered[digest] = (now + CACHE_SECONDS, result)
        return result

    def _authenticate(self, header: str) -> tuple[Any, ApiKey]:
        return caller_of_header(header)

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="sluice"'
