"""The advertised API version ranges against Apache Kafka 4.0's: no client Kafka 4.0 serves is refused here.

KIP-896 removed old versions in Kafka 4.0; what remains is each message's ``validVersions`` in Kafka 4.0's
``clients/src/main/resources/common/message/*Request.json`` (the floors below). A broker advertising a higher floor
than Kafka's turns away clients Kafka accepts: librdkafka's SASL refused to log in while SaslHandshake v0 was not
advertised, and it sent compressed batches uncompressed while Produce v0 was not (KAFKA-18659).
"""

from __future__ import annotations

import shutil
import signal
import socket
import struct
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from dataplane.server import handlers  # noqa: F401  (registers every API)
from dataplane.server.apis import REGISTRY, api_version_entries
from tests.support import wire as kafka_wire
from tests.support.broker import BrokerProcess

# Apache Kafka 4.0's lowest advertised version of each API this broker serves (ApiVersionsResponse of a 4.0
# broker). Produce is advertised from 0 but served from 3: Kafka 4.0's KAFKA-18659 workaround, kept here too.
KAFKA_4_0_MIN_ADVERTISED = {
    0: 0,  # Produce (served from 3: KIP-896)
    1: 4,  # Fetch
    2: 1,  # ListOffsets
    3: 0,  # Metadata
    8: 2,  # OffsetCommit
    9: 1,  # OffsetFetch
    10: 0,  # FindCoordinator
    11: 0,  # JoinGroup
    12: 0,  # Heartbeat
    13: 0,  # LeaveGroup
    14: 0,  # SyncGroup
    15: 0,  # DescribeGroups
    16: 0,  # ListGroups
    17: 0,  # SaslHandshake (v0: bare SASL token frames follow, KIP-43)
    18: 0,  # ApiVersions
    19: 2,  # CreateTopics
    20: 1,  # DeleteTopics
    21: 0,  # DeleteRecords
    22: 0,  # InitProducerId
    23: 2,  # OffsetForLeaderEpoch
    24: 0,  # AddPartitionsToTxn
    25: 0,  # AddOffsetsToTxn
    26: 0,  # EndTxn
    27: 1,  # WriteTxnMarkers
    28: 0,  # TxnOffsetCommit
    29: 1,  # DescribeAcls
    30: 1,  # CreateAcls
    31: 1,  # DeleteAcls
    32: 1,  # DescribeConfigs
    33: 0,  # AlterConfigs
    34: 1,  # AlterReplicaLogDirs
    35: 1,  # DescribeLogDirs
    36: 0,  # SaslAuthenticate
    37: 0,  # CreatePartitions
    42: 0,  # DeleteGroups
    43: 0,  # ElectLeaders
    44: 0,  # IncrementalAlterConfigs
    45: 0,  # AlterPartitionReassignments
    46: 0,  # ListPartitionReassignments
    47: 0,  # OffsetDelete
    48: 0,  # DescribeClientQuotas
    49: 0,  # AlterClientQuotas
    50: 0,  # DescribeUserScramCredentials
    51: 0,  # AlterUserScramCredentials
    60: 0,  # DescribeCluster
    61: 0,  # DescribeProducers
    65: 0,  # DescribeTransactions
    66: 0,  # ListTransactions
    75: 0,  # DescribeTopicPartitions
}
KAFKA_4_0_MIN_SERVED = {**KAFKA_4_0_MIN_ADVERTISED, 0: 3}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(Path(tmp_path_factory.mktemp("versions")) / "data", f"test-{uuid.uuid4().hex[:12]}")
    process.start()
    try:
        yield process
    finally:
        process.stop(signal.SIGKILL)


@pytest.mark.parametrize("key", sorted(REGISTRY))
def test_every_floor_is_kafka_4_0s(key: int) -> None:
    """Advertised and served from exactly Kafka 4.0's floors: lower would claim versions Kafka dropped."""
    served = REGISTRY[key]
    assert key in KAFKA_4_0_MIN_ADVERTISED, f"{served.name}: add Kafka 4.0's floor to the table"
    assert (served.advertised_min, served.min_version) == (KAFKA_4_0_MIN_ADVERTISED[key], KAFKA_4_0_MIN_SERVED[key])
    assert served.min_version <= served.max_version


def test_api_versions_advertises_the_registry() -> None:
    entries = {entry["api_key"]: (entry["min_version"], entry["max_version"]) for entry in api_version_entries()}
    assert entries[0] == (0, REGISTRY[0].max_version) and entries[17] == (0, 1)


def test_a_produce_below_v3_closes_the_connection_as_in_kafka_4_0(broker: BrokerProcess) -> None:
    """Advertised for librdkafka's sake only: a Produce v2 request is not served (Kafka 4.0 closes it too)."""
    versions = kafka_wire.call(broker.port, ApiVersionsRequest(client_software_name="t",
                                                               client_software_version="1"))
    assert {(e.api_key, e.min_version) for e in versions.api_keys} >= {(0, 0), (17, 0)}
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        # Produce v2: acks=1, timeout, no topics -- a well-formed old request.
        payload = struct.pack(">hhih", 0, 2, 5, 3) + b"cli" + struct.pack(">hii", 1, 1000, 0)
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        assert sock.recv(64) == b""
    assert kafka_wire.call(broker.port, ApiVersionsRequest(client_software_name="t", client_software_version="1"))


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (`make kcat` installs Debian's)")
@pytest.mark.parametrize("codec", ["gzip", "lz4"])
def test_librdkafka_2_0_compresses_for_this_broker(broker: BrokerProcess, codec: str) -> None:
    """Debian's kcat (librdkafka 2.0) compresses only when Produce v0 is advertised (KAFKA-18659)."""
    lines = [f"{n:03d}".encode() + b"x" * 500 for n in range(20)]  # worth compressing (librdkafka checks)
    produced = subprocess.run(["kcat", "-b", broker.bootstrap, "-P", "-t", f"squeezed-{codec}", "-z", codec,
                               "-d", "msg"], input=b"\n".join(lines) + b"\n", capture_output=True, timeout=60,
                              check=True)
    log = produced.stderr.decode()
    assert "not compressing batch" not in log and f", {codec})" in log, log[-2000:]
    consumed = subprocess.run(["kcat", "-b", broker.bootstrap, "-C", "-t", f"squeezed-{codec}", "-e",
                               "-o", "beginning"], capture_output=True, timeout=60, check=True)
    assert consumed.stdout.split() == lines
