"""Object keys of the remote tier and the metadata object that commits one uploaded segment.

Every object of a partition lives under ``<prefix>/<cluster_id>/<topic>-<topic_id>/<partition>/`` and is named
``<base:020d>-<uuid>.<kind>``: the segment's ``log``, offset ``index``, ``timeindex``, producer ``snapshot``,
leader-``epochs`` checkpoint and aborted-transaction ``txnindex``, and last the metadata object
``<base:020d>-<uuid>.json`` (:class:`RemoteSegment`). The metadata object is written after every data object of
its upload, so its presence is the commit point: a listing that shows it shows a complete segment. Every upload
attempt takes a fresh uuid, so no key is ever written twice (the store needs no conditional writes) and a retry or
a second leader's upload of the same offsets is a second segment, which :mod:`metadata` chooses between.

Pure values and functions: no I/O, safe from any thread.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass

DATA_KINDS = ("log", "index", "timeindex", "snapshot", "epochs", "txnindex")
METADATA_KIND = "json"
FORMAT_VERSION = 1
_NAME = re.compile(r"^(?P<base>\d{20})-(?P<uuid>[0-9a-f]{32})\.(?P<kind>[a-z]+)$")


@dataclass(frozen=True, slots=True)
class PartitionPath:
    """Where one partition's objects live: the key prefix shared by all of them (ends with ``/``)."""

    prefix: str
    cluster_id: str
    topic: str
    topic_id: str
    partition: int

    @property
    def topic_dir(self) -> str:
        return f"{topic_root(self.prefix, self.cluster_id)}{self.topic}-{self.topic_id}/"

    @property
    def key_prefix(self) -> str:
        return f"{self.topic_dir}{self.partition}/"

    def key(self, base_offset: int, upload_id: str, kind: str) -> str:
        return f"{self.key_prefix}{base_offset:020d}-{upload_id}.{kind}"


def topic_root(prefix: str, cluster_id: str) -> str:
    """The prefix under which every topic directory of a cluster lives (``topic-<uuid>/``)."""
    return f"{prefix.strip('/')}/{cluster_id}/" if prefix.strip("/") else f"{cluster_id}/"


def parse_topic_dir(name: str) -> tuple[str, str] | None:
    """(topic, topic id) of a topic directory name ``<topic>-<uuid hex>`` (no slashes); None if not one."""
    topic, sep, topic_id = name.rstrip("/").rpartition("-")
    if not sep or not topic or len(topic_id) != 32 or not all(c in "0123456789abcdef" for c in topic_id):
        return None
    return topic, topic_id


@dataclass(frozen=True, slots=True)
class ObjectName:
    """A parsed object name within a partition directory."""

    base_offset: int
    upload_id: str
    kind: str


def parse_name(name: str) -> ObjectName | None:
    """The parts of ``<base:020d>-<uuid>.<kind>`` (the part of a key after the partition directory)."""
    m = _NAME.match(name)
    if m is None:
        return None
    return ObjectName(int(m["base"]), m["uuid"], m["kind"])


def new_upload_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True, slots=True)
class RemoteSegment:
    """One uploaded segment, as its metadata object describes it.

    ``end_offset`` is the last offset the segment holds (inclusive); ``epochs`` are the leader epochs of its
    batches as ``(epoch, start offset)`` pairs (KIP-405's segment leader epochs); ``leader_epoch`` is the epoch
    of the leader that uploaded it (the tie-break between two uploads of the same offsets).
    """

    base_offset: int
    end_offset: int
    upload_id: str
    max_timestamp: int
    offset_of_max_timestamp: int
    size: int
    leader_epoch: int
    epochs: tuple[tuple[int, int], ...]
    uploaded_at_ms: int
    has_snapshot: bool = True

    def __post_init__(self) -> None:
        if self.base_offset < 0 or self.end_offset < self.base_offset or self.size < 0:
            raise ValueError(f"not a segment: [{self.base_offset}, {self.end_offset}] of {self.size} bytes")

    def key(self, path: PartitionPath, kind: str) -> str:
        return path.key(self.base_offset, self.upload_id, kind)

    def data_keys(self, path: PartitionPath) -> list[str]:
        return [self.key(path, kind) for kind in DATA_KINDS]

    def metadata_key(self, path: PartitionPath) -> str:
        return self.key(path, METADATA_KIND)

    def to_json(self) -> bytes:
        return json.dumps({
            "version": FORMAT_VERSION, "base_offset": self.base_offset, "end_offset": self.end_offset,
            "upload_id": self.upload_id, "max_timestamp": self.max_timestamp,
            "offset_of_max_timestamp": self.offset_of_max_timestamp, "size": self.size,
            "leader_epoch": self.leader_epoch, "epochs": [list(e) for e in self.epochs],
            "uploaded_at_ms": self.uploaded_at_ms, "has_snapshot": self.has_snapshot,
        }, separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> RemoteSegment:
        """Raises ValueError for anything that is not a metadata object this code wrote."""
        try:
            body = json.loads(data)
            if body.get("version") != FORMAT_VERSION:
                raise ValueError(f"unknown remote segment format {body.get('version')!r}")
            return cls(int(body["base_offset"]), int(body["end_offset"]), str(body["upload_id"]),
                       int(body["max_timestamp"]), int(body["offset_of_max_timestamp"]), int(body["size"]),
                       int(body["leader_epoch"]), tuple((int(e), int(s)) for e, s in body["epochs"]),
                       int(body["uploaded_at_ms"]), bool(body.get("has_snapshot", True)))
        except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as exc:
            raise ValueError(f"not a remote segment metadata object: {exc}") from exc
