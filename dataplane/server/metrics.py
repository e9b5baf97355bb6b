"""Prometheus metrics for one broker, and the small HTTP endpoint that serves them.

The metrics live in their own ``CollectorRegistry`` (not prometheus_client's global
one) so several brokers in one process, or tests, never share counters. Request
counters are cheap enough for the hot path: label children are cached per
(api, error), so an observation is a dict lookup and three locked adds.
Partition gauges are not kept up to date on every append; a custom collector reads
the logs at scrape time, which costs nothing between scrapes.

The endpoint is a minimal asyncio HTTP/1.0 responder inside the broker's own event
loop: it starts and stops with the broker, needs no thread, and the exposition is
rendered in a worker thread so a scrape of many partitions never stalls requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from dataplane.protocol.errors import ErrorCode
from dataplane.server.apis import api_name
from dataplane.storage import LogManager

log = logging.getLogger(__name__)

# What generate_latest writes (underscore-escaped names), and what every Prometheus version reads.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Kafka requests range from ~50 µs (ApiVersions) to a 500 ms long poll and beyond.
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                   5.0, 10.0, 30.0)


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def response_error(response: Any) -> int:
    """The error a response reports: its top-level ``error_code``, else the first non-zero
    one among its topics' partitions (Produce, Fetch, ListOffsets, CreateTopics have no
    top-level code), else 0. Only two levels are walked, so it stays cheap.
    """
    if response is None:
        return 0
    top = getattr(response, "error_code", None)
    if top is not None and int(top) != 0:
        return int(top)
    for level_one in _children(response):
        code = getattr(level_one, "error_code", None)
        if code is not None and int(code) != 0:
            return int(code)
        for level_two in _children(level_one):
            code = getattr(level_two, "error_code", None)
            if code is not None and int(code) != 0:
                return int(code)
    return 0


def _children(entity: Any) -> Iterator[Any]:
    """Entities held in the tuple-valued fields of a kio entity."""
    if not dataclasses.is_dataclass(entity):
        return
    for field in dataclasses.fields(entity):
        value = getattr(entity, field.name)
        if isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
            yield from value


class PartitionCollector(Collector):
    """Per-partition log size, log start offset and log end offset, read at scrape time."""

    def __init__(self, manager: LogManager) -> None:
        self._manager = manager

    def collect(self) -> Iterator[Metric]:
        labels = ["topic", "partition"]
        size = GaugeMetricFamily("sluice_log_size_bytes", "Bytes of a partition's log on disk.", labels=labels)
        start = GaugeMetricFamily("sluice_log_start_offset", "First offset a partition's log holds.", labels=labels)
        end = GaugeMetricFamily("sluice_log_end_offset", "Offset the next record appended will get.",
                                labels=labels)
        local = GaugeMetricFamily("sluice_local_log_size_bytes", "Bytes of a partition's log on local disk.",
                                  labels=labels)
        remote = GaugeMetricFamily("sluice_remote_log_size_bytes",
                                   "Bytes of a partition's log in the remote tier (tiered topics).", labels=labels)
        for tp in self._manager.partitions():
            partition_log = self._manager.get_log(tp.topic, tp.partition)
            if partition_log is None:  # deleted since partitions() was read
                continue
            values = [tp.topic, str(tp.partition)]
            size.add_metric(values, partition_log.size_in_bytes)
            start.add_metric(values, partition_log.log_start_offset)
            end.add_metric(values, partition_log.log_end_offset)
            if partition_log.config.remote_storage:
                local.add_metric(values, partition_log.size_in_bytes)
                remote.add_metric(values, partition_log.remote_size_bytes)
        yield from (size, start, end, local, remote)


class BrokerMetrics:
    """What the connection code reports, plus the partition collector. Thread-safe."""

    def __init__(self, manager: LogManager) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.bytes_in = Counter("sluice_bytes_in", "Request bytes received, framing included.",
                                registry=self.registry)
        self.bytes_out = Counter("sluice_bytes_out", "Response bytes sent, framing included.",
                                 registry=self.registry)
        self.requests = Counter("sluice_requests", "Requests answered, by API and the error the response reports.",
                                ["api", "error"], registry=self.registry)
        self.latency = Histogram("sluice_request_latency_seconds",
                                 "From a whole request frame read to its response handed to the socket.",
                                 ["api"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.in_flight = Gauge("sluice_requests_in_flight", "Requests being handled (a parked long poll counts).",
                               ["api"], registry=self.registry)
        self.connections = Gauge("sluice_connections_open", "Client connections open.", registry=self.registry)
        self.registry.register(PartitionCollector(manager))
        self._request_children: dict[tuple[int, int], tuple[Any, Any]] = {}
        self._in_flight_children: dict[int, Any] = {}

    def observe_request(self, api_key: int, error: int, seconds: float, bytes_in: int, bytes_out: int) -> None:
        children = self._request_children.get((api_key, error))
        if children is None:
            name = api_name(api_key)
            children = (self.requests.labels(name, _error_name(error)), self.latency.labels(name))
            self._request_children[(api_key, error)] = children
        counter, histogram = children
        counter.inc()
        histogram.observe(seconds)
        self.bytes_in.inc(bytes_in)
        if bytes_out:
            self.bytes_out.inc(bytes_out)

    def request_started(self, api_key: int) -> None:
        self._in_flight(api_key).inc()

    def request_finished(self, api_key: int) -> None:
        self._in_flight(api_key).dec()

    def _in_flight(self, api_key: int) -> Any:
        child = self._in_flight_children.get(api_key)
        if child is None:
            child = self._in_flight_children[api_key] = self.in_flight.labels(api_name(api_key))
        return child

    def connection_opened(self) -> None:
        self.connections.inc()

    def connection_closed(self) -> None:
        self.connections.dec()

    def exposition(self) -> bytes:
        """The text exposition format (version 0.0.4)."""
        return generate_latest(self.registry)


# ---------------------------------------------------------------------- the /metrics endpoint

_READ_TIMEOUT = 10.0


async def serve_metrics(metrics: BrokerMetrics, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answer one HTTP request: ``GET /metrics`` (or ``/``) with the exposition, anything else 404/405."""
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _READ_TIMEOUT)
        method, _, rest = head.partition(b" ")
        path = rest.split(b" ", 1)[0].split(b"?", 1)[0]
        if method not in (b"GET", b"HEAD"):
            status, content_type, body = "405 Method Not Allowed", "text/plain", b"only GET\n"
        elif path not in (b"/metrics", b"/"):
            status, content_type, body = "404 Not Found", "text/plain", b"try /metrics\n"
        else:
            status, content_type = "200 OK", CONTENT_TYPE
            body = await asyncio.to_thread(metrics.exposition)
        writer.write(f"HTTP/1.0 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                     "Connection: close\r\n\r\n".encode())
        if method != b"HEAD":
            writer.write(body)
        await writer.drain()
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
        pass  # a scraper that went away or sent junk: nothing to answer
    except Exception:
        log.exception("metrics request failed")
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()
