"""Who did something: the identity services record in the audit trail."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, cast

IdentityKind = Literal["user", "service_account"]
_PRINCIPAL_PREFIX: dict[str, str] = {"user": "u", "service_account": "sa"}


def kafka_principal(kind: IdentityKind, ident: object) -> str:
    """The Kafka principal an identity acts as on clusters: ``User:u-<user id>``, ``User:sa-<account id>``.

    The one place that spells it: ACL bindings, OAUTHBEARER tokens, API keys and the audit trail must agree.
    """
    return f"User:{_PRINCIPAL_PREFIX[kind]}-{ident}"


@dataclass(frozen=True, slots=True)
class Actor:
    type: str  # "user" | "service_account" | "system"
    id: str
    display: str

    @property
    def principal(self) -> str | None:
        """The Kafka principal this identity acts as on clusters (None for the system)."""
        if self.type not in _PRINCIPAL_PREFIX:
            return None
        return kafka_principal(cast(IdentityKind, self.type), self.id)


SYSTEM_ACTOR = Actor(type="system", id="system", display="system")
