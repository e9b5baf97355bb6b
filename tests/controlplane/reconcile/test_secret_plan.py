"""The roll onto new internal secrets, decided as a table (``clusters.secret_plan``)."""

from __future__ import annotations

import pytest

from controlplane.clusters.internal_secrets import is_internal_username
from controlplane.reconcile.secret_plan import (
    INTERNAL_MECHANISM,
    NodeSecrets,
    Promote,
    Roll,
    SecretAction,
    SecretsView,
    plan_internal_credentials,
    plan_secrets,
)
from dataplane.security import scram
from dataplane.security.sasl import Credentials


def _n(node_id: int, assigned: int, running: int | None, registered: bool = True,
       retiring: bool = False) -> NodeSecrets:
    return NodeSecrets(node_id, assigned, running, registered, retiring)


CASES: list[tuple[str, SecretsView, list[SecretAction]]] = [
    ("no rotation, all current: nothing",
     SecretsView(1, None, (_n(1, 1, 1), _n(2, 1, 1)), True), []),
    ("rotation requested: the lowest node first, one only",
     SecretsView(1, 2, (_n(2, 1, 1), _n(1, 1, 1), _n(3, 1, 1)), True), [Roll(1, 2)]),
    ("a node restarting onto the new version: re-sent, nothing else",
     SecretsView(1, 2, (_n(1, 2, 1), _n(2, 1, 1)), True), [Roll(1, 2)]),
    ("the new process runs but has not registered: wait for it",
     SecretsView(1, 2, (_n(1, 2, 2, registered=False), _n(2, 1, 1)), True), [Roll(1, 2)]),
    ("rolled, but partitions are under-replicated: wait",
     SecretsView(1, 2, (_n(1, 2, 2), _n(2, 1, 1)), False), []),
    ("rolled and in sync: the next node",
     SecretsView(1, 2, (_n(1, 2, 2), _n(2, 1, 1)), True), [Roll(2, 2)]),
    ("a broker down: no restart of another",
     SecretsView(1, 2, (_n(1, 2, 2), _n(2, 1, 1, registered=False)), True), []),
    ("every broker runs it: promote",
     SecretsView(1, 2, (_n(1, 2, 2), _n(2, 2, 2)), True), [Promote(2)]),
    ("a retiring broker is not rolled",
     SecretsView(1, 2, (_n(1, 2, 2), _n(2, 1, 1, retiring=True)), True), [Promote(2)]),
    ("no rotation, a node placed at an older version: rolled to the current one",
     SecretsView(3, None, (_n(1, 3, 3), _n(2, 2, 2)), True), [Roll(2, 3)]),
    ("an adopted node whose version is not reported yet: re-sent",
     SecretsView(1, None, (_n(1, 1, None),), True), [Roll(1, 1)]),
]


@pytest.mark.parametrize(("view", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_plan_secrets(view: SecretsView, expected: list[SecretAction]) -> None:
    assert plan_secrets(view) == expected


def _stored(password: str, principal: str | None = None, name: str = "__sluice") -> Credentials:
    credential = scram.derive(INTERNAL_MECHANISM, password)
    return Credentials(scram={(name, INTERNAL_MECHANISM): credential},
                       principals={(name, INTERNAL_MECHANISM): principal} if principal else {})


def test_internal_credentials_left_alone_when_they_verify() -> None:
    """Brokers write their own (own salt): a credential that verifies the password is not rewritten."""
    assert not plan_internal_credentials({"__sluice": ("old", None)}, _stored("old"), internal=is_internal_username)


def test_internal_credentials_during_and_after_a_roll() -> None:
    observed = _stored("old")
    during = plan_internal_credentials({"__sluice": ("old", None), "__sluice-2": ("new", "User:__sluice")},
                                       observed, internal=is_internal_username)
    assert [(w[0], w[3]) for w in during.scram] == [("__sluice-2", "User:__sluice")]
    assert scram.derive(INTERNAL_MECHANISM, "new", during.scram[0][2].iterations, during.scram[0][2].salt) == \
        during.scram[0][2]
    assert not during.delete_scram
    both = Credentials(scram={**observed.scram, ("__sluice-2", INTERNAL_MECHANISM): during.scram[0][2],
                              ("k-APIKEY", "SCRAM-SHA-256"): scram.derive("SCRAM-SHA-256", "x")},
                       principals={("__sluice-2", INTERNAL_MECHANISM): "User:__sluice"})
    after = plan_internal_credentials({"__sluice-2": ("new", "User:__sluice")}, both, internal=is_internal_username)
    assert not after.scram and after.delete_scram == (("__sluice", INTERNAL_MECHANISM),)  # API keys untouched


def test_a_wrong_password_or_principal_is_rewritten() -> None:
    assert plan_internal_credentials({"__sluice": ("new", None)}, _stored("old"), internal=is_internal_username)
    wrong_principal = _stored("new", name="__sluice-2")  # a broker wrote it: User:__sluice-2, not the super user
    fixed = plan_internal_credentials({"__sluice-2": ("new", "User:__sluice")}, wrong_principal,
                                      internal=is_internal_username)
    assert [(w[0], w[3]) for w in fixed.scram] == [("__sluice-2", "User:__sluice")]
