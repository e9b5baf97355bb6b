"""The pure credential plan: what to write and delete so a cluster's store holds exactly the usable keys."""

from __future__ import annotations

from controlplane.reconcile.credential_plan import CredentialPlan, DesiredCredential, plan_credentials
from controlplane.tenancy.keys import KEY_ID_RE
from dataplane.security.sasl import Credentials, plain_hash
from dataplane.security.scram import derive

KEY_A, KEY_B = "AAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBB"
S256 = derive("SCRAM-SHA-256", "secret-a", salt=b"s" * 32)
S512 = derive("SCRAM-SHA-512", "secret-a", salt=b"s" * 32)


def managed(name: str) -> bool:
    return KEY_ID_RE.match(name) is not None


def key_a(principal: str = "User:sa-1", scram: bool = True) -> DesiredCredential:
    return DesiredCredential(KEY_A, principal, plain_hash("secret-a"),
                             {"SCRAM-SHA-256": S256, "SCRAM-SHA-512": S512} if scram else {})


def store_with(*desired: DesiredCredential, extra: Credentials | None = None) -> Credentials:
    """What the store holds after applying ``desired`` (and whatever ``extra`` already had)."""
    extra = extra or Credentials()
    plain = {**extra.plain, **{d.username: d.plain_sha256 for d in desired}}
    scram = {**extra.scram, **{(d.username, m): c for d in desired for m, c in d.scram.items()}}
    principals = {**extra.principals, **{(d.username, m): d.principal for d in desired
                                         for m in ("PLAIN", *d.scram)}}
    return Credentials(plain, scram, principals)


def test_a_new_key_is_written_with_every_mechanism_and_its_owner() -> None:
    plan = plan_credentials([key_a()], Credentials(), managed=managed)
    assert plan.plain == ((KEY_A, plain_hash("secret-a"), "User:sa-1"),)
    assert plan.scram == ((KEY_A, "SCRAM-SHA-256", S256, "User:sa-1"), (KEY_A, "SCRAM-SHA-512", S512, "User:sa-1"))
    assert not plan.delete_plain and not plan.delete_scram


def test_nothing_to_do_once_applied() -> None:
    assert not plan_credentials([key_a()], store_with(key_a()), managed=managed)
    assert plan_credentials([key_a()], store_with(key_a()), managed=managed) == CredentialPlan()


def test_a_key_made_before_scram_existed_gets_plain_only() -> None:
    plan = plan_credentials([key_a(scram=False)], Credentials(), managed=managed)
    assert plan.plain and not plan.scram


def test_a_revoked_key_is_deleted_everywhere() -> None:
    plan = plan_credentials([], store_with(key_a()), managed=managed)
    assert plan.delete_plain == (KEY_A,)
    assert plan.delete_scram == ((KEY_A, "SCRAM-SHA-256"), (KEY_A, "SCRAM-SHA-512"))
    assert not plan.plain and not plan.scram


def test_a_changed_principal_or_credential_is_rewritten() -> None:
    moved = plan_credentials([key_a("User:u-7")], store_with(key_a()), managed=managed)
    assert {p[2] for p in moved.plain} == {"User:u-7"} and {s[3] for s in moved.scram} == {"User:u-7"}
    tampered = Credentials({KEY_A: plain_hash("other")}, store_with(key_a()).scram, store_with(key_a()).principals)
    assert plan_credentials([key_a()], tampered, managed=managed).plain == (
        (KEY_A, plain_hash("secret-a"), "User:sa-1"),)


def test_a_mechanism_the_key_lacks_is_deleted() -> None:
    observed = store_with(key_a())
    plan = plan_credentials([key_a(scram=False)], observed, managed=managed)
    assert plan.delete_scram == ((KEY_A, "SCRAM-SHA-256"), (KEY_A, "SCRAM-SHA-512")) and not plan.delete_plain


def test_usernames_that_are_not_key_ids_are_left_alone() -> None:
    brokers = Credentials({"__sluice": plain_hash("x")}, {("__sluice", "SCRAM-SHA-512"): S512,
                                                          ("carol", "SCRAM-SHA-256"): S256})
    plan = plan_credentials([], store_with(extra=brokers), managed=managed)
    assert plan == CredentialPlan()
    other_tenant = store_with(DesiredCredential(KEY_B, "User:sa-2", plain_hash("b")), extra=brokers)
    assert plan_credentials([key_a()], other_tenant, managed=managed).delete_plain == (KEY_B,)
