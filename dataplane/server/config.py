"""Broker settings."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dataplane.protocol.framing import DEFAULT_MAX_FRAME_BYTES


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    node_id: int
    host: str
    port: int
    data_dir: Path
    metadata_url: str
    cluster_id: str = "sluice-dev"
    metadata_schema: str = "sluice_meta"
    advertised_host: str | None = None
    advertised_port: int | None = None
    auto_create_topics: bool = True
    num_partitions: int = 1
    default_replication_factor: int = 1
    max_request_bytes: int = DEFAULT_MAX_FRAME_BYTES
    rack: str | None = None
    lease_seconds: float = 10.0  # broker registration lease in the metadata store, renewed every third
    fetch_transfer: str = "sendfile"  # or "copy": how Fetch moves file data to the socket

    @property
    def advertised(self) -> tuple[str, int]:
        return self.advertised_host or self.host, self.advertised_port or self.port
