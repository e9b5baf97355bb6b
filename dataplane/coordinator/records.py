"""Keys and values of ``__consumer_offsets`` records, byte for byte Kafka's own formats.

Kafka's schemas (``OffsetCommitKey``/``OffsetCommitValue``/``GroupMetadataKey``/
``GroupMetadataValue`` in its group-coordinator module) are not flexible up to
the versions written here, so each is an int16 version followed by plain
fields: int16-length strings (-1 for null), int32-length bytes, int32-count
arrays. Writing Kafka's layout means Kafka's tools can read our offsets topic
and ours could read theirs. Writers emit offset values v3 (v1 when an expire
timestamp is set) and group values v3; readers take versions 0-3.

Layouts (after the int16 version):

    OffsetCommitKey   v0-1  group string, topic string, partition int32
    GroupMetadataKey  v2    group string
    OffsetCommitValue v0    offset int64, metadata string, commit_timestamp int64
                      v1    ... , expire_timestamp int64
                      v2    as v0
                      v3    offset int64, leader_epoch int32, metadata string, commit_timestamp int64
    GroupMetadataValue      protocol_type string, generation int32, protocol string?, leader string?,
                            current_state_timestamp int64 (v2+), members [member_id string,
                            group_instance_id string? (v3+), client_id string, client_host string,
                            rebalance_timeout int32 (v1+), session_timeout int32, subscription bytes,
                            assignment bytes]
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2


class CoordinatorRecordError(ValueError):
    """Bytes in ``__consumer_offsets`` that are not a record this coordinator understands."""


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int  # -1 when unknown
    metadata: str  # Kafka stores "" for a null metadata
    commit_timestamp: int  # ms
    expire_timestamp: int = -1  # only value v1 carries one


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes  # the member's metadata for the chosen protocol
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int  # ms, -1 when unknown
    members: tuple[MemberValue, ...]


# ---------------------------------------------------------------------- writing


class _Writer:
    def __init__(self, version: int) -> None:
        self.out = bytearray(_I16.pack(version))

    def i32(self, value: int) -> _Writer:
        self.out += _I32.pack(value)
        return self

    def i64(self, value: int) -> _Writer:
        self.out += _I64.pack(value)
        return self

    def string(self, value: str | None) -> _Writer:
        if value is None:
            self.out += _I16.pack(-1)
            return self
        data = value.encode()
        if len(data) > 0x7FFF:
            raise CoordinatorRecordError(f"string of {len(data)} bytes does not fit an int16 length")
        self.out += _I16.pack(len(data)) + data
        return self

    def bytes_(self, value: bytes) -> _Writer:
        self.out += _I32.pack(len(value)) + value
        return self


def encode_key(key: OffsetKey | GroupKey) -> bytes:
    if isinstance(key, GroupKey):
        return bytes(_Writer(GROUP_KEY_VERSION).string(key.group).out)
    return bytes(_Writer(OFFSET_KEY_VERSION).string(key.group).string(key.topic).i32(key.partition).out)


def encode_offset_value(value: OffsetValue) -> bytes:
    if value.expire_timestamp != -1:  # only v1 can carry it
        w = _Writer(1).i64(value.offset).string(value.metadata).i64(value.commit_timestamp)
        return bytes(w.i64(value.expire_timestamp).out)
    w = _Writer(3).i64(value.offset).i32(value.leader_epoch).string(value.metadata)
    return bytes(w.i64(value.commit_timestamp).out)


def encode_group_value(value: GroupValue) -> bytes:
    w = _Writer(3).string(value.protocol_type).i32(value.generation).string(value.protocol).string(value.leader)
    w.i64(value.current_state_timestamp).i32(len(value.members))
    for m in value.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
        w.i32(m.rebalance_timeout_ms).i32(m.session_timeout_ms).bytes_(m.subscription).bytes_(m.assignment)
    return bytes(w.out)


# ---------------------------------------------------------------------- reading


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, size: int) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise CoordinatorRecordError(f"record ends early: wanted {size} bytes at {self.pos} of {len(self.data)}")
        chunk = self.data[self.pos:self.pos + size]
        self.pos += size
        return chunk

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def nullable_string(self) -> str | None:
        length = self.i16()
        if length == -1:
            return None
        if length < 0:
            raise CoordinatorRecordError(f"negative string length {length}")
        try:
            return self._take(length).decode()
        except UnicodeDecodeError as exc:
            raise CoordinatorRecordError(f"string is not UTF-8: {exc}") from None

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise CoordinatorRecordError("null where a string is required")
        return value

    def bytes_(self) -> bytes:
        length = self.i32()
        if length < 0:
            raise CoordinatorRecordError(f"negative bytes length {length}")
        return self._take(length)


def decode_key(data: bytes) -> OffsetKey | GroupKey:
    r = _Reader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.string(), r.string(), r.i32())
    if version == GROUP_KEY_VERSION:
        return GroupKey(r.string())
    raise CoordinatorRecordError(f"unknown key version {version}")


def decode_offset_value(data: bytes) -> OffsetValue:
    r = _Reader(data)
    version = r.i16()
    if version in (0, 2):
        return OffsetValue(r.i64(), -1, r.string(), r.i64())
    if version == 1:
        return OffsetValue(r.i64(), -1, r.string(), r.i64(), r.i64())
    if version == 3:
        return OffsetValue(r.i64(), r.i32(), r.string(), r.i64())
    raise CoordinatorRecordError(f"unknown offset value version {version}")


def decode_group_value(data: bytes) -> GroupValue:
    r = _Reader(data)
    version = r.i16()
    if not 0 <= version <= 3:
        raise CoordinatorRecordError(f"unknown group value version {version}")
    protocol_type, generation = r.string(), r.i32()
    protocol, leader = r.nullable_string(), r.nullable_string()
    timestamp = r.i64() if version >= 2 else -1
    count = r.i32()
    if count < 0 or count > len(data):
        raise CoordinatorRecordError(f"bad member count {count}")
    members = []
    for _ in range(count):
        member_id = r.string()
        instance = r.nullable_string() if version >= 3 else None
        client_id, client_host = r.string(), r.string()
        rebalance = r.i32() if version >= 1 else -1
        session = r.i32()
        if rebalance == -1:
            rebalance = session
        members.append(MemberValue(member_id, instance, client_id, client_host, rebalance, session, r.bytes_(),
                                   r.bytes_()))
    return GroupValue(protocol_type, generation, protocol, leader, timestamp, tuple(members))


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units, wrapping at 32 bits (signed)."""
    units = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_group(group_id: str, partition_count: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % partitionCount`` (``abs`` masks the sign bit)."""
    return (java_string_hash(group_id) & 0x7FFFFFFF) % partition_count
