"""OAUTHBEARER (RFC 7628) with the control plane's HS256 tokens, sans-IO: what is accepted and what is refused."""

from __future__ import annotations

import base64
import json

import jwt
import pytest

from dataplane.security.oauthbearer import (
    OAuthBearerServer,
    TokenValidator,
    client_message,
    mint,
    parse_client_message,
    token_key,
)
from dataplane.security.sasl import AuthenticationFailed

KEY = token_key("the-secret-key", "skc-one")
NOW = 1_800_000_000.0
VALIDATOR = TokenValidator(KEY, "skc-one")


def server() -> OAuthBearerServer:
    return OAuthBearerServer(VALIDATOR, clock=lambda: NOW)


def token(**overrides: object) -> str:
    claims: dict[str, object] = {"sub": "u-42", "aud": "skc-one", "iat": int(NOW), "exp": int(NOW) + 300}
    claims.update(overrides)
    return jwt.encode({k: v for k, v in claims.items() if v is not None}, KEY, algorithm="HS256")


def refused(message: bytes, match: str) -> None:
    with pytest.raises(AuthenticationFailed, match=match):
        server().step(message)


def test_a_minted_token_authenticates_its_subject_for_its_lifetime() -> None:
    minted, expires = mint(KEY, principal_name="sa-7", audience="skc-one", lifetime_seconds=600, now=NOW)
    mechanism = server()
    assert mechanism.step(client_message(minted)) == b""
    assert mechanism.complete and mechanism.username == "sa-7"
    assert expires == NOW + 600
    assert mint(KEY, principal_name="x", audience="a", lifetime_seconds=1, now=NOW + 0.5)[1] == NOW + 2
    assert mechanism.session_lifetime_ms(now=NOW + 100) == 500_000


def test_the_authzid_may_only_repeat_the_subject() -> None:
    assert server().step(client_message(token(), authzid="u-42")) == b""
    refused(client_message(token(), authzid="u-1"), "authorization id")


def test_token_key_is_per_cluster_and_per_secret() -> None:
    assert token_key("s", "skc-a") != token_key("s", "skc-b") != token_key("t", "skc-a")
    assert len(token_key("s", "skc-a")) == 32


@pytest.mark.parametrize(("claims", "match"), [
    ({"exp": int(NOW) - 60}, "expired"),
    ({"aud": "skc-other"}, "not for this cluster"),
    ({"aud": None}, "aud"),
    ({"exp": None}, "exp"),
    ({"sub": None}, "sub"),
    ({"sub": ""}, "sub"),
    ({"exp": int(NOW) + 7 * 24 * 3600}, "too long"),
])
def test_bad_claims_are_refused(claims: dict[str, object], match: str) -> None:
    refused(client_message(token(**claims)), match)


def test_a_token_signed_with_another_key_is_refused() -> None:
    forged = jwt.encode({"sub": "u-1", "aud": "skc-one", "exp": int(NOW) + 60}, token_key("guess", "skc-one"),
                        algorithm="HS256")
    refused(client_message(forged), "signature")


def test_an_unsigned_or_other_algorithm_token_is_refused() -> None:
    def b64(obj: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    unsigned = f"{b64({'alg': 'none', 'typ': 'JWT'})}.{b64({'sub': 'u-1', 'aud': 'skc-one', 'exp': NOW + 60})}."
    refused(client_message(unsigned), "algorithm")
    hs512 = jwt.encode({"sub": "u-1", "aud": "skc-one", "exp": int(NOW) + 60}, KEY, algorithm="HS512")
    refused(client_message(hs512), "algorithm")


@pytest.mark.parametrize(("message", "match"), [
    (b"", "GS2"),
    (b"n,,auth=Bearer x", "GS2"),
    (b"y,,\x01auth=Bearer abc\x01\x01", "GS2 header"),
    (b"p=tls-unique,,\x01auth=Bearer abc\x01\x01", "GS2 header"),
    (b"n,b=x,\x01auth=Bearer abc\x01\x01", "GS2 header"),
    (b"n,,\x01auth=Basic abc\x01\x01", "Bearer"),
    (b"n,,\x01host=example\x01\x01", "no auth"),
    (b"n,,\x01=x\x01\x01", "key/value"),
    (b"n,,\x01auth=Bearer abc\x01", "GS2"),
    (b"\xff\xfe", "UTF-8"),
    (b"n,,\x01auth=Bearer " + b"a" * 9000 + b"\x01\x01", "too long"),
    (b"n,,\x01auth=Bearer not-a-jwt\x01\x01", "invalid token"),
])
def test_malformed_messages_are_refused(message: bytes, match: str) -> None:
    refused(message, match)


def test_extensions_are_allowed_beside_auth() -> None:
    authzid, bearer = parse_client_message(b"n,,\x01host=broker\x01auth=Bearer a.b.c\x01port=9092\x01\x01")
    assert (authzid, bearer) == ("", "a.b.c")


def test_one_exchange_per_mechanism() -> None:
    mechanism = server()
    mechanism.step(client_message(token()))
    with pytest.raises(AuthenticationFailed, match="over"):
        mechanism.step(client_message(token()))


def test_the_broker_refuses_a_malformed_or_short_token_key() -> None:
    from pathlib import Path

    from dataplane.server.config import BrokerConfig, ConfigError, settings_from_table

    with pytest.raises(ConfigError, match=r"sasl\.oauthbearer\.token\.key: expected hex digits"):
        settings_from_table({"sasl": {"oauthbearer": {"token": {"key": "not-hex"}}}})
    with pytest.raises(ConfigError, match="at least 32 bytes"):
        BrokerConfig(node_id=1, host="127.0.0.1", port=0, data_dir=Path("/nonexistent"), metadata_url="",
                     oauthbearer_token_key=b"short")
    config = BrokerConfig(node_id=1, host="127.0.0.1", port=0, data_dir=Path("/nonexistent"), metadata_url="",
                          security_protocol="SASL_PLAINTEXT", inter_broker_username="b", inter_broker_password="p",
                          oauthbearer_token_key=KEY)
    assert config.offered_mechanisms[-1] == "OAUTHBEARER" and "OAUTHBEARER" not in config.sasl_mechanisms
    assert KEY.hex() not in repr(config)
