"""SASL/OAUTHBEARER on a real broker: the control plane's per-principal tokens with confluent-kafka, kafka-python
and aiokafka; refused tokens; a session that ends with its token (KIP-368) re-authenticates or is closed.

One broker with a SASL_PLAINTEXT listener, the authorizer on and a token key; ``u-1`` may write and read topic
``granted`` only, so the tests also show that the token's subject is the principal the ACLs decide for.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.metadata.v12.request import MetadataRequest

from dataplane.client.producer import AsyncProducer, Segment
from dataplane.security.oauthbearer import mint, token_key
from tests.dataplane.server.test_security import QUIET, client_config, sasl_config_file, seed_credentials
from tests.support.broker import BrokerProcess
from tests.support.wire import KafkaWire

pytestmark = pytest.mark.xdist_group("security")

SECRET = "control-plane-secret-key"
TOPIC_AUTHORIZATION_FAILED = 29
METADATA = MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("oauth")
    cluster_id = f"test-{uuid.uuid4().hex[:12]}"
    config = sasl_config_file(root)
    config.write_text(config.read_text() + f'sasl.oauthbearer.token.key = "{token_key(SECRET, cluster_id).hex()}"\n')
    config.chmod(0o600)
    broker = BrokerProcess(root / "data", cluster_id, extra_args=["--config", str(config)])
    seed_credentials(cluster_id)
    broker.start()
    try:
        admin = AdminClient(client_config(broker, "admin"))
        for future in admin.create_topics([NewTopic("granted", 1, 1), NewTopic("other", 1, 1)]).values():
            future.result(30)
        acls = [AclBinding(ResourceType.TOPIC, "granted", ResourcePatternType.LITERAL, "User:u-1", "*", operation,
                           AclPermissionType.ALLOW) for operation in (AclOperation.WRITE, AclOperation.READ)]
        for future in admin.create_acls(acls).values():
            future.result(30)
        yield broker
    finally:
        broker.stop()


def token_for(broker: BrokerProcess, name: str, seconds: float = 300, *, secret: str = SECRET,
              audience: str | None = None) -> tuple[str, float]:
    key = token_key(secret, broker.cluster_id)
    return mint(key, principal_name=name, audience=audience or broker.cluster_id, lifetime_seconds=seconds)


def oauth_config(broker: BrokerProcess, name: str, seconds: float = 300, **token_args: Any) -> dict[str, Any]:
    def refresh(_config: str) -> tuple[str, float, str, dict[str, str]]:
        token, expires = token_for(broker, name, seconds, **token_args)
        return token, expires, name, {}
    return {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "OAUTHBEARER", "oauth_cb": refresh, **QUIET}


def produce(config: dict[str, Any], topic: str) -> int | None:
    outcome: list[int | None] = []
    producer = Producer({**config, "message.timeout.ms": 10_000})
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: outcome.append(None if err is None else err.code()))
    producer.flush(20)
    assert outcome, "no delivery report"
    return outcome[0]


def test_confluent_kafka_acts_as_the_tokens_principal(broker: BrokerProcess) -> None:
    config = oauth_config(broker, "u-1")
    assert produce(config, "granted") is None
    assert produce(config, "other") == TOPIC_AUTHORIZATION_FAILED
    topics = AdminClient(config).list_topics(timeout=20).topics
    assert "granted" in topics and "other" not in topics  # Metadata lists what u-1 may describe
    assert produce(oauth_config(broker, "u-2"), "granted") == TOPIC_AUTHORIZATION_FAILED


@pytest.mark.parametrize(("args", "why"), [
    ({"secret": "guessed"}, "signature"),
    ({"audience": "another-cluster"}, "not for this cluster"),
    ({"seconds": -60}, "expired"),
])
def test_refused_tokens(broker: BrokerProcess, args: dict[str, Any], why: str) -> None:
    with KafkaWire(broker.port) as wire:
        with pytest.raises(PermissionError, match=f"(?i)sasl_authentication_failed.*{why}"):
            wire.authenticate_token(token_for(broker, "u-1", **args)[0])
        with pytest.raises(OSError):  # closed after the failure's answer
            wire.call(METADATA)
    with pytest.raises(KafkaException):
        AdminClient(oauth_config(broker, "u-1", **args)).list_topics(timeout=3)


def test_kafka_python_token_provider(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import KafkaError
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Tokens(AbstractTokenProvider):  # type: ignore[misc]
        def __init__(self, name: str) -> None:
            self.name = name

        def token(self) -> str:
            return token_for(broker, self.name)[0]

    common: dict[str, Any] = {"bootstrap_servers": broker.bootstrap, "security_protocol": "SASL_PLAINTEXT",
                              "sasl_mechanism": "OAUTHBEARER", "request_timeout_ms": 10_000}
    producer = KafkaProducer(sasl_oauth_token_provider=Tokens("u-1"), **common)
    try:
        producer.send("granted", b"from kafka-python").get(timeout=20)
        with pytest.raises(KafkaError):
            producer.send("other", b"x").get(timeout=20)
    finally:
        producer.close()
    consumer = KafkaConsumer(sasl_oauth_token_provider=Tokens("u-1"), **common)
    try:
        assert "granted" in consumer.topics() and "other" not in consumer.topics()
    finally:
        consumer.close()


def test_aiokafka_token_provider(broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.abc import AbstractTokenProvider
    from aiokafka.errors import KafkaError

    class Tokens(AbstractTokenProvider):
        def __init__(self, name: str, secret: str = SECRET) -> None:
            self.name, self.secret = name, secret

        async def token(self) -> str:
            return token_for(broker, self.name, secret=self.secret)[0]

    async def send(tokens: Tokens, topic: str) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, security_protocol="SASL_PLAINTEXT",
                                    sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=tokens,
                                    request_timeout_ms=10_000)
        try:
            await producer.start()
            await producer.send_and_wait(topic, b"from aiokafka")
        finally:
            await producer.stop()
    asyncio.run(send(Tokens("u-1"), "granted"))
    with pytest.raises(KafkaError):
        asyncio.run(send(Tokens("u-1"), "other"))
    with pytest.raises(KafkaError):
        asyncio.run(send(Tokens("u-1", "guessed"), "granted"))


def test_a_session_ends_with_its_token_unless_re_authenticated(broker: BrokerProcess) -> None:
    with KafkaWire(broker.port) as wire:
        started = time.monotonic()
        lifetime_ms = wire.authenticate_token(token_for(broker, "u-1", seconds=4)[0])
        assert 3_000 < lifetime_ms <= 5_000  # exp is whole seconds, rounded up
        while time.monotonic() < started + lifetime_ms / 1000 - 1:  # the session is served until near its end ...
            wire.call(METADATA)
        while time.monotonic() < started + lifetime_ms / 1000 + 0.5:
            time.sleep(0.1)  # waiting out the session (a deadline the test sets, not synchronisation)
        with pytest.raises(OSError):  # ... and closed at the first request after it
            wire.call(METADATA)

    with KafkaWire(broker.port) as wire:
        wire.authenticate_token(token_for(broker, "u-1", seconds=2)[0])
        assert wire.authenticate_token(token_for(broker, "u-1", seconds=120)[0]) > 100_000  # re-authenticated
        with pytest.raises(PermissionError, match="principal"):  # but not as someone else
            wire.authenticate_token(token_for(broker, "u-2", seconds=120)[0])


def test_librdkafka_re_authenticates_before_its_short_tokens_expire(broker: BrokerProcess) -> None:
    config = oauth_config(broker, "u-1", seconds=4)
    seen = len(broker.lines)
    consumer = Consumer({**config, "group.id": "unused", "enable.auto.commit": False})
    try:
        ends = time.monotonic() + 9  # outlives two tokens on the same connection
        while time.monotonic() < ends:
            low, high = consumer.get_watermark_offsets(TopicPartition("granted", 0), timeout=10, cached=False)
            assert 0 <= low <= high
            time.sleep(0.5)  # pacing requests over the tokens' lifetimes, not synchronisation
    finally:
        consumer.close()
    assert not any("re-authentication was required" in line for line in broker.lines[seen:])


def test_the_asyncio_producer_renews_its_connections_before_their_sessions_end(broker: BrokerProcess) -> None:
    """The REST proxy's producer (``dataplane.client.producer``) as the token's principal: WRITE on ``granted``
    only, and connections replaced before their short sessions end, so no request is ever refused for it."""
    config = oauth_config(broker, "u-1", seconds=3)
    seen = len(broker.lines)

    async def main() -> tuple[list[Segment], list[Segment], int]:
        producer = AsyncProducer(config, [("127.0.0.1", broker.port)])
        try:
            granted: list[Segment] = []
            ends = time.monotonic() + 7  # outlives two tokens
            while time.monotonic() < ends:
                granted += await producer.send("granted", 0, [(None, b"renewed", None, 1)])
                await asyncio.sleep(0.2)  # pacing sends over the tokens' lifetimes, not synchronisation
            denied = await producer.send("other", 0, [(None, b"refused", None, 1)])
            return granted, denied, producer.retries
        finally:
            producer.close()

    granted, denied, retries = asyncio.run(main())
    assert len(granted) > 20 and [s.error for s in granted if s.error is not None] == []
    assert [s.error.code for s in denied if s.error is not None] == ["TOPIC_AUTHORIZATION_FAILED"]
    assert retries == 0
    assert not any("re-authentication was required" in line for line in broker.lines[seen:])


def test_oauthbearer_is_offered_only_with_a_token_key(broker: BrokerProcess, tmp_path: Path) -> None:
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

    with KafkaWire(broker.port) as wire:
        assert "OAUTHBEARER" in wire.call(SaslHandshakeRequest(mechanism="PLAIN")).mechanisms
    plain = BrokerProcess(tmp_path / "data", f"test-{uuid.uuid4().hex[:12]}",
                         extra_args=["--config", str(sasl_config_file(tmp_path))])
    plain.start()
    try:
        with KafkaWire(plain.port) as wire:
            answer = wire.call(SaslHandshakeRequest(mechanism="OAUTHBEARER"))
            assert answer.error_code.name == "unsupported_sasl_mechanism"
            assert "OAUTHBEARER" not in answer.mechanisms
    finally:
        plain.stop()


def test_the_spark_native_engine_reads_with_a_static_token(broker: BrokerProcess) -> None:
    """A Spark task's settings carry a token, not a callback: our own client authenticates with it too."""
    from dataplane.client.spark.fetch import fetch_range, native_engine
    from dataplane.client.spark.options import SparkSourceError
    from dataplane.client.spark.plan import OffsetRange
    from dataplane.client.tokens import TOKEN

    token, _ = token_for(broker, "u-1")
    client = {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
              "sasl.mechanisms": "OAUTHBEARER", TOKEN: token}
    assert native_engine(client) is not None  # the install builds the compiled decoder
    assert produce(oauth_config(broker, "u-1"), "granted") is None
    values = [v for b in fetch_range(client, OffsetRange("granted", 0, 0, 1), poll_timeout_ms=10_000)
              for v in b.column("value").to_pylist()]
    assert values == [b"v"]
    with pytest.raises(SparkSourceError, match="not authorized to read other-0"):
        list(fetch_range(client, OffsetRange("other", 0, 0, 1), poll_timeout_ms=10_000))
    bad = {**client, TOKEN: token_for(broker, "u-1", secret="wrong")[0]}
    with pytest.raises(SparkSourceError, match="reading granted-0"):
        list(fetch_range(bad, OffsetRange("granted", 0, 0, 1), poll_timeout_ms=10_000))
