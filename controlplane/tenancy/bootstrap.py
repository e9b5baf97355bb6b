"""The demo tenant, admin user and API key that `sluice up` ensures exist.

Idempotent: the first run creates them and keeps their credentials in
``var/demo-credentials.json`` (mode 0600, the only place the key's secret
exists); later runs reuse that file and recreate only what has gone missing.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import transaction

from controlplane.core.actors import SYSTEM_ACTOR
from controlplane.tenancy import keys, services
from controlplane.tenancy.models import ApiKey, Membership, Role, Tenant

DEMO_TENANT = "demo"
DEMO_USER = "admin"


@dataclass
class DemoCredentials:
    tenant_slug: str
    username: str
    password: str
    key_id: str
    secret: str
    credentials_path: str = ""


def _write_private(path: Path, payload: dict[str, str]) -> None:
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(payload, fh, indent=2)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


@transaction.atomic
def demo_bootstrap(var_dir: Path) -> DemoCredentials:
    path = var_dir / "demo-credentials.json"
    saved: dict[str, str] = json.loads(path.read_text()) if path.exists() else {}
    user_model = get_user_model()

    user = user_model.objects.filter(username=DEMO_USER).first()
    password = saved.get("password") or os.environ.get("SLUICE_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
    if user is None:
        user = user_model.objects.create_superuser(username=DEMO_USER, email="admin@example.com", password=password)
    elif not saved.get("password"):
        user.set_password(password)
        user.save(update_fields=["password"])

    tenant = Tenant.objects.filter(slug=DEMO_TENANT).first()
    if tenant is None:
        tenant = services.tenant_create(slug=DEMO_TENANT, name="Demo", owner=user, actor=SYSTEM_ACTOR)
    elif not Membership.objects.filter(tenant=tenant, user=user).exists():
        Membership.objects.create(tenant=tenant, user=user, role=Role.OWNER)

    key_id, secret = saved.get("key_id", ""), saved.get("secret", "")
    key = ApiKey.objects.filter(key_id=key_id, tenant=tenant, revoked_at__isnull=True).first() if key_id else None
    if key is None or not keys.secret_matches(secret, key.secret_hash):
        issued = services.api_key_create(tenant=tenant, actor=SYSTEM_ACTOR, owner_user=user,
                                         description="demo key created by `sluice up`")
        key_id, secret = issued.api_key.key_id, issued.secret

    creds = DemoCredentials(DEMO_TENANT, DEMO_USER, password, key_id, secret)
    payload = {k: v for k, v in asdict(creds).items() if k != "credentials_path"}
    if payload != saved:
        _write_private(path, payload)
    creds.credentials_path = str(path)
    return creds
