"""Broker registration: one live process per node id, data directories bound to their node."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sluice.embedded import free_port
from tests.support.broker import ROOT, BrokerProcess


def run_broker(data_dir: Path, cluster_id: str, node_id: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sluice", "broker", "--node-id", str(node_id), "--listen", f"127.0.0.1:{free_port()}",
         "--data-dir", str(data_dir), "--cluster-id", cluster_id], cwd=ROOT, capture_output=True, text=True,
        timeout=60)


def test_a_second_live_broker_with_the_same_node_id_is_refused(broker: BrokerProcess, tmp_path: Path) -> None:
    result = run_broker(tmp_path / "other", broker.cluster_id, 1)
    assert result.returncode != 0
    assert "already registered by a live process" in result.stderr.strip().splitlines()[-1]


def test_a_data_directory_is_bound_to_its_cluster_and_node(broker: BrokerProcess) -> None:
    result = run_broker(broker.data_dir, broker.cluster_id, 2)
    assert result.returncode != 0
    assert f"belongs to cluster '{broker.cluster_id}' node 1" in result.stderr.strip().splitlines()[-1]


def test_metadata_lists_the_registered_broker(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=30)
    assert [(b.id, b.host, b.port) for b in metadata.brokers.values()] == [(1, "127.0.0.1", broker.port)]
