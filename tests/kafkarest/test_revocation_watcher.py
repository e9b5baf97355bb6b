"""The revocation message, its publication by the tenancy services (real Redis), and a process's watcher: holds
ended by a message, by a revocation of a moment ago, and by the database sweep (real Postgres)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
import redis
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from controlplane.core.actors import SYSTEM_ACTOR
from controlplane.kafkarest.revocation import SWEPT_REASON, Watcher
from controlplane.tenancy import services
from controlplane.tenancy.models import ApiKey, Membership, Role
from controlplane.tenancy.revocation import CHANNEL, Credential, Revocation, credentials_revoked
from tests.controlplane.conftest import make_world

DEADLINE = 30.0


def test_a_revocation_matches_its_keys_and_a_removed_members_sessions_in_that_tenant() -> None:
    removed = Revocation(tenant_id=1, key_ids=("k1", "k2"), user_id=7)
    assert removed.matches(Credential(1, "k2", 7))
    assert removed.matches(Credential(9, "k1"))  # a key id is unique across tenants
    assert not removed.matches(Credential(1, "k3", 7))  # another key of the user: not revoked by this
    assert removed.matches(Credential(1, None, 7))  # their console session in the tenant
    assert not removed.matches(Credential(2, None, 7))  # ... not in a tenant they still belong to
    assert not removed.matches(Credential(1, None, 8))
    assert not Revocation(1, ("k1",)).matches(Credential(1, None, 7))
    assert "removed" in removed.reason and "revoked" in Revocation(1, ("k1",)).reason


def test_messages_round_trip_and_malformed_ones_are_refused() -> None:
    revocation = Revocation(3, ("a", "b"), 4)
    assert Revocation.from_json(revocation.to_json()) == revocation
    for bad in ("[]", "{}", '{"tenant_id": "1"}', '{"tenant_id": 1, "key_ids": [1]}',
                '{"tenant_id": 1, "user_id": "x"}', "not json"):
        with pytest.raises(ValueError):
            Revocation.from_json(bad)


@pytest.fixture
def channel() -> Iterator[redis.client.PubSub]:
    client = redis.Redis.from_url(settings.REDIS_URL)
    pubsub = client.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
    pubsub.subscribe(CHANNEL)
    try:
        yield pubsub
    finally:
        pubsub.close()
        client.close()


def published(pubsub: redis.client.PubSub, tenant_id: int) -> Revocation:
    """The next revocation published for ``tenant_id`` (other tests may publish for their tenants meanwhile)."""
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        message = pubsub.get_message(timeout=1.0)
        if message is not None:
            revocation = Revocation.from_json(message["data"])
            if revocation.tenant_id == tenant_id:
                return revocation
    raise AssertionError("nothing was published")


@pytest.mark.django_db(transaction=True)
def test_ending_credentials_publishes_once_committed(channel: redis.client.PubSub) -> None:
    world = make_world(f"r{uuid.uuid4().hex[:6]}")
    tenant = world.tenant
    member_key, _ = world.keys[Role.MEMBER]

    with pytest.raises(RuntimeError), transaction.atomic():  # rolled back: nothing is said
        services.api_key_revoke(api_key=member_key, actor=SYSTEM_ACTOR)
        raise RuntimeError
    member_key.refresh_from_db()
    services.api_key_revoke(api_key=member_key, actor=SYSTEM_ACTOR)
    assert published(channel, tenant.pk) == Revocation(tenant.pk, (member_key.key_id,))

    viewer = world.users[Role.VIEWER]
    viewer_key, _ = world.keys[Role.VIEWER]
    second = services.api_key_create(tenant=tenant, actor=SYSTEM_ACTOR, owner_user=viewer).api_key
    services.membership_remove(membership=Membership.objects.get(tenant=tenant, user=viewer), actor=SYSTEM_ACTOR)
    removal = published(channel, tenant.pk)
    assert (set(removal.key_ids), removal.user_id) == ({viewer_key.key_id, second.key_id}, viewer.pk)

    account = world.service_account
    keys = {services.api_key_create(tenant=tenant, actor=SYSTEM_ACTOR,
                                    owner_service_account=account).api_key.key_id for _ in range(2)}
    services.service_account_delete(account=account, actor=SYSTEM_ACTOR)
    deleted = published(channel, tenant.pk)
    assert (set(deleted.key_ids), deleted.user_id) == (keys, None)


@pytest.mark.django_db(transaction=True)
def test_the_watcher_ends_what_a_revocation_or_the_sweep_says() -> None:
    world = make_world(f"w{uuid.uuid4().hex[:6]}")
    tenant = world.tenant
    watcher = Watcher(listen=False)
    ended: dict[str, str] = {}

    def hold(name: str, credential: Credential) -> None:
        watcher.hold(credential, lambda reason: ended.setdefault(name, reason))

    key = {role: world.keys[role][0].key_id for role in Role.values}
    hold("member key", Credential(tenant.pk, key[Role.MEMBER], world.users[Role.MEMBER].pk))
    hold("owner key", Credential(tenant.pk, key[Role.OWNER], world.users[Role.OWNER].pk))
    hold("viewer session", Credential(tenant.pk, None, world.users[Role.VIEWER].pk))
    hold("admin session", Credential(tenant.pk, None, world.users[Role.ADMIN].pk))
    account_key = services.api_key_create(tenant=tenant, actor=SYSTEM_ACTOR,
                                          owner_service_account=world.service_account).api_key.key_id
    hold("account key", Credential(tenant.pk, account_key))
    released = watcher.hold(Credential(tenant.pk, key[Role.ADMIN]), lambda reason: ended.setdefault("released", reason))
    released.release()

    assert watcher.sweep() == 0 and ended == {}  # everything still works
    assert watcher.apply(Revocation(tenant.pk, (key[Role.MEMBER], key[Role.ADMIN]))) == 1
    assert list(ended) == ["member key"] and "revoked" in ended["member key"]
    # Admitted with credentials cached just before the revocation: ended as it is held.
    hold("late", Credential(tenant.pk, key[Role.MEMBER]))
    assert "late" in ended

    # Ended behind the services' back (no message): the sweep finds them.
    ApiKey.objects.filter(key_id=key[Role.OWNER]).update(revoked_at=timezone.now())
    Membership.objects.filter(tenant=tenant, user=world.users[Role.VIEWER]).delete()
    world.service_account.delete()  # its keys go with it
    assert credentials_revoked([Credential(tenant.pk, None, world.users[Role.ADMIN].pk)]) == set()
    assert watcher.sweep() == 3
    assert ended["owner key"] == ended["viewer session"] == ended["account key"] == SWEPT_REASON
    assert "admin session" not in ended and "released" not in ended
    assert watcher.held() == 1  # the admin's session
