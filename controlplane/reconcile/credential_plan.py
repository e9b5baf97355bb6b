"""What to change so a cluster's SASL credentials are its tenant's API keys: a pure function.

The control plane owns every credential whose username is an API key id (the key-id alphabet and length,
``tenancy.keys.KEY_ID_RE``); a desired credential missing or different in the cluster is written, and one
the cluster has that no usable key names (revoked, its owner gone, scoped to another cluster, another
tenant's) is deleted. Other usernames -- the cluster-internal principal the brokers write themselves,
credentials a super user made with AlterUserScramCredentials -- are not the control plane's and are left.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from dataplane.security.sasl import PLAIN, Credentials
from dataplane.security.scram import ScramCredential


@dataclass(frozen=True, slots=True)
class DesiredCredential:
    """One API key as a Kafka login: username = key id, authenticating as its owner's principal."""

    username: str
    principal: str
    plain_sha256: str
    scram: Mapping[str, ScramCredential] = field(default_factory=dict)  # mechanism -> credential


@dataclass(frozen=True, slots=True)
class CredentialPlan:
    plain: tuple[tuple[str, str, str | None], ...] = ()  # (username, sha256 hex, principal) to write
    scram: tuple[tuple[str, str, ScramCredential, str | None], ...] = ()  # (username, mechanism, credential, p.)
    delete_plain: tuple[str, ...] = ()
    delete_scram: tuple[tuple[str, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.plain or self.scram or self.delete_plain or self.delete_scram)


def plan_credentials(desired: Iterable[DesiredCredential], observed: Credentials, *,
                     managed: Callable[[str], bool]) -> CredentialPlan:
    """The writes and deletions that make ``observed`` hold exactly ``desired`` among ``managed`` usernames."""
    wanted = {d.username: d for d in desired}
    plain: list[tuple[str, str, str | None]] = []
    scram: list[tuple[str, str, ScramCredential, str | None]] = []
    for name, d in sorted(wanted.items()):
        if observed.stored(PLAIN, name) != (d.plain_sha256, d.principal):
            plain.append((name, d.plain_sha256, d.principal))
        for mechanism, credential in sorted(d.scram.items()):
            if observed.stored(mechanism, name) != (credential, d.principal):
                scram.append((name, mechanism, credential, d.principal))
    delete_plain = sorted(name for name in observed.plain if managed(name) and name not in wanted)
    delete_scram = sorted((name, mechanism) for name, mechanism in observed.scram
                          if managed(name) and mechanism not in (wanted[name].scram if name in wanted else {}))
    return CredentialPlan(tuple(plain), tuple(scram), tuple(delete_plain), tuple(delete_scram))
