"""An API key's Kafka (SASL) credentials: derived from its secret once, when the key is made.

PLAIN checks the secret against the key's SHA-256 ``secret_hash``, which every key
has. SCRAM needs salt, iterations, StoredKey and ServerKey, which can only be
computed from the secret: at creation, the only moment it is known. Keys made
before this existed therefore have PLAIN only (their ``sasl_mechanisms`` says so).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from dataplane.security.scram import MECHANISMS, MIN_ITERATIONS, ScramCredential, derive

SCRAM_MECHANISMS = tuple(sorted(MECHANISMS))  # SCRAM-SHA-256, SCRAM-SHA-512


def derive_scram(secret: str, iterations: int = MIN_ITERATIONS) -> dict[str, dict[str, Any]]:
    """The JSON kept on the key: per mechanism, what a broker verifies a SCRAM login with."""
    return {mechanism: _dump(derive(mechanism, secret, iterations)) for mechanism in SCRAM_MECHANISMS}


def scram_credentials(stored: Mapping[str, Any]) -> dict[str, ScramCredential]:
    return {mechanism: _load(value) for mechanism, value in stored.items() if mechanism in MECHANISMS}


def _dump(credential: ScramCredential) -> dict[str, Any]:
    return {"salt": _b64(credential.salt), "iterations": credential.iterations,
            "stored_key": _b64(credential.stored_key), "server_key": _b64(credential.server_key)}


def _load(value: Mapping[str, Any]) -> ScramCredential:
    return ScramCredential(base64.b64decode(value["salt"]), int(value["iterations"]),
                           base64.b64decode(value["stored_key"]), base64.b64decode(value["server_key"]))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
