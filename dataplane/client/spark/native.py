"""Fetch one offset range with the project's own Kafka client and the compiled decoder (the default engine).

Why: with librdkafka (``fetch.py``) most of a Spark task went into building one Python message per record and
reading it back per column. Here a task speaks Fetch itself over a ``Wire`` (the same security settings as
librdkafka: ``security.protocol``, ``sasl.*``, ``ssl.*``, a static OAUTHBEARER token) and
``dataplane.protocol._columns`` turns each response's record batches into Arrow buffers in one C pass.

Metadata finds the partition's leader; Fetch (v12, topics by name) reads from it with one request in flight
while Spark consumes the previous answer. Leadership errors and lost connections ask Metadata again, until
``poll_timeout_ms`` passes without progress. Errors read as the librdkafka engine's: an offset below the log
start or an end the partition no longer reaches is data loss (``failOnDataLoss``), an unknown topic or a
missing READ right a ``SparkSourceError``. ``isolation.level`` is librdkafka's default, read_committed, unless
``kafka.isolation.level`` says otherwise. Not thread-safe: one call per task.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from kio.schema.errors import ErrorCode as WireError
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from dataplane.client.spark.columns import to_record_batch
from dataplane.client.spark.options import DataLossError, SparkSourceError
from dataplane.client.spark.plan import OffsetRange
from dataplane.client.wire import PROTOCOLS, AdminError, BrokerInfo, Deadline, Wire, WireSettings
from dataplane.protocol.compiled import columns_module
from dataplane.security.oauthbearer import OAUTHBEARER
from dataplane.security.sasl import ALL_MECHANISMS

decode_columns = columns_module().decode_columns  # ImportError here: fetch.py falls back to librdkafka

_FETCH, _METADATA = 1, 3
_MAX_WAIT_MS = 500  # how long the broker may hold a fetch with nothing to send
_REQUEST_GRACE = 10.0  # seconds a request may take beyond the broker's wait
_BACKOFF = 0.1  # seconds between two attempts after a leadership error or a lost connection
# The leader moved, or is moving: ask Metadata again.
_LEADERSHIP = frozenset({WireError.not_leader_or_follower, WireError.leader_not_available,
                         WireError.fenced_leader_epoch, WireError.unknown_leader_epoch,
                         WireError.replica_not_available, WireError.kafka_storage_error,
                         WireError.offset_not_available})
_DEFAULTS = {"max.partition.fetch.bytes": 4 * 1024 * 1024, "fetch.max.bytes": 64 * 1024 * 1024}


def speaks(client: Mapping[str, str]) -> bool:
    """Whether this engine can authenticate as ``client`` asks (else the librdkafka engine is used)."""
    protocol = str(client.get("security.protocol", "plaintext")).lower()
    if protocol not in PROTOCOLS:
        return False
    if not protocol.startswith("sasl_"):
        return True
    mechanism = str(client.get("sasl.mechanism", client.get("sasl.mechanisms", "GSSAPI"))).upper()
    return mechanism in ALL_MECHANISMS or (mechanism == OAUTHBEARER and "sasl.oauthbearer.token" in client)


def _isolation(client: Mapping[str, str]) -> int:
    level = str(client.get("isolation.level", "read_committed")).strip().lower()
    if level not in ("read_committed", "read_uncommitted"):
        raise SparkSourceError(f"option 'kafka.isolation.level' must be read_committed or read_uncommitted, "
                               f"got {level!r}")
    return 1 if level == "read_committed" else 0


def _bootstrap(client: Mapping[str, str]) -> list[BrokerInfo]:
    brokers = []
    for address in str(client["bootstrap.servers"]).split(","):
        host, _, port = address.strip().rpartition(":")
        if host and port.isdigit():
            brokers.append(BrokerInfo(-1, host.strip("[]"), int(port), None))
    if not brokers:
        raise SparkSourceError(f"option 'kafka.bootstrap.servers' names no host:port: {client['bootstrap.servers']!r}")
    return brokers


class _Partition:
    """Connections for reading one partition: Metadata to find its leader, then a Wire to the leader."""

    def __init__(self, client: Mapping[str, str], r: OffsetRange, timeout: float) -> None:
        self.settings = WireSettings(client, client_id=str(client.get("client.id", "sluice-spark")))
        self.bootstrap = _bootstrap(client)
        self.range = r
        self.where = f"{r.topic}-{r.partition}"
        self.timeout = timeout
        self.wire: Wire | None = None

    def close(self) -> None:
        if self.wire is not None:
            self.wire.close()
            self.wire = None

    def leader(self) -> Wire:
        """A connection to the partition's leader (Metadata asked of the bootstrap brokers in turn)."""
        if self.wire is not None:
            return self.wire
        failure: AdminError | None = None
        for broker in self.bootstrap:
            try:
                wire = self.settings.connect(broker, Deadline(self.timeout))
            except AdminError as exc:
                if not exc.retriable:
                    raise
                failure = exc
                continue
            try:
                found = self._leader_of(wire)
            except BaseException:
                wire.close()
                raise
            if found is None:  # no leader at the moment
                wire.close()
                raise AdminError("LEADER_NOT_AVAILABLE", f"{self.where} has no leader", retriable=True)
            if (found.host, found.port) == (broker.host, broker.port):
                self.wire = wire
            else:
                wire.close()
                self.wire = self.settings.connect(found, Deadline(self.timeout))
            return self.wire
        assert failure is not None
        raise failure

    def _leader_of(self, wire: Wire) -> BrokerInfo | None:
        wire.version(_METADATA, (12,))
        r = self.range
        answer = wire.call(MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name=TopicName(r.topic)),),
                                           allow_auto_topic_creation=False,
                                           include_topic_authorized_operations=False))
        topic = next((t for t in answer.topics if t.name == r.topic), None)
        if topic is None or topic.error_code == WireError.unknown_topic_or_partition:
            raise SparkSourceError(f"unknown topic or partition {self.where}")
        _raise_for(topic.error_code, self.where)
        partition = next((p for p in topic.partitions if int(p.partition_index) == r.partition), None)
        if partition is None:
            raise SparkSourceError(f"unknown topic or partition {self.where}")
        brokers = {int(b.node_id): BrokerInfo(int(b.node_id), str(b.host), int(b.port), b.rack)
                   for b in answer.brokers}
        return brokers.get(int(partition.leader_id))


def _raise_for(code: WireError, where: str) -> None:
    """The librdkafka engine's error for a partition's error code; nothing for NONE or a leadership move."""
    if code == WireError.none or code in _LEADERSHIP:
        return
    if code == WireError.unknown_topic_or_partition:
        raise SparkSourceError(f"unknown topic or partition {where}")
    if code == WireError.topic_authorization_failed:
        raise SparkSourceError(f"not authorized to read {where}: the principal needs READ on the topic")
    if not code.retriable:
        raise SparkSourceError(f"reading {where}: {code.name.upper()}")
    raise AdminError(code.name.upper(), f"{where}: {code.name}", retriable=True)


def _request(r: OffsetRange, offset: int, client: Mapping[str, str], isolation: int) -> FetchRequest:
    settings = {k: int(client.get(k, v)) for k, v in _DEFAULTS.items()}
    return FetchRequest(
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=_MAX_WAIT_MS)), min_bytes=i32(1),
        max_bytes=i32(settings["fetch.max.bytes"]), isolation_level=i8(isolation), session_id=i32(0),
        session_epoch=i32(-1), forgotten_topics_data=(),
        topics=(FetchTopic(topic=TopicName(r.topic), partitions=(FetchPartition(
            partition=i32(r.partition), fetch_offset=i64(offset),
            partition_max_bytes=i32(settings["max.partition.fetch.bytes"])),)),))


def fetch_range_native(client: Mapping[str, str], r: OffsetRange, *, include_headers: bool = False,
                       fail_on_data_loss: bool = True, poll_timeout_ms: int = 30_000) -> Iterator[pa.RecordBatch]:
    """Every record of ``[r.start, r.end)`` once, in offset order, one record batch per Fetch response."""
    if r.size <= 0:
        return
    isolation = _isolation(client)
    where = f"{r.topic}-{r.partition}"
    timeout = poll_timeout_ms / 1000
    conn = _Partition(client, r, _MAX_WAIT_MS / 1000 + _REQUEST_GRACE)
    position, idle_since, sent = r.start, time.monotonic(), None
    try:
        while position < r.end:
            try:
                wire = conn.leader()
                if sent is None:
                    wire.deadline = Deadline(_MAX_WAIT_MS / 1000 + _REQUEST_GRACE)
                    wire.send(_request(r, position, client, isolation))
                    sent = position
                wire.deadline = Deadline(_MAX_WAIT_MS / 1000 + _REQUEST_GRACE)  # Spark may have held the last answer
                data = _partition_data(wire.receive(), r)
                sent = None
                code = data.error_code
                if code == WireError.offset_out_of_range:
                    if fail_on_data_loss:
                        raise DataLossError(f"offset {position} of {where} is no longer available (records were "
                                            "deleted); set failOnDataLoss=false to skip what was lost")
                    if int(data.log_start_offset) > position:
                        position = int(data.log_start_offset)  # what is left, as librdkafka's reset to the start
                        continue
                    return  # past the end of a truncated log: nothing more will come
                _raise_for(code, where)
                if code != WireError.none:  # the leader moved
                    conn.close()
                    time.sleep(_BACKOFF)
                    continue
                aborted = None
                if isolation and data.aborted_transactions:
                    aborted = [(int(a.producer_id), int(a.first_offset)) for a in data.aborted_transactions]
                columns = decode_columns(data.records, position, r.end, include_headers=include_headers,
                                         aborted=aborted)
                visible = int(data.last_stable_offset if isolation and data.last_stable_offset >= 0
                              else data.high_watermark)
                progressed = columns.next_offset > position
                if progressed:
                    position, idle_since = columns.next_offset, time.monotonic()
                    if not columns.done and position < r.end:  # the next answer is prepared while Spark works
                        wire.send(_request(r, position, client, isolation))
                        sent = position
                if columns.count:
                    yield to_record_batch(columns, r.topic, r.partition, include_headers=include_headers)
                if columns.done:  # a batch reached the end (maybe past a compacted gap at the range's end)
                    return
                if not progressed and position >= visible:  # at the partition's end
                    if visible >= r.end:
                        return
                    if fail_on_data_loss:
                        raise DataLossError(f"{where} ends at {visible}, before the planned end {r.end}: records "
                                            "were lost (set failOnDataLoss=false to stop there)")
                    return
            except AdminError as exc:
                if not exc.retriable:
                    raise SparkSourceError(f"reading {where}: {exc.message}") from None
                conn.close()  # a lost connection or a moving leader: find the leader again
                sent = None
                time.sleep(_BACKOFF)
            if time.monotonic() - idle_since > timeout:
                raise SparkSourceError(f"reading {where}: no record at or after offset {position} arrived within "
                                       f"{poll_timeout_ms} ms (kafkaConsumer.pollTimeoutMs)")
    finally:
        conn.close()


def _partition_data(response: Any, r: OffsetRange) -> Any:
    """The one partition's entry in a Fetch response (a whole-request error on it when there is none)."""
    for topic in response.responses:
        for data in topic.partitions:
            if int(data.partition_index) == r.partition:
                return data
    if response.error_code != WireError.none:
        _raise_for(response.error_code, f"{r.topic}-{r.partition}")
    raise AdminError("_BAD_MSG", f"a Fetch response without {r.topic}-{r.partition}", retriable=True)
