"""API key material: generation, hashing and the Authorization header format.

A key is ``<key id>:<secret>``. The key id is 16 characters of Crockford-ish
base32 (unambiguous, easy to read out); the secret is 48 random bytes, URL-safe
base64 (64 characters, never contains ``:``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets

KEY_ID_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
KEY_ID_LENGTH = 16
KEY_ID_RE = re.compile(rf"^[{KEY_ID_ALPHABET}]{{{KEY_ID_LENGTH}}}\Z")
SECRET_RE = re.compile(r"^[A-Za-z0-9_-]{64}\Z")


def new_key_id() -> str:
    return "".join(secrets.choice(KEY_ID_ALPHABET) for _ in range(KEY_ID_LENGTH))


def new_secret() -> str:
    return secrets.token_urlsafe(48)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def secret_matches(secret: str, stored_hash: str) -> bool:
    return hmac.compare_digest(hash_secret(secret), stored_hash)


class MalformedCredentials(ValueError):
    """The Authorization header is present but not a key in a form we accept."""


def parse_authorization(header: str) -> tuple[str, str] | None:
    """Parse ``Bearer <key id>:<secret>`` or ``Basic base64(<key id>:<secret>)``.

    Returns None for schemes we do not handle (so another authenticator may),
    and raises MalformedCredentials for our schemes with a bad payload.
    """
    scheme, _, payload = header.strip().partition(" ")
    scheme = scheme.lower()
    payload = payload.strip()
    if scheme == "bearer":
        credentials = payload
    elif scheme == "basic":
        try:
            credentials = base64.b64decode(payload, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise MalformedCredentials("Basic credentials are not valid base64 of '<key id>:<secret>'.") from exc
    else:
        return None
    key_id, sep, secret = credentials.partition(":")
    if not sep or not key_id or not secret:
        raise MalformedCredentials(f"Expected '{scheme.capitalize()} <key id>:<secret>'.")
    return key_id, secret
