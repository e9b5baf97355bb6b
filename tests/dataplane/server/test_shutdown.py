"""SIGTERM while producers and long-poll fetches are busy: prompt exit, nothing acknowledged lost."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from pathlib import Path

from tests.dataplane.server.test_bad_input import api_versions_v0
from tests.dataplane.server.test_metrics import scrape
from tests.support.broker import logged_broker

TOPIC = "busy"


def test_sigterm_under_load_is_prompt_and_loses_no_acknowledged_record(tmp_path: Path) -> None:
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    broker = logged_broker(tmp_path, metrics=True)
    broker.start()
    acked: dict[int, bytes] = {}
    failed: list[object] = []
    stop = threading.Event()

    def delivered(err: object, msg: object) -> None:
        if err is None:
            acked[msg.offset()] = msg.value()  # type: ignore[attr-defined]
        else:
            failed.append(err)

    def produce() -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 1,
                             "message.timeout.ms": 4000, "reconnect.backoff.max.ms": 200})
        i = 0
        while not stop.is_set():
            try:
                producer.produce(TOPIC, value=b"record-%d" % i, on_delivery=delivered)
                i += 1
            except BufferError:
                producer.poll(0.01)
            producer.poll(0)
        producer.flush(10)

    def consume() -> None:
        # A huge fetch.min.bytes makes every fetch wait out fetch.wait.max.ms: a long poll is always in flight.
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                             "enable.auto.commit": False, "fetch.wait.max.ms": 5000, "fetch.min.bytes": 50_000_000})
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        while not stop.is_set():
            with contextlib.suppress(KafkaException):
                consumer.poll(0.2)
        consumer.close()

    producer_thread = threading.Thread(target=produce)
    producer_thread.start()
    deadline = time.monotonic() + 60
    while len(acked) < 2000 and time.monotonic() < deadline:
        time.sleep(0.05)  # polling the delivery count, not synchronising
    assert len(acked) >= 2000, f"only {len(acked)} records acknowledged: {failed[:3]}"
    consumer_thread = threading.Thread(target=consume)
    consumer_thread.start()
    try:
        long_poll = ("sluice_requests_in_flight", (("api", "Fetch"),))
        while scrape(broker.metrics_port).get(long_poll, 0) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)  # polling for the consumer's first long poll to be parked
        assert scrape(broker.metrics_port).get(long_poll, 0) >= 1
        started = time.monotonic()
        code = broker.stop(signal.SIGTERM, timeout=10)
        took = time.monotonic() - started
    finally:
        stop.set()
        producer_thread.join(30)
        consumer_thread.join(30)
    assert code == 0, broker.output()[-3000:]
    assert took < 10
    assert "stopped cleanly" in broker.output()
    assert "Traceback" not in broker.output(), broker.output()[-3000:]
    assert (broker.data_dir / f"{TOPIC}-0" / ".clean_shutdown").exists()

    broker.start()
    try:
        reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
        reader.assign([TopicPartition(TOPIC, 0, 0)])
        last = max(acked)
        stored: dict[int, bytes] = {}
        deadline = time.monotonic() + 60
        while last not in stored and time.monotonic() < deadline:
            message = reader.poll(1)
            if message is not None and message.error() is None:
                stored[message.offset()] = message.value()
        reader.close()
    finally:
        broker.stop()
    missing = [offset for offset, value in acked.items() if stored.get(offset) != value]
    assert not missing, f"{len(missing)} acknowledged records lost or changed, first {missing[:5]}"


def test_a_request_that_never_finishes_is_cancelled_after_the_grace_period(tmp_path: Path) -> None:
    """The bound itself: an idle connection goes at once, a stuck request goes after the grace period."""
    import asyncio
    import socket

    from dataplane.security.quotas import Window
    from dataplane.server import handlers  # noqa: F401  (registers the APIs the connection looks up)
    from dataplane.server.admission import Admission, AdmissionLimits
    from dataplane.server.connection import Listener
    from dataplane.server.quotas import QuotaManager

    class StuckBroker:
        """Just what Listener and Connection touch; its one request never finishes."""

        stopping = False
        quotas = QuotaManager(Window())
        admission = Admission(AdmissionLimits())

        class config:
            max_request_bytes = 1 << 20
            sasl_server_max_receive_size = 512 * 1024
            fetch_transfer = "copy"

        class metrics:
            @staticmethod
            def connection_opened() -> None: ...
            @staticmethod
            def connection_closed() -> None: ...

        async def handle(self, request: object, context: object) -> None:
            await asyncio.Event().wait()

        def forget(self, session: object) -> None: ...

    async def run() -> tuple[float, int]:
        listener = Listener(StuckBroker(), "127.0.0.1", 0)  # type: ignore[arg-type]
        listener.start()
        loop = asyncio.get_running_loop()
        idle = socket.create_connection(listener.address)
        stuck = socket.create_connection(listener.address)
        stuck.sendall(api_versions_v0(1))
        deadline = loop.time() + 30
        while len(listener.connections) < 2 or not any(c.busy for c in listener.connections.values()):
            assert loop.time() < deadline, "connections not established"
            await asyncio.sleep(0.01)
        started = loop.time()
        await listener.close(grace=0.2)
        took = loop.time() - started
        idle.close()
        stuck.close()
        return took, len(listener.connections)

    took, left = asyncio.run(run())
    assert left == 0
    assert 0.2 <= took < 2
