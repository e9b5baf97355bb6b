"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), sans-IO: the server and client exchanges as pure steps.

A credential is what the server keeps: salt, iterations, StoredKey = H(ClientKey)
and ServerKey, never the password. PBKDF2 runs only where a credential is made
(``derive``) and in the client; the server's verification is two HMACs and a
hash, so a flood of logins costs the broker no key stretching.

Server exchange (``ScramServer``), one instance per authentication:
client-first ``n,,n=<user>,r=<cnonce>`` → server-first ``r=<cnonce><snonce>,s=<salt>,i=<n>``
→ client-final ``c=biws,r=<nonce>,p=<proof>`` → server-final ``v=<server signature>``.
An unknown user gets a made-up salt and fails at the proof, as a known user
with a wrong password does, so the exchange does not say which names exist.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# KIP-554's mechanism numbers on the wire.
MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism minimum and default
MAX_ITERATIONS = 16384  # Kafka's maximum


class ScramError(ValueError):
    """The exchange failed: a malformed message, a changed nonce, a wrong proof, an unknown user."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def _hmac(digest: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, digest).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism], password.encode(), salt, iterations)


def from_salted_password(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """A credential from the salted password (what AlterUserScramCredentials carries, KIP-554)."""
    digest = MECHANISMS[mechanism]
    client_key = _hmac(digest, salted, b"Client Key")
    return ScramCredential(salt, iterations, hashlib.new(digest, client_key).digest(),
                           _hmac(digest, salted, b"Server Key"))


def derive(mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
           salt: bytes | None = None) -> ScramCredential:
    """A new credential for a password: the one place PBKDF2 runs on the server side (slow by design)."""
    salt = secrets.token_bytes(32) if salt is None else salt
    return from_salted_password(mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ScramError("invalid base64") from exc


def _attributes(message: str) -> list[tuple[str, str]]:
    pairs = []
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ScramError(f"malformed attribute {part[:20]!r}")
        pairs.append((key, value))
    return pairs


def _saslname(name: str) -> str:
    """RFC 5802's username escaping undone: ``=2C`` is ``,`` and ``=3D`` is ``=``; any other ``=`` is an error."""
    out, i = [], 0
    while i < len(name):
        if name[i] == "=":
            code = name[i + 1:i + 3]
            if code not in ("2C", "3D"):
                raise ScramError("bad escape in username")
            out.append("," if code == "2C" else "=")
            i += 3
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


def escape_saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _text(token: bytes) -> str:
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScramError("not UTF-8") from exc


class ScramServer:
    """The server side of one SCRAM exchange. Owned by one connection; call ``step`` with each client token.

    ``lookup(username)`` returns the stored credential or None.
    """

    def __init__(self, mechanism: str, lookup: Callable[[str], ScramCredential | None], *,
                 server_nonce: str | None = None) -> None:
        self.digest = MECHANISMS[mechanism]
        self._server_nonce = server_nonce or secrets.token_urlsafe(24)  # fixed only by RFC test vectors
        self._lookup = lookup
        self._state = "first"
        self.username: str | None = None  # set once the exchange succeeded
        self._user = ""
        self._credential: ScramCredential | None = None
        self._nonce = ""
        self._gs2 = ""
        self._client_first_bare = ""
        self._server_first = ""

    @property
    def complete(self) -> bool:
        return self._state == "done"

    @property
    def attempted_user(self) -> str | None:
        """The user name the client sent (known after its first message), for auditing a failure."""
        return self._user or None

    def step(self, token: bytes) -> bytes:
        if self._state == "first":
            return self._first(_text(token))
        if self._state == "final":
            return self._final(_text(token))
        raise ScramError("the exchange is over")

    def _first(self, message: str) -> bytes:
        self._state = "failed"
        flag, sep, rest = message.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not sep or not sep2 or flag not in ("n", "y"):
            raise ScramError("channel binding is not supported" if flag.startswith("p=") else "malformed client-first")
        attrs = _attributes(bare)
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r" or not attrs[1][1]:
            raise ScramError("client-first must start with n= and r=")
        if any(key == "m" for key, _ in attrs):
            raise ScramError("mandatory extensions are not supported")
        user = _saslname(attrs[0][1])
        if authzid and authzid != f"a={escape_saslname(user)}":
            raise ScramError("authorization id must be the username")
        client_nonce = attrs[1][1]
        if not all(0x21 <= ord(c) <= 0x7E and c != "," for c in client_nonce):
            raise ScramError("bad nonce")
        credential = self._lookup(user)
        self._user, self._credential = user, credential
        salt, iterations = (credential.salt, credential.iterations) if credential else \
            (hashlib.sha256(b"sluice-unknown-user:" + user.encode()).digest(), MIN_ITERATIONS)
        self._nonce = client_nonce + self._server_nonce
        self._gs2 = f"{flag},{authzid},"
        self._client_first_bare = bare
        self._server_first = f"r={self._nonce},s={_b64(salt)},i={iterations}"
        self._state = "final"
        return self._server_first.encode()

    def _final(self, message: str) -> bytes:
        self._state = "failed"
        without_proof, sep, proof_text = message.rpartition(",p=")
        if not sep:
            raise ScramError("client-final has no proof")
        attrs = _attributes(without_proof)
        if len(attrs) < 2 or attrs[0][0] != "c" or attrs[1][0] != "r":
            raise ScramError("client-final must start with c= and r=")
        if _unb64(attrs[0][1]) != self._gs2.encode():
            raise ScramError("channel binding does not match the client-first message")
        # Kafka's ScramSaslServer accepts a final nonce that *ends with* the combined one, and librdkafka before
        # 2.1 (Debian's kcat) depends on it: it sends the client nonce twice (cnonce + cnonce + snonce).
        # The fresh server nonce still ties the message to this exchange.
        sent = attrs[1][1]
        if len(sent) < len(self._nonce) or not hmac.compare_digest(sent[len(sent) - len(self._nonce):].encode(),
                                                                   self._nonce.encode()):
            raise ScramError("nonce does not match")
        proof = _unb64(proof_text)
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        credential = self._credential
        if credential is None or len(proof) != len(credential.stored_key):
            raise ScramError("authentication failed")
        signature = _hmac(self.digest, credential.stored_key, auth_message)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self.digest, client_key).digest(), credential.stored_key):
            raise ScramError("authentication failed")
        self._state = "done"
        self.username = self._user
        return f"v={_b64(_hmac(self.digest, credential.server_key, auth_message))}".encode()


class ScramClient:
    """The client side of one SCRAM exchange (the broker's replica fetchers, tests). Sans-IO.

    ``first()`` → send; ``final(server_first)`` → send (runs PBKDF2: call it off an
    event loop); ``verify(server_final)`` checks the server knew the credential.
    """

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self.digest = MECHANISMS[mechanism]
        self.username, self.password = username, password
        self.nonce = nonce or secrets.token_urlsafe(24)
        self._client_first_bare = f"n={escape_saslname(username)},r={self.nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = _text(server_first)
        attrs = dict(_attributes(text))
        nonce, salt, iterations = attrs.get("r", ""), _unb64(attrs.get("s", "")), int(attrs.get("i", "0"))
        if not nonce.startswith(self.nonce) or len(nonce) == len(self.nonce):
            raise ScramError("server nonce does not extend the client's")
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise ScramError(f"unreasonable iteration count {iterations}")
        salted = salted_password(self.mechanism, self.password, salt, iterations)
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        client_key = _hmac(self.digest, salted, b"Client Key")
        signature = _hmac(self.digest, hashlib.new(self.digest, client_key).digest(), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = _hmac(self.digest, _hmac(self.digest, salted, b"Server Key"), auth_message)
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify(self, server_final: bytes) -> None:
        attrs = dict(_attributes(_text(server_final)))
        if "e" in attrs:
            raise ScramError(f"server refused: {attrs['e']}")
        if not hmac.compare_digest(_unb64(attrs.get("v", "")), self._server_signature):
            raise ScramError("server signature does not verify")
