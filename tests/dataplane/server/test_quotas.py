"""Client quotas on a real broker: the admin APIs through kafka-python's own codec, byte rates held with real
confluent-kafka producers and consumers, and connection caps.

Quota windows are short here (``quota.window.size.seconds = 0.2``, 11 samples, so a 2.2 s window) to keep the
tests to a few seconds; the arithmetic is Kafka's whatever the window.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest, DescribeClientQuotasRequest

from tests.dataplane.server.test_security import USERS, sasl_config_file, seed_credentials
from tests.support.broker import BrokerProcess
from tests.support.wire import KafkaWire

pytestmark = pytest.mark.xdist_group("quotas")

QUIET = {"log_level": 0, "logger": lambda *args: None}
INVALID_REQUEST, UNSUPPORTED_VERSION, CLUSTER_AUTHORIZATION_FAILED = 42, 35, 31
WINDOW = ["--quota-window-num", "11", "--quota-window-size-seconds", "0.2"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("quotas")
    process = BrokerProcess(root / "data", f"test-{uuid.uuid4().hex[:12]}", extra_args=WINDOW)
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="quota-admin")
    try:
        yield client
    finally:
        client.close()


def send(admin: KafkaAdminClient, request: Any) -> Any:
    """A request through kafka-python's admin client: its codec, its connection, its version negotiation."""
    manager: Any = admin._manager  # kafka-python has the messages but no quota methods
    return manager.run(manager.send, request)


def alter(admin: KafkaAdminClient, entity: dict[str, str | None], ops: dict[str, float | None], *,
          validate_only: bool = False) -> tuple[int, str | None]:
    """Set (value) or remove (None) quota keys on one entity; (error code, message) of its entry."""
    request = AlterClientQuotasRequest(
        entries=[AlterClientQuotasRequest.EntryData(
            entity=[AlterClientQuotasRequest.EntryData.EntityData(entity_type=t, entity_name=n)
                    for t, n in entity.items()],
            ops=[AlterClientQuotasRequest.EntryData.OpData(key=k, value=v or 0.0, remove=v is None)
                 for k, v in ops.items()])],
        validate_only=validate_only)
    [entry] = send(admin, request).entries
    return entry.error_code, entry.error_message


Described = dict[tuple[tuple[str, str | None], ...], dict[str, float]]


def describe(admin: KafkaAdminClient, components: list[tuple[str, int, str | None]],
             strict: bool = False) -> tuple[int, str | None, Described]:
    request = DescribeClientQuotasRequest(
        components=[DescribeClientQuotasRequest.ComponentData(entity_type=t, match_type=m, match=n)
                    for t, m, n in components], strict=strict)
    response = send(admin, request)
    found = {tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)):
             {v.key: v.value for v in entry.values} for entry in response.entries or []}
    return response.error_code, response.error_message, found


# ---------------------------------------------------------------------- the admin APIs


def test_quotas_are_set_described_and_removed(admin: KafkaAdminClient) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    assert alter(admin, {"user": user}, {"producer_byte_rate": 1024.0, "request_percentage": 12.5}) == (0, None)
    assert alter(admin, {"user": user, "client-id": None}, {"consumer_byte_rate": 2048.0}) == (0, None)
    code, _, found = describe(admin, [("user", 0, user)])
    assert code == 0
    assert found == {(("user", user),): {"producer_byte_rate": 1024.0, "request_percentage": 12.5},
                     (("client-id", None), ("user", user)): {"consumer_byte_rate": 2048.0}}
    assert describe(admin, [("user", 0, user)], strict=True)[2] == {
        (("user", user),): {"producer_byte_rate": 1024.0, "request_percentage": 12.5}}
    assert alter(admin, {"user": user}, {"producer_byte_rate": None}) == (0, None)
    assert alter(admin, {"user": user, "client-id": None}, {"consumer_byte_rate": None}) == (0, None)
    assert describe(admin, [("user", 0, user)])[2] == {(("user", user),): {"request_percentage": 12.5}}


def test_validate_only_changes_nothing(admin: KafkaAdminClient) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    assert alter(admin, {"user": user}, {"producer_byte_rate": 1024.0}, validate_only=True) == (0, None)
    assert describe(admin, [("user", 0, user)])[2] == {}


@pytest.mark.parametrize(("entity", "ops", "message"), [
    ({"user": "x"}, {"bogus_rate": 5.0}, "Invalid configuration key bogus_rate"),
    ({"user": "x"}, {"producer_byte_rate": -5.0}, "must be greater than 0"),
    ({"user": "x"}, {"producer_byte_rate": 1.5}, "not an integer"),
    ({"group": "x"}, {"producer_byte_rate": 5.0}, "Unhandled client quota entity type: group"),
    ({}, {"producer_byte_rate": 5.0}, "Invalid empty client quota entity"),
    ({"ip": "10.0.0.1", "user": "x"}, {"connection_creation_rate": 5.0}, "IP entity should not be combined"),
    ({"ip": "not-an-address"}, {"connection_creation_rate": 5.0}, "not a valid IP"),
])
def test_bad_alterations_are_invalid_requests(admin: KafkaAdminClient, entity: dict[str, str | None],
                                              ops: dict[str, float | None], message: str) -> None:
    code, text = alter(admin, entity, ops)
    assert code == INVALID_REQUEST
    assert text is not None and message in text
    assert describe(admin, [("user", 0, "x")])[2] == {}


def test_bad_filters_are_refused(admin: KafkaAdminClient) -> None:
    code, message, _ = describe(admin, [("user", 0, None)])
    assert code == INVALID_REQUEST and message is not None and "MATCH_TYPE_EXACT" in message
    code, message, _ = describe(admin, [("group", 1, None)])
    assert code == UNSUPPORTED_VERSION and message == "Unknown entity type group"


# ---------------------------------------------------------------------- byte rates held


def _delivered_rate(broker: BrokerProcess, client_id: str, *, warmup: float, measure: float) -> float:
    """Bytes/s acknowledged to a producer sending as fast as it can, measured after ``warmup`` seconds."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": client_id, "linger.ms": 5,
                         "batch.size": 32 * 1024, "queue.buffering.max.kbytes": 4096, **QUIET})
    acked: list[tuple[float, int]] = []

    def delivered(error: Any, message: Any) -> None:
        if error is None:
            acked.append((time.monotonic(), len(message.value())))
    payload = b"x" * 1000
    start = time.monotonic()
    while time.monotonic() - start < warmup + measure:
        try:
            producer.produce("held", payload, on_delivery=delivered)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    producer.flush(30)
    window = [size for at, size in acked if start + warmup <= at < start + warmup + measure]
    return sum(window) / measure


def _assert_held(rate: float, quota: float) -> None:
    """At most 10 % over the quota (the guarantee), and not held far below it (over-throttling). The floor has a
    margin because a loaded machine can slow the client itself; the ceiling has none."""
    assert rate <= 1.10 * quota, f"held at {rate:.0f} B/s against a quota of {quota:.0f}: more than 10 % over"
    assert rate >= 0.75 * quota, f"held at {rate:.0f} B/s against a quota of {quota:.0f}: throttled far below it"


def test_a_producer_at_ten_times_its_quota_is_held_at_most_ten_percent_over(broker: BrokerProcess,
                                                                      admin: KafkaAdminClient) -> None:
    quota = 1_000_000.0
    unthrottled = _delivered_rate(broker, "free-producer", warmup=0.5, measure=1.0)
    assert unthrottled >= 10 * quota, f"the test needs a producer able to offer 10x the quota, got {unthrottled}"
    assert alter(admin, {"client-id": "held-producer"}, {"producer_byte_rate": quota}) == (0, None)
    rate = _delivered_rate(broker, "held-producer", warmup=2.5, measure=3.0)
    print(f"producer: unthrottled {unthrottled:.0f} B/s, held {rate:.0f} B/s, quota {quota:.0f} B/s")
    _assert_held(rate, quota)


def test_a_consumer_is_held_at_most_ten_percent_over_its_quota(broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    quota = 1_000_000.0
    burst = quota * 11 * 0.2  # the token bucket starts full: a whole quota window's worth (WINDOW)
    topic = f"fill-{uuid.uuid4().hex[:8]}"
    creator = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET})
    creator.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "filler", "linger.ms": 5, **QUIET})
    records = 16_000
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, b"y" * 1000)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(60) == 0
    assert alter(admin, {"client-id": "held-consumer"}, {"consumer_byte_rate": quota}) == (0, None)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "client.id": "held-consumer",
                         "group.id": f"g-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, **QUIET})
    consumer.subscribe([topic])
    # The window starts 2.5 s after the first record, and not before the consumer has spent the bucket's initial
    # burst (received it plus what the quota refilled since): a client slowed by a busy machine may still be
    # spending it seconds later, and would be measured unthrottled.
    warmup, measure = 2.5, 3.0
    received: list[tuple[float, int]] = []
    first: float | None = None
    spent_at: float | None = None
    total = 0
    deadline = time.monotonic() + 60
    try:
        while spent_at is None or first is None or time.monotonic() - max(first + warmup, spent_at) < measure:
            assert time.monotonic() < deadline, f"the consumer never spent its burst ({total} bytes received)"
            for message in consumer.consume(500, 0.1):
                if message.error() is None:
                    now = time.monotonic()
                    first = first or now
                    total += len(message.value())
                    received.append((now, len(message.value())))
                    if spent_at is None and total >= burst + quota * (now - first):
                        spent_at = now
    finally:
        consumer.close()
    assert spent_at is not None and first is not None
    start = max(first + warmup, spent_at)
    window = [size for at, size in received if start <= at < start + measure]
    assert total < records * 1000, "the topic ran dry: the test is void"
    rate = sum(window) / measure
    print(f"consumer: burst spent {spent_at - first:.1f} s after its first record; held {rate:.0f} B/s, "
          f"quota {quota:.0f} B/s")
    _assert_held(rate, quota)


# ---------------------------------------------------------------------- connections


def _closed_at_once(port: int) -> bool:
    """A fresh connection the broker closes without answering (it answers ApiVersions otherwise)."""
    from kio.schema.api_versions.v3.request import ApiVersionsRequest
    try:
        with KafkaWire(port, timeout=10) as wire:
            wire.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    except (ConnectionError, OSError):
        return True
    return False


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker of the test's own: every connection to it is one the test made."""
    process = BrokerProcess(tmp_path / "data", f"test-{uuid.uuid4().hex[:12]}", extra_args=WINDOW)
    process.start()
    try:
        yield process
    finally:
        process.stop()


def test_anonymous_connections_are_capped(fresh: BrokerProcess) -> None:
    broker = fresh
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="quota-admin")
    # The admin client holds one ANONYMOUS connection (this PLAINTEXT listener authenticates nobody).
    assert alter(admin, {"user": "ANONYMOUS"}, {"max_connections": 3.0}) == (0, None)
    try:
        held = [KafkaWire(broker.port) for _ in range(2)]
        assert _closed_at_once(broker.port)
        broker.wait_for("Too many connections for principal User:ANONYMOUS: 3 open, at most 3 allowed")
        held.pop().close()
        deadline = time.monotonic() + 10
        while _closed_at_once(broker.port):  # the close reaches the broker a moment later
            assert time.monotonic() < deadline, "a closed connection's slot was not given back"
        for wire in held:
            wire.close()
    finally:
        admin.close()


def _sasl_broker(factory: pytest.TempPathFactory, name: str, extra_config: str = "") -> Iterator[BrokerProcess]:
    root = factory.mktemp(name)
    config: Path = sasl_config_file(root)
    config.write_text(config.read_text() + extra_config)
    process = BrokerProcess(root / "data", f"test-{uuid.uuid4().hex[:12]}",
                           extra_args=["--config", str(config), *WINDOW])
    seed_credentials(process.cluster_id)
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from _sasl_broker(tmp_path_factory, "secure-quotas")


@pytest.fixture(scope="module")
def capped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker whose every SASL credential may hold two connections."""
    yield from _sasl_broker(tmp_path_factory, "capped", "max.connections.per.credential = 2\n")


def _third_login_is_refused(port: int, logins: tuple[str, str, str], expected: str) -> None:
    """Two logins as alice (with ``logins``' first two mechanisms) hold her two connections; the third is refused
    with ``expected`` and bob, another credential and principal, still logs in."""
    first, second = KafkaWire(port), KafkaWire(port)
    try:
        first.authenticate(logins[0], "alice", USERS["alice"])
        second.authenticate(logins[1], "alice", USERS["alice"])
        with KafkaWire(port) as third, pytest.raises(PermissionError) as refused:
            third.authenticate(logins[2], "alice", USERS["alice"])
        assert str(refused.value) == expected
        with KafkaWire(port) as bob:  # another principal is not affected
            bob.authenticate("PLAIN", "bob", USERS["bob"])
    finally:
        first.close()
        second.close()


def test_a_principal_over_its_connection_cap_is_told_why(secure: BrokerProcess) -> None:
    with KafkaWire(secure.port, client_id="admin") as admin_wire:
        admin_wire.authenticate("PLAIN", "admin", USERS["admin"])
        from kio.schema.alter_client_quotas.v1.request import AlterClientQuotasRequest as KioAlter
        from kio.schema.alter_client_quotas.v1.request import EntityData, EntryData, OpData
        from kio.static.primitive import f64
        answer = admin_wire.call(KioAlter(entries=(EntryData(entity=(EntityData(entity_type="user",
                                                                                entity_name="alice"),),
                                                             ops=(OpData(key="max_connections", value=f64(2.0),
                                                                         remove=False),)),), validate_only=False))
        assert answer.entries[0].error_code == 0
    _third_login_is_refused(secure.port, ("SCRAM-SHA-256", "PLAIN", "PLAIN"),
                            "policy_violation: Too many connections for principal User:alice: 2 open, "
                            "at most 2 allowed (max_connections quota)")


def test_a_credential_over_its_connection_cap_is_told_why(capped: BrokerProcess) -> None:
    _third_login_is_refused(capped.port, ("SCRAM-SHA-512", "PLAIN", "SCRAM-SHA-256"),
                            "policy_violation: Too many connections for credential alice: 2 open, "
                            "at most 2 allowed (max.connections.per.credential)")


def test_quota_admin_needs_cluster_rights(secure: BrokerProcess) -> None:
    from kio.schema.describe_client_quotas.v1.request import ComponentData, DescribeClientQuotasRequest
    from kio.static.primitive import i8
    with KafkaWire(secure.port) as wire:
        wire.authenticate("PLAIN", "bob", USERS["bob"])
        answer = wire.call(DescribeClientQuotasRequest(
            components=(ComponentData(entity_type="user", match_type=i8(1), match=None),), strict=False))
        assert answer.error_code == CLUSTER_AUTHORIZATION_FAILED


def test_the_projects_admin_client_reads_and_writes_quotas(broker: BrokerProcess) -> None:
    """``ClusterAdmin`` (what the control plane reconciles with): set, read back, refuse, remove."""
    from dataplane.client.admin import ClusterAdmin
    user = f"u-{uuid.uuid4().hex[:8]}"
    alice: Any = (("user", user),)
    defaults: Any = (("client-id", None), ("user", user))
    with ClusterAdmin(broker.bootstrap, timeout=10) as admin:
        assert admin.alter_client_quotas({alice: {"producer_byte_rate": 2048.0},
                                          defaults: {"consumer_byte_rate": 4096.0}}) == {alice: None, defaults: None}
        found = admin.client_quotas()
        assert found[alice] == {"producer_byte_rate": 2048.0} and found[defaults] == {"consumer_byte_rate": 4096.0}
        refused = admin.alter_client_quotas({alice: {"bogus": 1.0}})[alice]
        assert refused is not None and refused.code == "INVALID_REQUEST" and "bogus" in refused.message
        assert admin.alter_client_quotas({alice: {"producer_byte_rate": None}, defaults: {"consumer_byte_rate": None}},
                                         validate_only=True) == {alice: None, defaults: None}
        assert alice in admin.client_quotas()
        admin.alter_client_quotas({alice: {"producer_byte_rate": None}, defaults: {"consumer_byte_rate": None}})
        assert alice not in admin.client_quotas() and defaults not in admin.client_quotas()


def test_a_throttled_response_says_so_and_the_channel_is_muted(fresh: BrokerProcess) -> None:
    """KIP-219 on the wire: the over-quota Produce is answered at once with its throttle time, and the next
    request on that connection is read only once the throttle has passed (another connection is not held)."""
    import datetime

    from kio.schema.api_versions.v3.request import ApiVersionsRequest
    from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
    from kio.schema.types import TopicName
    from kio.static.primitive import i16, i32, i32Timedelta

    from dataplane.protocol.records import Record, build_batch

    admin = KafkaAdminClient(bootstrap_servers=fresh.bootstrap, client_id="quota-admin")
    try:
        # 10 kB/s: the bucket holds 22 kB (11 x 0.2 s), so 100 kB leaves a debt of 78 kB -- 7.8 s, capped at 2.2 s.
        assert alter(admin, {"client-id": "muted"}, {"producer_byte_rate": 10_000.0}) == (0, None)
    finally:
        admin.close()
    batch = build_batch([Record(i, 1000, None, b"m" * 1000) for i in range(100)])
    produce = ProduceRequest(transactional_id=None, acks=i16(1),
                             timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
                             topic_data=(TopicProduceData(name=TopicName("muted"), partition_data=(
                                 PartitionProduceData(index=i32(0), records=batch),)),))
    versions = ApiVersionsRequest(client_software_name="t", client_software_version="1")
    with KafkaWire(fresh.port, client_id="muted") as wire, KafkaWire(fresh.port, client_id="other") as other:
        wire.call(produce)  # auto-creates the topic and spends the burst
        answer = wire.call(produce)
        throttle = answer.throttle_time.total_seconds()
        assert 2.0 <= throttle <= 2.2, throttle
        sent = time.monotonic()
        wire.send(versions)
        other.call(versions)  # answered while "muted" waits: the mute is that connection's alone
        assert time.monotonic() - sent < throttle
        wire.receive()
        assert time.monotonic() - sent >= throttle - 0.05  # not read before the throttle ended


def test_request_percentage_throttles_any_request(fresh: BrokerProcess) -> None:
    """KIP-124: handler time, not bytes. A tiny share of one thread is used up by a few Metadata requests."""
    from kio.schema.metadata.v12.request import MetadataRequest

    admin = KafkaAdminClient(bootstrap_servers=fresh.bootstrap, client_id="quota-admin")
    try:
        assert alter(admin, {"client-id": "busy"}, {"request_percentage": 0.01}) == (0, None)
    finally:
        admin.close()
    request = MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    with KafkaWire(fresh.port, client_id="busy") as wire:
        throttles = [wire.call(request).throttle_time.total_seconds() for _ in range(3)]
    assert throttles[-1] > 0, throttles
    with KafkaWire(fresh.port, client_id="idle") as wire:  # a client id without the quota is not held
        assert [wire.call(request).throttle_time.total_seconds() for _ in range(5)] == [0.0] * 5
