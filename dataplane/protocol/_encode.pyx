# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Produce records encoded straight into one Kafka RecordBatch v2, and Kafka's key partitioner.

Why compiled: the REST proxy's produce path handed records one at a time to librdkafka, paying a Python call,
a C message and a queue slot per record. Here a web process builds one uncompressed batch per partition
itself: one pass sums the exact size (validating every field), one ``bytes`` is allocated, a second pass
writes the records into it, and the CRC-32C is computed once over the result. No Python object is created
per record. ``dataplane.protocol.records.build_batch`` is the pure-Python reference this must match byte
for byte (tests check it on generated records).

Inputs are exactly what the HTTP layer already holds: keys, values and header values are ``bytes`` or None
(``bytearray``/``memoryview`` are refused, to keep one fast type check), header names ``str`` (sent as
UTF-8). Bad input raises TypeError or ValueError naming the record, never reads out of bounds.

``murmur2``/``partition_for_key`` are the Java client's ``Utils.murmur2`` and its keyed-record partitioner
(librdkafka's ``murmur2_random``), so a key lands where every other Kafka client would put it.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t

import crc32c as _crc32c


cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t* size) except NULL  # cached in the str
    long long PyLong_AsLongLongAndOverflow(object o, int* overflow) except? -1


cdef extern from "string.h":
    void* memcpy(void* dst, const void* src, size_t n) nogil


cdef enum:  # RecordBatch v2's layout (see dataplane.protocol.records.BATCH_HEADER)
    HEADER_SIZE = 61
    LOG_OVERHEAD = 12
    CRC_OFFSET = 17
    CRC_START = 21
    INT32_MAX = 2147483647

cdef int64_t INT64_MAX = 9223372036854775807
cdef int64_t INT64_MIN = -INT64_MAX - 1


# ---------------------------------------------------------------- murmur2


cdef inline int32_t _murmur2(const uint8_t* data, Py_ssize_t length) noexcept nogil:
    """Kafka's ``Utils.murmur2``: 32-bit unsigned arithmetic, then the bits read as Java's signed int."""
    cdef uint32_t m = 0x5bd1e995
    cdef uint32_t h = 0x9747b28cU ^ <uint32_t>length
    cdef uint32_t k
    cdef Py_ssize_t i, n4 = length // 4, tail = length & ~(<Py_ssize_t>3)
    for i in range(n4):
        k = (<uint32_t>data[4 * i] | (<uint32_t>data[4 * i + 1] << 8) | (<uint32_t>data[4 * i + 2] << 16)
             | (<uint32_t>data[4 * i + 3] << 24))
        k *= m
        k ^= k >> 24
        k *= m
        h *= m
        h ^= k
    cdef Py_ssize_t rest = length & 3  # Java's switch falls through from case 3 to case 1
    if rest == 3:
        h ^= <uint32_t>data[tail + 2] << 16
    if rest >= 2:
        h ^= <uint32_t>data[tail + 1] << 8
    if rest >= 1:
        h ^= <uint32_t>data[tail]
        h *= m
    h ^= h >> 13
    h *= m
    h ^= h >> 15
    return <int32_t>h


cdef inline const uint8_t* _key_bytes(object key) except NULL:
    if not isinstance(key, bytes):
        raise TypeError(f"key must be bytes, not {type(key).__name__}")
    return <const uint8_t*>PyBytes_AS_STRING(key)


def murmur2(object key):
    """Kafka's ``Utils.murmur2(byte[])`` of ``key`` as a signed 32-bit int."""
    cdef const uint8_t* p = _key_bytes(key)
    return _murmur2(p, PyBytes_GET_SIZE(key))


def partition_for_key(object key, object partitions):
    """The partition Kafka's default partitioner picks for a keyed record: ``(murmur2 & 0x7fffffff) % n``."""
    cdef const uint8_t* p = _key_bytes(key)
    cdef int64_t n = _int_in(partitions, 1, INT32_MAX, "partitions")
    return (_murmur2(p, PyBytes_GET_SIZE(key)) & 0x7fffffff) % n


# ---------------------------------------------------------------- validation


cdef int64_t _int_in(object v, int64_t lo, int64_t hi, str name) except? -1:
    """``v`` as a C integer within [lo, hi]; TypeError for a non-int, ValueError out of range."""
    if not isinstance(v, int):
        raise TypeError(f"{name} must be an int, not {type(v).__name__}")
    cdef int overflow = 0
    cdef long long x = PyLong_AsLongLongAndOverflow(v, &overflow)
    if overflow or x < lo or x > hi:
        raise ValueError(f"{name} {v} is outside [{lo}, {hi}]")
    return x


cdef tuple _record(list records, Py_ssize_t i):
    rec = records[i]
    if not isinstance(rec, tuple):
        raise TypeError(f"record {i} must be a tuple (key, value, headers, timestamp_ms), not {type(rec).__name__}")
    if len(<tuple>rec) != 4:
        raise ValueError(f"record {i} has {len(<tuple>rec)} fields, not 4 (key, value, headers, timestamp_ms)")
    return <tuple>rec


cdef int64_t _timestamp(tuple rec, Py_ssize_t i) except? -1:
    ts = rec[3]
    if not isinstance(ts, int):
        raise TypeError(f"record {i}: timestamp_ms must be an int, not {type(ts).__name__}")
    cdef int overflow = 0
    cdef long long x = PyLong_AsLongLongAndOverflow(ts, &overflow)
    if overflow:
        raise ValueError(f"record {i}: timestamp_ms {ts} does not fit in 64 bits")
    return x


# ---------------------------------------------------------------- varints and sizes


cdef inline uint64_t _zigzag(int64_t n) noexcept nogil:
    return (<uint64_t>n << 1) ^ <uint64_t>(n >> 63)


cdef inline Py_ssize_t _varint_size(uint64_t v) noexcept nogil:
    cdef Py_ssize_t n = 1
    while v > 0x7F:
        v >>= 7
        n += 1
    return n


cdef inline char* _put_varint(char* p, uint64_t v) noexcept nogil:
    while v > 0x7F:
        p[0] = <char>((v & 0x7F) | 0x80)
        p += 1
        v >>= 7
    p[0] = <char>v
    return p + 1


cdef inline char* _put_be(char* p, uint64_t v, int width) noexcept nogil:
    cdef int i
    for i in range(width):
        p[i] = <char>(v >> (8 * (width - 1 - i)))
    return p + width


cdef Py_ssize_t _blob_size(object b, Py_ssize_t i, str what) except -1:
    """Encoded size of a nullable byte string: its zigzag length (-1 for None) and its bytes."""
    if b is None:
        return 1
    if not isinstance(b, bytes):
        raise TypeError(f"record {i}: {what} must be bytes or None, not {type(b).__name__}")
    cdef Py_ssize_t n = PyBytes_GET_SIZE(b)
    if n > INT32_MAX:
        raise ValueError(f"record {i}: {what} of {n} bytes is over 2 GiB")
    return _varint_size(_zigzag(n)) + n


cdef inline Py_ssize_t _length(object seq) noexcept:
    """A list's or tuple's length through the C macro: a subclass's ``__len__`` is never run mid-encode."""
    return len(<list>seq) if isinstance(seq, list) else len(<tuple>seq)


cdef inline object _item(object seq, Py_ssize_t j):
    return (<list>seq)[j] if isinstance(seq, list) else (<tuple>seq)[j]


cdef Py_ssize_t _headers_size(object headers, Py_ssize_t i) except -1:
    """Encoded size of a record's header count and headers (None and empty both mean none)."""
    if headers is None:
        return 1
    if not isinstance(headers, (list, tuple)):
        raise TypeError(f"record {i}: headers must be a list of (name, value) tuples or None, "
                        f"not {type(headers).__name__}")
    cdef Py_ssize_t count = _length(headers), j, n, size = _varint_size(_zigzag(count))
    for j in range(count):
        h = _item(headers, j)
        if not isinstance(h, tuple):
            raise TypeError(f"record {i}: header {j} must be a (name, value) tuple, not {type(h).__name__}")
        if len(<tuple>h) != 2:
            raise ValueError(f"record {i}: header {j} has {len(<tuple>h)} fields, not 2 (name, value)")
        name = (<tuple>h)[0]
        if not isinstance(name, str):
            raise TypeError(f"record {i}: header {j} name must be str, not {type(name).__name__}")
        PyUnicode_AsUTF8AndSize(name, &n)  # UnicodeEncodeError (a ValueError) for lone surrogates
        if n > INT32_MAX:
            raise ValueError(f"record {i}: header {j} name is over 2 GiB")
        size += _varint_size(_zigzag(n)) + n + _blob_size((<tuple>h)[1], i, "header value")
    return size


cdef Py_ssize_t _body_size(tuple rec, Py_ssize_t i, int64_t ts_delta) except -1:
    """A record's size without its own length prefix (attributes byte, deltas, key, value, headers)."""
    return (1 + _varint_size(_zigzag(ts_delta)) + _varint_size(_zigzag(i)) + _blob_size(rec[0], i, "key")
            + _blob_size(rec[1], i, "value") + _headers_size(rec[2], i))


cdef int64_t _delta(int64_t ts, int64_t base, Py_ssize_t i) except? -1:
    if (base < 0 and ts > INT64_MAX + base) or (base > 0 and ts < INT64_MIN + base):
        raise ValueError(f"record {i}: timestamp_ms {ts} is too far from the first record's {base}")
    return ts - base


# ---------------------------------------------------------------- writing


cdef inline char* _put_blob(char* p, object b) noexcept:
    """After ``_blob_size`` validated ``b``."""
    if b is None:
        return _put_varint(p, 1)  # zigzag(-1)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(b)
    p = _put_varint(p, _zigzag(n))
    memcpy(p, PyBytes_AS_STRING(b), n)
    return p + n


cdef char* _put_record(char* p, tuple rec, Py_ssize_t i, int64_t ts_delta, Py_ssize_t body) except NULL:
    """After ``_body_size`` validated ``rec`` and measured ``body``."""
    cdef Py_ssize_t j, n, count
    cdef const char* name
    p = _put_varint(p, _zigzag(body))
    p[0] = 0  # record attributes: unused
    p = _put_varint(p + 1, _zigzag(ts_delta))
    p = _put_varint(p, _zigzag(i))
    p = _put_blob(p, rec[0])
    p = _put_blob(p, rec[1])
    headers = rec[2]
    if headers is None:
        return _put_varint(p, 0)
    count = _length(headers)
    p = _put_varint(p, _zigzag(count))
    for j in range(count):
        h = <tuple>_item(headers, j)
        name = PyUnicode_AsUTF8AndSize(h[0], &n)
        p = _put_varint(p, _zigzag(n))
        memcpy(p, name, n)
        p = _put_blob(p + n, h[1])
    return p


def encode_batch(list records not None, object producer_id, object producer_epoch, object base_sequence):
    """One uncompressed CreateTime RecordBatch v2 (base offset 0, leader epoch -1) of ``records``.

    ``records`` is a non-empty list of ``(key, value, headers, timestamp_ms)``: key and value bytes or None,
    headers None or a list of ``(name: str, value: bytes | None)``. Record ``i`` gets offset delta ``i``; the
    batch's base timestamp is the first record's and its max timestamp the largest. ``build_batch`` of the
    same ``Record``s (offsets 0..n-1) with the same producer fields gives the same bytes.
    """
    cdef Py_ssize_t count = len(records)
    if count == 0:
        raise ValueError("no records to encode")
    cdef int64_t pid = _int_in(producer_id, INT64_MIN, INT64_MAX, "producer_id")
    cdef int64_t epoch = _int_in(producer_epoch, -32768, 32767, "producer_epoch")
    cdef int64_t seq = _int_in(base_sequence, -2147483648, INT32_MAX, "base_sequence")

    # Pass 1: validate everything and sum the exact size.
    cdef tuple rec = _record(records, 0)
    cdef int64_t base_ts = _timestamp(rec, 0), max_ts = base_ts, ts, delta
    cdef Py_ssize_t i, body, total = HEADER_SIZE
    for i in range(count):
        rec = _record(records, i)
        ts = _timestamp(rec, i)
        if ts > max_ts:
            max_ts = ts
        body = _body_size(rec, i, _delta(ts, base_ts, i))
        total += _varint_size(_zigzag(body)) + body
        if total - LOG_OVERHEAD > INT32_MAX:
            raise ValueError(f"the batch is over 2 GiB at record {i}")

    # Pass 2: one allocation, filled in place (no Python code runs between the passes, so nothing changed).
    out = PyBytes_FromStringAndSize(NULL, total)
    cdef char* start = PyBytes_AS_STRING(out)
    cdef char* p = start + HEADER_SIZE
    cdef char* end = start + total
    for i in range(count):
        rec = <tuple>records[i]
        delta = _timestamp(rec, i) - base_ts
        body = _body_size(rec, i, delta)
        if body + _varint_size(_zigzag(body)) > end - p:  # cannot happen; never write past the buffer
            raise RuntimeError("records changed while being encoded")
        p = _put_record(p, rec, i, delta, body)
    if p != end:
        raise RuntimeError("records changed while being encoded")

    p = _put_be(start, 0, 8)  # baseOffset
    p = _put_be(p, <uint64_t>(total - LOG_OVERHEAD), 4)  # batchLength
    p = _put_be(p, <uint64_t><int64_t>-1, 4)  # partitionLeaderEpoch
    p[0] = 2  # magic
    p = _put_be(p + 1, 0, 4)  # crc, below
    p = _put_be(p, 0, 2)  # attributes: no compression, CreateTime, not transactional
    p = _put_be(p, <uint64_t>(count - 1), 4)  # lastOffsetDelta
    p = _put_be(p, <uint64_t>base_ts, 8)
    p = _put_be(p, <uint64_t>max_ts, 8)
    p = _put_be(p, <uint64_t>pid, 8)
    p = _put_be(p, <uint64_t>epoch, 2)
    p = _put_be(p, <uint64_t>seq, 4)
    _put_be(p, <uint64_t>count, 4)
    cdef uint32_t crc = _crc32c.crc32c(memoryview(out)[CRC_START:])
    _put_be(start + CRC_OFFSET, crc, 4)
    return out
