"""Who did something: the identity services record in the audit trail."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Actor:
    type: str  # "user" | "service_account" | "system"
    id: str
    display: str


SYSTEM_ACTOR = Actor(type="system", id="system", display="system")
