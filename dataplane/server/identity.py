"""``meta.json`` in a broker's data directory: which cluster and node id the directory belongs to.

Kafka's ``meta.properties``: a directory written by one cluster or node id is
never silently reused by another (that would mix two brokers' logs), and its
``directory_id`` lets a broker restarted after a crash take its own
registration back before the old lease lapses.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

META_NAME = "meta.json"


class DirectoryMismatch(Exception):
    """The data directory belongs to another cluster or node id."""


def claim_data_dir(data_dir: Path, cluster_id: str, node_id: int) -> uuid.UUID:
    """The directory's id, writing ``meta.json`` on first use; raises DirectoryMismatch."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / META_NAME
    try:
        meta = json.loads(path.read_text())
    except FileNotFoundError:
        directory_id = uuid.uuid4()
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"version": 1, "cluster_id": cluster_id, "node_id": node_id,
                                   "directory_id": str(directory_id)}))
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        return directory_id
    except (OSError, ValueError) as exc:
        raise DirectoryMismatch(f"{path} is unreadable: {exc}") from exc
    if meta.get("cluster_id") != cluster_id or meta.get("node_id") != node_id:
        raise DirectoryMismatch(
            f"{data_dir} belongs to cluster {meta.get('cluster_id')!r} node {meta.get('node_id')}, "
            f"not cluster {cluster_id!r} node {node_id}")
    try:
        return uuid.UUID(str(meta["directory_id"]))
    except (KeyError, ValueError) as exc:
        raise DirectoryMismatch(f"{path} has no valid directory_id") from exc
