"""``__consumer_offsets`` records: Kafka's byte layouts, hostile bytes, and Kafka's group-to-partition hash."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataplane.coordinator.records import (
    CoordinatorRecordError,
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_value,
    encode_key,
    encode_offset_value,
    java_string_hash,
    partition_for_group,
)


def test_offset_key_bytes_are_kafkas() -> None:
    # version 1 | group "g" | topic "t" | partition 3
    assert encode_key(OffsetKey("g", "t", 3)).hex() == "0001" "000167" "000174" "00000003"
    assert decode_key(bytes.fromhex("0000" "000167" "000174" "00000003")) == OffsetKey("g", "t", 3)  # v0 too


def test_group_key_bytes_are_kafkas() -> None:
    assert encode_key(GroupKey("grp")).hex() == "0002" "0003" + b"grp".hex()


def test_offset_value_v3_bytes_are_kafkas() -> None:
    # version 3 | offset 42 | leader epoch 7 | metadata "m" | commit timestamp 1000
    encoded = encode_offset_value(OffsetValue(42, 7, "m", 1000))
    assert encoded.hex() == "0003" "000000000000002a" "00000007" "00016d" "00000000000003e8"
    assert decode_offset_value(encoded) == OffsetValue(42, 7, "m", 1000)


@pytest.mark.parametrize(("raw", "expected"), [
    ("0000" "000000000000002a" "00016d" "00000000000003e8", OffsetValue(42, -1, "m", 1000)),
    ("0001" "000000000000002a" "00016d" "00000000000003e8" "00000000000007d0", OffsetValue(42, -1, "m", 1000, 2000)),
    ("0002" "000000000000002a" "0000" "00000000000003e8", OffsetValue(42, -1, "", 1000)),
])
def test_older_offset_values_are_read(raw: str, expected: OffsetValue) -> None:
    assert decode_offset_value(bytes.fromhex(raw)) == expected


def test_an_expire_timestamp_is_written_as_v1() -> None:
    value = OffsetValue(1, -1, "", 5, expire_timestamp=9)
    assert encode_offset_value(value)[:2] == b"\x00\x01" and decode_offset_value(encode_offset_value(value)) == value


def test_group_value_v3_bytes_are_kafkas() -> None:
    value = GroupValue("consumer", 2, "range", "m1", 1000, (MemberValue("m1", None, "c", "/h", 300, 100, b"S", b"A"),))
    expected = ("0003" "0008" + b"consumer".hex() + "00000002" "0005" + b"range".hex() + "0002" + b"m1".hex()
                + "00000000000003e8" "00000001" "0002" + b"m1".hex() + "ffff" "000163" "00022f68"
                + "0000012c" "00000064" "0000000153" "0000000141")
    assert encode_group_value(value).hex() == expected
    assert decode_group_value(bytes.fromhex(expected)) == value


def test_group_value_v0_is_read_with_the_session_as_rebalance_timeout() -> None:
    raw = ("0000" "0001" + b"c".hex() + "00000001" "ffff" "ffff" "00000001" "0001" + b"m".hex()
           + "000163" "000168" "00000064" "00000000" "00000000")
    assert decode_group_value(bytes.fromhex(raw)) == \
        GroupValue("c", 1, None, None, -1, (MemberValue("m", None, "c", "h", 100, 100, b"", b""),))


@pytest.mark.parametrize(("text", "hash_code"), [
    ("", 0), ("a", 97), ("hello", 99162322), ("polygenelubricants", -2147483648), ("group-1", 293427299),
    ("😀", 1772899), ("é", 233),
])
def test_java_string_hash(text: str, hash_code: int) -> None:
    assert java_string_hash(text) == hash_code


def test_partition_for_group_matches_kafka() -> None:
    # Values checked against Java 17 here. Utils.abs masks the sign bit: Integer.MIN_VALUE maps to 0.
    assert partition_for_group("polygenelubricants", 50) == 0
    assert partition_for_group("hello", 50) == 99162322 % 50
    assert partition_for_group("group-1", 50) == 49  # Java: (hashCode & 0x7fffffff) % 50
    assert all(0 <= partition_for_group(f"g{i}", 7) < 7 for i in range(200))


texts = st.text(max_size=40)
members = st.builds(MemberValue, texts, st.none() | texts, texts, texts, st.integers(0, 2**31 - 1),
                    st.integers(0, 2**31 - 1), st.binary(max_size=50), st.binary(max_size=50))


@given(st.builds(GroupValue, texts, st.integers(-(2**31), 2**31 - 1), st.none() | texts, st.none() | texts,
                 st.integers(-1, 2**62), st.lists(members, max_size=4).map(tuple)))
def test_group_values_round_trip(value: GroupValue) -> None:
    assert decode_group_value(encode_group_value(value)) == value


@given(st.builds(OffsetValue, st.integers(-1, 2**62), st.integers(-1, 2**31 - 1), texts, st.integers(0, 2**62)),
       st.builds(OffsetKey, texts, texts, st.integers(0, 2**31 - 1)))
def test_offsets_round_trip(value: OffsetValue, key: OffsetKey) -> None:
    assert decode_offset_value(encode_offset_value(value)) == value
    assert decode_key(encode_key(key)) == key


@given(st.binary(max_size=80))
def test_hostile_bytes_raise_only_the_records_error(data: bytes) -> None:
    for decode in (decode_key, decode_offset_value, decode_group_value):
        with contextlib.suppress(CoordinatorRecordError):
            decode(data)


@pytest.mark.parametrize(("decode", "raw"), [
    (decode_key, "00"),  # shorter than a version
    (decode_key, "0009"),  # unknown version
    (decode_key, "0001ffff"),  # null group
    (decode_key, "0002fffe"),  # negative length
    (decode_key, "000100016700"),  # ends inside the topic
    (decode_offset_value, "0003" + "00" * 8 + "00000000" + "0002c328" + "00" * 8),  # metadata not UTF-8
    (decode_group_value, "0003" "0001" + b"c".hex() + "00000001" "ffff" "ffff" + "00" * 8 + "7fffffff"),  # count
])
def test_malformed_records_are_refused(decode: Callable[[bytes], object], raw: str) -> None:
    with pytest.raises(CoordinatorRecordError):
        decode(bytes.fromhex(raw))
