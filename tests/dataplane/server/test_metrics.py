"""The Prometheus endpoint of a real broker, scraped after producing."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dataplane.server.metrics import BrokerMetrics, response_error
from dataplane.storage import LogManager
from tests.support.broker import logged_broker

RECORDS = 120


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = answer.read().decode()
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def test_metrics_after_producing(tmp_path: Path) -> None:
    from kafka import KafkaProducer

    broker = logged_broker(tmp_path, metrics=True)
    broker.start()
    try:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False, acks="all",
                                 linger_ms=0, max_in_flight_requests_per_connection=1)
        for i in range(RECORDS):
            producer.send("scraped", value=b"v%d" % i).get(timeout=30)
        samples = scrape(broker.metrics_port)
        assert samples[("sluice_bytes_in_total", ())] > 0
        assert samples[("sluice_bytes_out_total", ())] > 0
        assert samples[("sluice_requests_total", (("api", "Produce"), ("error", "NONE")))] == RECORDS
        assert samples[("sluice_request_latency_seconds_count", (("api", "Produce"),))] == RECORDS
        assert samples[("sluice_connections_open", ())] >= 1
        partition = (("partition", "0"), ("topic", "scraped"))
        assert samples[("sluice_log_end_offset", partition)] == RECORDS
        assert samples[("sluice_log_start_offset", partition)] == 0
        assert samples[("sluice_log_size_bytes", partition)] > 0
        producer.close()
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/nope", timeout=10)
        assert missing.value.code == 404
    finally:
        broker.stop()


def test_response_error_reads_top_level_then_partitions() -> None:
    from kio.index import load_response_schema
    from kio.schema.errors import ErrorCode as WireError

    from dataplane.protocol.answers import ZERO
    from dataplane.protocol.build import build

    def produce_response(code: WireError) -> object:
        return build(load_response_schema(0, 9), {"throttle_time": ZERO, "responses": [{"name": "t",
                     "partition_responses": [{"index": 0, "error_code": code, "base_offset": -1,
                                              "log_append_time": None, "log_start_offset": -1,
                                              "record_errors": (), "error_message": None}]}]})

    assert response_error(produce_response(WireError.none)) == 0
    assert response_error(produce_response(WireError.unknown_topic_or_partition)) == 3
    assert response_error(None) == 0


def test_broker_metrics_registry_is_private(tmp_path: Path) -> None:
    import dataplane.server.handlers  # noqa: F401  (fills the API registry that names the label)

    one, two = BrokerMetrics(LogManager(tmp_path / "a")), BrokerMetrics(LogManager(tmp_path / "b"))
    one.observe_request(0, 0, 0.001, 100, 20)
    one.connection_opened()
    assert b'sluice_requests_total{api="Produce",error="NONE"} 1.0' in one.exposition()
    assert b"sluice_requests_total{" not in two.exposition()
