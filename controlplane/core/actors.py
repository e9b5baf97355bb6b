"""Who did something: the identity services record in the audit trail."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Actor:
    type: str  # "user" | "service_account" | "system"
    id: str
    display: str

    @property
    def principal(self) -> str | None:
        """The Kafka principal this identity acts as on clusters (None for the system)."""
        if self.type == "user":
            return f"User:u-{self.id}"
        if self.type == "service_account":
            return f"User:sa-{self.id}"
        return None


SYSTEM_ACTOR = Actor(type="system", id="system", display="system")
