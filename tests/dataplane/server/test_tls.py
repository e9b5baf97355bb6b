"""TLS listeners (SSL and SASL_SSL) on real brokers with real clients (confluent-kafka, kafka-python, aiokafka).

A throwaway CA (trustme) signs the brokers' certificate for 127.0.0.1; clients trust that CA. Brokers run
as processes with the ``ssl.*`` settings in their TOML config, credentials seeded as the control plane
writes them. Also: record data leaves a TLS connection exactly as stored (no sendfile under TLS), bad peers
(plaintext, garbage, a torn stream) lose their connection and nobody else's, replication runs over TLS, and
an unusable certificate stops the broker at startup with one line.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import socket
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trustme
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from tests.dataplane.server.test_security import USERS, seed_credentials
from tests.support.broker import ROOT, BrokerProcess
from tests.support.wire import KafkaWire

pytestmark = pytest.mark.xdist_group("tls")

QUIET = {"log_level": 0, "logger": lambda *args: None}
MECHANISMS = ["PLAIN", "SCRAM-SHA-256"]


@dataclass(frozen=True)
class Pki:
    ca: Path
    certificate: Path
    key: Path

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca))


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    root = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    ca.cert_pem.write_to_path(str(root / "ca.pem"))
    server.private_key_pem.write_to_path(str(root / "broker.key"))
    server.cert_chain_pems[0].write_to_path(str(root / "broker.pem"))
    for pem in server.cert_chain_pems[1:]:
        pem.write_to_path(str(root / "broker.pem"), append=True)
    return Pki(root / "ca.pem", root / "broker.pem", root / "broker.key")


def tls_config(directory: Path, pki: Pki, protocol: str, settings: tuple[str, ...] = ()) -> Path:
    path = directory / "broker.toml"
    lines = [f'listeners = "{protocol}://127.0.0.1:0"', *settings,
             f'ssl.certificate = "{pki.certificate}"', f'ssl.key = "{pki.key}"', f'ssl.ca = "{pki.ca}"']
    if protocol.startswith("SASL_"):
        lines += ['inter.broker.sasl.username = "broker"', 'inter.broker.sasl.password = "broker-secret"']
    path.write_text("\n".join(lines) + "\n")
    return path


def start_broker(root: Path, pki: Pki, protocol: str, *, cluster_id: str | None = None, node_id: int = 1,
                 settings: tuple[str, ...] = ()) -> BrokerProcess:
    root.mkdir(parents=True, exist_ok=True)
    broker = BrokerProcess(root / "data", cluster_id or f"test-{uuid.uuid4().hex[:12]}",
                          extra_args=["--config", str(tls_config(root, pki, protocol, settings)),
                                      "--node-id", str(node_id)])
    if protocol.startswith("SASL_") and cluster_id is None:
        seed_credentials(broker.cluster_id)
    broker.start()
    return broker


@pytest.fixture(scope="module")
def sasl_ssl(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[BrokerProcess]:
    broker = start_broker(tmp_path_factory.mktemp("sasl-ssl"), pki, "SASL_SSL")
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def plain_ssl(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[BrokerProcess]:
    broker = start_broker(tmp_path_factory.mktemp("ssl"), pki, "SSL")
    try:
        yield broker
    finally:
        broker.stop()


def confluent_config(broker: BrokerProcess, pki: Pki, mechanism: str | None) -> dict[str, Any]:
    if mechanism is None:
        return {"bootstrap.servers": broker.bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(pki.ca),
                **QUIET}
    return {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_SSL", "ssl.ca.location": str(pki.ca),
            "sasl.mechanism": mechanism, "sasl.username": "alice", "sasl.password": USERS["alice"], **QUIET}


def python_config(pki: Pki, mechanism: str | None) -> dict[str, Any]:
    """kafka-python's and aiokafka's settings (the same names)."""
    if mechanism is None:
        return {"security_protocol": "SSL", "ssl_context": pki.client_context()}
    return {"security_protocol": "SASL_SSL", "ssl_context": pki.client_context(), "sasl_mechanism": mechanism,
            "sasl_plain_username": "alice", "sasl_plain_password": USERS["alice"]}


# (listener fixture, SASL mechanism or None for the SSL listener)
CASES = [("sasl_ssl", "PLAIN"), ("sasl_ssl", "SCRAM-SHA-256"), ("plain_ssl", None)]
IDS = ["SASL_SSL-PLAIN", "SASL_SSL-SCRAM-SHA-256", "SSL"]


def fresh_topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ---------------------------------------------------------------------- three client libraries


@pytest.mark.parametrize(("listener", "mechanism"), CASES, ids=IDS)
def test_confluent_kafka_produces_and_consumes(request: pytest.FixtureRequest, pki: Pki, listener: str,
                                               mechanism: str | None) -> None:
    broker: BrokerProcess = request.getfixturevalue(listener)
    config, topic = confluent_config(broker, pki, mechanism), fresh_topic("ck")
    producer = Producer(config)
    errors: list[Any] = []
    for i in range(50):
        producer.produce(topic, f"value-{i}".encode(), on_delivery=lambda err, _msg: errors.append(err))
    assert producer.flush(30) == 0 and errors == [None] * 50
    consumer = Consumer({**config, "group.id": fresh_topic("g"), "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    try:
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(values) < 50 and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                values.append(message.value())
        assert values == [f"value-{i}".encode() for i in range(50)]
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


@pytest.mark.parametrize(("listener", "mechanism"), CASES, ids=IDS)
def test_kafka_python_produces_and_consumes(request: pytest.FixtureRequest, pki: Pki, listener: str,
                                            mechanism: str | None) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    broker: BrokerProcess = request.getfixturevalue(listener)
    topic = fresh_topic("kp")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, request_timeout_ms=20_000,
                             **python_config(pki, mechanism))
    try:
        for i in range(20):
            producer.send(topic, f"kp-{i}".encode()).get(timeout=30)
    finally:
        producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=fresh_topic("g"),
                             auto_offset_reset="earliest", consumer_timeout_ms=20_000, request_timeout_ms=20_000,
                             **python_config(pki, mechanism))
    try:
        values = []
        for message in consumer:
            values.append(message.value)
            if len(values) == 20:
                break
        assert values == [f"kp-{i}".encode() for i in range(20)]
    finally:
        consumer.close()


@pytest.mark.parametrize(("listener", "mechanism"), CASES, ids=IDS)
def test_aiokafka_produces_and_consumes(request: pytest.FixtureRequest, pki: Pki, listener: str,
                                        mechanism: str | None) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    broker: BrokerProcess = request.getfixturevalue(listener)
    topic = fresh_topic("ak")

    async def roundtrip() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, request_timeout_ms=20_000,
                                    **python_config(pki, mechanism))
        await producer.start()
        try:
            for i in range(20):
                await producer.send_and_wait(topic, f"ak-{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=fresh_topic("g"),
                                    auto_offset_reset="earliest", request_timeout_ms=20_000,
                                    **python_config(pki, mechanism))
        await consumer.start()
        try:
            values: list[bytes] = []
            async with asyncio.timeout(60):
                async for message in consumer:
                    assert message.value is not None
                    values.append(message.value)
                    if len(values) == 20:
                        break
            return values
        finally:
            await consumer.stop()

    assert asyncio.run(roundtrip()) == [f"ak-{i}".encode() for i in range(20)]


# ---------------------------------------------------------------------- record data under TLS


def fetch_all(topic: str, max_bytes: int) -> FetchRequest:
    return FetchRequest(
        cluster_id=None, replica_id=BrokerId(-1), max_wait=i32Timedelta.parse(datetime.timedelta(0)),
        min_bytes=i32(0), max_bytes=i32(max_bytes), isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1),
        topics=(FetchTopic(topic=TopicName(topic), partitions=(FetchPartition(
            partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(0), last_fetched_epoch=i32(-1),
            log_start_offset=i64(-1), partition_max_bytes=i32(max_bytes)),)),),
        forgotten_topics_data=(), rack_id="")


def test_a_large_fetch_over_tls_returns_the_stored_bytes_exactly(sasl_ssl: BrokerProcess, pki: Pki) -> None:
    """Several MiB of incompressible records: what a Fetch returns over TLS (pread and encrypted, in 1 MiB
    pieces) is byte for byte the segment file."""
    topic = fresh_topic("big")
    producer = Producer({**confluent_config(sasl_ssl, pki, "PLAIN"), "compression.type": "none",
                         "linger.ms": 50, "batch.size": 1 << 20, "message.max.bytes": 4 << 20})
    for _ in range(6):
        producer.produce(topic, os.urandom(700_000))
    for i in range(2000):
        producer.produce(topic, os.urandom(1000), key=str(i).encode())
    assert producer.flush(60) == 0
    segment = sasl_ssl.data_dir / f"{topic}-0" / "00000000000000000000.log"
    stored = segment.read_bytes()
    assert len(stored) > 6_000_000
    with KafkaWire(sasl_ssl.port, tls=pki.client_context()) as wire:
        wire.authenticate("SCRAM-SHA-256", "alice", USERS["alice"])
        fetched = wire.call(fetch_all(topic, 64 << 20))
    partition = fetched.responses[0].partitions[0]
    assert partition.error_code.value == 0
    assert partition.records == stored


# ---------------------------------------------------------------------- bad peers


def metadata() -> MetadataRequest:
    return MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def closed_by_broker(sock: socket.socket) -> bool:
    """Whether the broker ends the connection (EOF or a reset) after what we sent; no data comes first that
    is not a TLS alert."""
    sock.settimeout(20)
    try:
        while data := sock.recv(4096):
            if data[:1] != b"\x15":  # a TLS alert record is all a refused client may get
                return False
    except ConnectionResetError:
        pass
    return True


def test_plaintext_and_garbage_on_a_tls_port_are_disconnected_and_others_keep_working(
        sasl_ssl: BrokerProcess, pki: Pki) -> None:
    mark = len(sasl_ssl.lines)
    with KafkaWire(sasl_ssl.port, tls=pki.client_context()) as good:
        good.authenticate("PLAIN", "alice", USERS["alice"])
        assert good.call(metadata()).brokers
        with KafkaWire(sasl_ssl.port) as plaintext, pytest.raises((ConnectionError, OSError)):
            plaintext.call(metadata())  # a Kafka request where a ClientHello belongs
        sasl_ssl.wait_for("not a TLS client", after=mark)
        with socket.create_connection(("127.0.0.1", sasl_ssl.port)) as garbage:
            garbage.sendall(b"\x16\x03\x01\x00\x05" + os.urandom(64))  # a handshake record header, then noise
            assert closed_by_broker(garbage)
        with socket.create_connection(("127.0.0.1", sasl_ssl.port)) as garbage:
            garbage.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            assert closed_by_broker(garbage)
        assert good.call(metadata()).brokers  # the TLS client that was there all along
    with KafkaWire(sasl_ssl.port, tls=pki.client_context()) as late:
        late.authenticate("SCRAM-SHA-256", "alice", USERS["alice"])
        assert late.call(metadata()).brokers
    assert "Traceback" not in sasl_ssl.output()


def test_a_torn_tls_stream_closes_that_connection_with_a_log_line(sasl_ssl: BrokerProcess, pki: Pki) -> None:
    """A client that stops in the middle of a TLS record: the broker says so and carries on."""
    mark = len(sasl_ssl.lines)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = pki.client_context().wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    with socket.create_connection(("127.0.0.1", sasl_ssl.port), timeout=20) as sock:
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                sock.sendall(outgoing.read())
                incoming.write(sock.recv(65536))
        sock.sendall(outgoing.read())
        tls.write(b"\x00" * 5000)  # the start of a request frame
        record = outgoing.read()
        sock.sendall(record[: len(record) // 2])
        sock.shutdown(socket.SHUT_WR)  # a FIN (closing with the session tickets unread would send a reset)
        sasl_ssl.wait_for("TLS stream was torn", after=mark)
    with KafkaWire(sasl_ssl.port, tls=pki.client_context()) as wire:
        wire.authenticate("PLAIN", "alice", USERS["alice"])
        assert wire.call(metadata()).brokers


def test_a_client_that_does_not_trust_the_broker_fails_its_handshake(sasl_ssl: BrokerProcess, tmp_path: Path) -> None:
    other = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other))
    with pytest.raises(ssl.SSLCertVerificationError):
        KafkaWire(sasl_ssl.port, tls=ssl.create_default_context(cafile=str(other)))


def test_metadata_and_configs_name_the_listeners_security_protocol(sasl_ssl: BrokerProcess, pki: Pki) -> None:
    from confluent_kafka.admin import ConfigResource

    admin = AdminClient(confluent_config(sasl_ssl, pki, "PLAIN"))
    [broker] = admin.list_topics(timeout=20).brokers.values()
    assert (broker.host, broker.port) == ("127.0.0.1", sasl_ssl.port)
    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    entries = admin.describe_configs([resource])[resource].result(20)
    assert entries["advertised.listeners"].value == f"SASL_SSL://127.0.0.1:{sasl_ssl.port}"
    assert entries["security.inter.broker.protocol"].value == "SASL_SSL"


def test_mutual_tls_admits_clients_with_a_certificate_of_the_ca_only(tmp_path: Path, pki: Pki) -> None:
    ca = trustme.CA()  # this test's own CA: it signs the broker's and the client's certificates
    server, client = ca.issue_cert("127.0.0.1"), ca.issue_cert("client.example")
    own = Pki(tmp_path / "ca.pem", tmp_path / "broker.pem", tmp_path / "broker.key")
    ca.cert_pem.write_to_path(str(own.ca))
    server.cert_chain_pems[0].write_to_path(str(own.certificate))
    server.private_key_pem.write_to_path(str(own.key))
    client.cert_chain_pems[0].write_to_path(str(tmp_path / "client.pem"))
    client.private_key_pem.write_to_path(str(tmp_path / "client.key"))
    broker = start_broker(tmp_path / "b", own, "SSL", settings=('ssl.client.auth = "required"',))
    try:
        base = confluent_config(broker, own, None)
        with_cert = {**base, "ssl.certificate.location": str(tmp_path / "client.pem"),
                     "ssl.key.location": str(tmp_path / "client.key")}
        assert AdminClient(with_cert).list_topics(timeout=20).brokers
        mark = len(broker.lines)
        with pytest.raises((ssl.SSLError, ConnectionError)), \
                KafkaWire(broker.port, tls=own.client_context()) as wire:  # no client certificate
            wire.call(metadata())
        broker.wait_for("TLS failed", after=mark)
        assert AdminClient(with_cert).list_topics(timeout=20).brokers  # still serving
    finally:
        broker.stop()


# ---------------------------------------------------------------------- replication over TLS


def test_followers_replicate_from_their_leader_over_sasl_ssl(tmp_path: Path, pki: Pki) -> None:
    """Two brokers of one cluster on SASL_SSL: the follower connects over TLS, checks the leader's certificate
    against ssl.ca, authenticates as the cluster's broker principal, and the ISR reaches both."""
    cluster_id = f"test-{uuid.uuid4().hex[:12]}"
    seed_credentials(cluster_id)
    brokers = [start_broker(tmp_path / f"b{n}", pki, "SASL_SSL", cluster_id=cluster_id, node_id=n) for n in (1, 2)]
    try:
        config = {**confluent_config(brokers[0], pki, "PLAIN"), "sasl.username": "admin",
                  "sasl.password": USERS["admin"]}
        admin = AdminClient(config)
        deadline = time.monotonic() + 60
        while len(admin.list_topics(timeout=20).brokers) < 2:
            assert time.monotonic() < deadline, "the second broker never registered"
            time.sleep(0.2)
        admin.create_topics([NewTopic("replicated", 1, 2)])["replicated"].result(30)
        producer = Producer({**config, "acks": "all"})
        for i in range(100):
            producer.produce("replicated", f"r-{i}".encode())
        assert producer.flush(60) == 0  # acks=all: both replicas have them
        deadline = time.monotonic() + 60
        while True:
            [partition] = admin.list_topics("replicated", timeout=20).topics["replicated"].partitions.values()
            if sorted(partition.isrs) == [1, 2]:
                break
            assert time.monotonic() < deadline, f"ISR stayed {partition.isrs}"
            time.sleep(0.2)
        for broker in brokers:
            assert "Traceback" not in broker.output() and "TLS failed" not in broker.output()
    finally:
        for broker in brokers:
            broker.stop()


# ---------------------------------------------------------------------- startup checks


def run_broker_cli(tmp_path: Path, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sluice", "broker", "--node-id", "1", "--data-dir",
                           str(tmp_path / "data"), "--config", str(config)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, env={**os.environ})


def test_a_missing_certificate_fails_startup_with_one_line(tmp_path: Path, pki: Pki) -> None:
    config = tmp_path / "broker.toml"
    config.write_text('listeners = "SSL://127.0.0.1:0"\n'
                      f'ssl.certificate = "{tmp_path / "nope.pem"}"\nssl.key = "{pki.key}"\n')
    result = run_broker_cli(tmp_path, config)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert "ssl.certificate" in line and "no such file" in line


def test_a_listener_without_key_fails_startup_with_one_line(tmp_path: Path, pki: Pki) -> None:
    config = tmp_path / "broker.toml"
    config.write_text(f'listeners = "SASL_SSL://127.0.0.1:0"\nssl.certificate = "{pki.certificate}"\n'
                      'inter.broker.sasl.username = "b"\ninter.broker.sasl.password = "p"\n')
    result = run_broker_cli(tmp_path, config)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert "SASL_SSL listener needs ssl.key" in line


def test_a_certificate_that_is_not_pem_fails_startup_with_one_line(tmp_path: Path, pki: Pki) -> None:
    bogus = tmp_path / "bogus.pem"
    bogus.write_text("not a certificate\n")
    config = tmp_path / "broker.toml"
    config.write_text(f'listeners = "SSL://127.0.0.1:0"\nssl.certificate = "{bogus}"\nssl.key = "{pki.key}"\n')
    result = run_broker_cli(tmp_path, config)
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert "unusable" in line and str(bogus) in line
