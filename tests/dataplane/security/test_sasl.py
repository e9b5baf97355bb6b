"""SCRAM (RFC 7677's vector, wrong proofs, altered nonces) and PLAIN (malformed tokens), sans-IO."""

from __future__ import annotations

import base64

import pytest

from dataplane.security.sasl import AuthenticationFailed, Credentials, plain_hash, server_for
from dataplane.security.scram import ScramClient, ScramCredential, ScramError, ScramServer, derive

# RFC 7677, section 3.
USER, PASSWORD = "user", "pencil"
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
SERVER_FIRST = f"r={CLIENT_NONCE}{SERVER_NONCE},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
CLIENT_FINAL = f"c=biws,r={CLIENT_NONCE}{SERVER_NONCE},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
SERVER_FINAL = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_credential() -> ScramCredential:
    return derive("SCRAM-SHA-256", PASSWORD, 4096, SALT)


def test_rfc7677_vector_server_side() -> None:
    server = ScramServer("SCRAM-SHA-256", {USER: rfc_credential()}.get, server_nonce=SERVER_NONCE)
    assert server.step(f"n,,n={USER},r={CLIENT_NONCE}".encode()).decode() == SERVER_FIRST
    assert server.step(CLIENT_FINAL.encode()).decode() == SERVER_FINAL
    assert server.complete and server.username == USER


def test_rfc7677_vector_client_side() -> None:
    client = ScramClient("SCRAM-SHA-256", USER, PASSWORD, nonce=CLIENT_NONCE)
    assert client.first().decode() == f"n,,n={USER},r={CLIENT_NONCE}"
    assert client.final(SERVER_FIRST.encode()).decode() == CLIENT_FINAL
    client.verify(SERVER_FINAL.encode())
    with pytest.raises(ScramError):
        client.verify(b"v=" + base64.b64encode(b"x" * 32))


def exchange(mechanism: str, stored: ScramCredential | None, password: str,
             tamper: str | None = None) -> bytes:
    server = ScramServer(mechanism, lambda user: stored if user == "alice" else None)
    client = ScramClient(mechanism, "alice", password)
    server_first = server.step(client.first())
    final = client.final(server_first).decode()
    if tamper == "nonce":
        without, _, proof = final.rpartition(",p=")
        final = without[:-1] + ("A" if without[-1] != "A" else "B") + ",p=" + proof
    elif tamper == "proof":
        without, _, proof = final.rpartition(",p=")
        raw = bytearray(base64.b64decode(proof))
        raw[0] ^= 1
        final = f"{without},p={base64.b64encode(bytes(raw)).decode()}"
    elif tamper == "binding":
        final = final.replace("c=biws", "c=" + base64.b64encode(b"y,,").decode())
    answer = server.step(final.encode())
    client.verify(answer)
    return answer


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_round_trip_each_mechanism(mechanism: str) -> None:
    exchange(mechanism, derive(mechanism, "s3cret"), "s3cret")


def test_a_final_nonce_ending_with_the_exchanges_is_accepted_as_kafka_does() -> None:
    """librdkafka < 2.1 (Debian's kcat) repeats the client nonce in client-final; Kafka checks endsWith."""
    import hashlib
    import hmac

    server = ScramServer("SCRAM-SHA-256", {USER: rfc_credential()}.get, server_nonce=SERVER_NONCE)
    server.step(f"n,,n={USER},r={CLIENT_NONCE}".encode())
    without_proof = f"c=biws,r={CLIENT_NONCE}{CLIENT_NONCE}{SERVER_NONCE}"
    salted = hashlib.pbkdf2_hmac("sha256", PASSWORD.encode(), SALT, 4096)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    auth_message = f"n={USER},r={CLIENT_NONCE},{SERVER_FIRST},{without_proof}".encode()
    signature = hmac.new(hashlib.sha256(client_key).digest(), auth_message, "sha256").digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
    assert server.step(f"{without_proof},p={proof}".encode()).startswith(b"v=")
    assert server.complete


@pytest.mark.parametrize("tamper", ["nonce", "proof", "binding"])
def test_altered_messages_fail(tamper: str) -> None:
    with pytest.raises(ScramError):
        exchange("SCRAM-SHA-256", derive("SCRAM-SHA-256", "s3cret"), "s3cret", tamper)


def test_wrong_password_and_unknown_user_fail_the_same_way() -> None:
    with pytest.raises(ScramError, match="authentication failed"):
        exchange("SCRAM-SHA-256", derive("SCRAM-SHA-256", "s3cret"), "wrong")
    with pytest.raises(ScramError, match="authentication failed"):
        exchange("SCRAM-SHA-256", None, "s3cret")


def test_credential_of_the_other_mechanism_does_not_verify() -> None:
    with pytest.raises(ScramError):
        exchange("SCRAM-SHA-512", derive("SCRAM-SHA-256", "s3cret"), "s3cret")


def test_replayed_final_message_fails_on_a_new_exchange() -> None:
    stored = derive("SCRAM-SHA-256", "s3cret")
    server = ScramServer("SCRAM-SHA-256", lambda user: stored)
    client = ScramClient("SCRAM-SHA-256", "alice", "s3cret")
    final = client.final(server.step(client.first()))
    server.step(final)
    replay = ScramServer("SCRAM-SHA-256", lambda user: stored)
    replay.step(client.first())  # same client nonce, fresh server nonce
    with pytest.raises(ScramError, match="nonce"):
        replay.step(final)


@pytest.mark.parametrize("token", [b"", b"garbage", b"p=tls-unique,,n=a,r=x", b"n,,r=x,n=a", b"n,,n=a",
                                   b"n,a=bob,n=alice,r=x", b"n,,n=al=ZZice,r=x", b"n,,n=a,r=x,m=ext",
                                   b"\xff\xfe"])
def test_malformed_client_first(token: bytes) -> None:
    server = ScramServer("SCRAM-SHA-256", lambda user: None)
    with pytest.raises(ScramError):
        server.step(token)


def test_escaped_usernames() -> None:
    stored = derive("SCRAM-SHA-256", "pw")
    seen: list[str] = []

    def lookup(user: str) -> ScramCredential:
        seen.append(user)
        return stored
    server = ScramServer("SCRAM-SHA-256", lookup)
    client = ScramClient("SCRAM-SHA-256", "a,b=c", "pw")
    client.verify(server.step(client.final(server.step(client.first()))))
    assert seen == ["a,b=c"] and server.username == "a,b=c"


CREDS = Credentials(plain={"alice": plain_hash("s3cret")})


def test_plain_accepts_the_right_secret() -> None:
    mech = server_for("PLAIN", CREDS)
    assert mech.step(b"\x00alice\x00s3cret") == b"" and mech.complete and mech.username == "alice"
    assert server_for("PLAIN", CREDS).step(b"alice\x00alice\x00s3cret") == b""


@pytest.mark.parametrize("token", [b"", b"alice", b"\x00alice", b"\x00alice\x00s3cret\x00", b"\x00\x00s3cret",
                                   b"\x00alice\x00", b"bob\x00alice\x00s3cret", b"\x00alice\x00wrong",
                                   b"\x00mallory\x00s3cret", b"\x00al\xffice\x00s3cret",
                                   b"\x00" + b"a" * 300 + b"\x00s3cret"])
def test_plain_refuses_malformed_and_wrong_tokens(token: bytes) -> None:
    mech = server_for("PLAIN", CREDS)
    with pytest.raises(AuthenticationFailed):
        mech.step(token)
    assert not mech.complete
