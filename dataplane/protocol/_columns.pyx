# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Fetch response records (RecordBatch v2) decoded straight into column buffers, no Python object per record.

Why compiled: a Spark task spent ~70% of its time building one Python object per record (librdkafka's
``Message``) and reading it back column by column. Here one pass over the bytes writes Arrow's layouts
directly: int64 offsets and timestamps, int32 timestamp types, and binary columns (validity bitmap, int32
offsets, data) for keys, values and, when asked, headers. The buffers are ``bytearray``s the caller wraps with
``pyarrow.py_buffer`` (no copy). ``dataplane.protocol.records.decode_batch`` is the pure-Python reference
this must agree with (tests check it on generated batches).

Every length and varint is bounds-checked against its batch (a remote peer's bytes): bad input raises
``CorruptRecordError`` (or ``UnsupportedForMessageFormatError``/``UnsupportedCompressionTypeError``), never
reads out of bounds. A truncated last batch (a fetch cut at max_bytes) is ignored, as Kafka's clients do.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_Resize
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcpy, memset

cimport cython

from dataplane.protocol.errors import (
    CorruptRecordError,
    UnsupportedCompressionTypeError,
    UnsupportedForMessageFormatError,
)
from dataplane.protocol.records import decode_batch, decompress


cdef enum:  # RecordBatch v2's layout and attribute bits (see dataplane.protocol.records.BATCH_HEADER)
    HEADER_SIZE = 61
    LOG_OVERHEAD = 12
    MIN_BATCH_LENGTH = 49
    MIN_RECORD_SIZE = 7
    CODEC_MASK = 0x07
    TIMESTAMP_TYPE_MASK = 0x08
    TRANSACTIONAL_MASK = 0x10
    CONTROL_MASK = 0x20
    MAX_CODEC = 4
    INT32_MAX = 2147483647


cdef inline int64_t _be64(const uint8_t* p) noexcept nogil:
    cdef uint64_t v = 0
    cdef int i
    for i in range(8):
        v = (v << 8) | p[i]
    return <int64_t>v


cdef inline int32_t _be32(const uint8_t* p) noexcept nogil:
    return <int32_t>((<uint64_t>p[0] << 24) | (<uint64_t>p[1] << 16) | (<uint64_t>p[2] << 8) | p[3])


cdef inline int16_t _be16(const uint8_t* p) noexcept nogil:
    return <int16_t>((p[0] << 8) | p[1])


@cython.final
cdef class _Buf:
    """A bytearray filled from C; grows by doubling when an upper bound was too small."""

    cdef bytearray ba
    cdef char* data
    cdef Py_ssize_t used
    cdef Py_ssize_t cap

    def __cinit__(self, Py_ssize_t cap):
        self.cap = cap if cap > 64 else 64
        self.ba = PyByteArray_FromStringAndSize(NULL, self.cap)
        self.data = PyByteArray_AS_STRING(self.ba)
        self.used = 0

    cdef inline int reserve(self, Py_ssize_t extra) except -1:
        if self.used + extra <= self.cap:
            return 0
        cdef Py_ssize_t cap = self.cap * 2
        while cap < self.used + extra:
            cap *= 2
        PyByteArray_Resize(self.ba, cap)
        self.data = PyByteArray_AS_STRING(self.ba)
        self.cap = cap
        return 0

    cdef inline void put64(self, int64_t v) noexcept:
        (<int64_t*>(self.data + self.used))[0] = v
        self.used += 8

    cdef inline void put32(self, int32_t v) noexcept:
        (<int32_t*>(self.data + self.used))[0] = v
        self.used += 4

    cdef inline void put(self, const uint8_t* src, Py_ssize_t n) noexcept:
        memcpy(self.data + self.used, src, n)
        self.used += n

    cdef bytearray finish(self):
        PyByteArray_Resize(self.ba, self.used)
        return self.ba


@cython.final
cdef class _Binary:
    """An Arrow binary column being built: validity bits, int32 offsets, data."""

    cdef _Buf valid
    cdef _Buf offsets
    cdef _Buf data
    cdef Py_ssize_t length
    cdef Py_ssize_t nulls

    def __cinit__(self, Py_ssize_t rows, Py_ssize_t data_bytes):
        self.valid = _Buf((rows + 7) // 8 + 8)
        self.offsets = _Buf(4 * (rows + 1))
        self.data = _Buf(data_bytes)
        self.length = 0
        self.nulls = 0
        self.offsets.put32(0)

    cdef inline int append(self, const uint8_t* src, int64_t n) except -1:
        """``n`` < 0: null."""
        cdef Py_ssize_t byte = self.length >> 3
        if byte >= self.valid.used:  # one more bitmap byte (rows are appended one at a time)
            self.valid.reserve(1)
            self.valid.data[byte] = 0
            self.valid.used = byte + 1
        self.offsets.reserve(4)
        if n < 0:
            self.nulls += 1
        else:
            self.valid.data[byte] |= <char>(1 << (self.length & 7))
            self.data.reserve(n)
            self.data.put(src, n)
            if self.data.used > INT32_MAX:
                raise CorruptRecordError("more than 2 GiB of data in one column")
        self.offsets.put32(<int32_t>self.data.used)
        self.length += 1
        return 0

    cdef tuple finish(self):
        """(validity or None when nothing is null, offsets, data, null count)."""
        return (self.valid.finish() if self.nulls else None, self.offsets.finish(), self.data.finish(), self.nulls)


cdef struct _Reader:
    const uint8_t* p
    Py_ssize_t pos
    Py_ssize_t end


cdef inline int _varlong(_Reader* r, int64_t* out) except -1:
    """A zigzag varint (Kafka's varint and varlong), within ``r.end``."""
    cdef uint64_t v = 0
    cdef int shift = 0
    cdef uint8_t b
    while True:
        if r.pos >= r.end:
            raise CorruptRecordError("truncated varint")
        b = r.p[r.pos]
        r.pos += 1
        v |= (<uint64_t>(b & 0x7F)) << shift
        if not (b & 0x80):
            break
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint too long")
    out[0] = <int64_t>((v >> 1) ^ (0 - (v & 1)))
    return 0


cdef inline int _length(_Reader* r, int64_t n, const char* what) except -1:
    if n > r.end - r.pos:
        raise CorruptRecordError(f"{what.decode()} of {n} bytes runs past its record")
    return 0


cdef class Columns:
    """What ``decode_columns`` found: ``count`` rows as Arrow-layout buffers, and where the next fetch starts.

    ``next_offset`` is the offset after the last whole batch read (control and skipped batches included), at
    least ``start``; ``done`` says a batch reached ``end``. Binary columns are (validity or None, int32
    offsets, data, null count). ``headers`` is None unless asked for: (list validity or None, list offsets,
    null lists, key offsets, key data, value column) with the header key column holding UTF-8 bytes unchecked.
    """

    cdef readonly Py_ssize_t count
    cdef readonly bytearray offsets
    cdef readonly bytearray timestamps
    cdef readonly bytearray timestamp_types
    cdef readonly tuple keys
    cdef readonly tuple values
    cdef readonly object headers
    cdef readonly int64_t next_offset
    cdef readonly bint done


cdef bint _is_abort_marker(object buf, Py_ssize_t pos):
    """A control batch's first record key is (version int16, type int16); type 0 is ABORT, 1 COMMIT."""
    found = decode_batch(buf, pos, verify_crc=False)
    if not found.records or found.records[0].key is None or len(found.records[0].key) < 4:
        raise CorruptRecordError("control batch without a control record key")
    key = found.records[0].key
    return ((key[2] << 8) | key[3]) == 0


def decode_columns(object records, int64_t start, int64_t end, *, bint include_headers=False,
                   bint micros=True, object aborted=None):
    """Records with ``start <= offset < end`` of a Fetch response partition's ``records`` bytes, as ``Columns``.

    Control batches are skipped; with ``aborted`` (read_committed: the response's (producer id, first offset)
    pairs) so are the batches of aborted transactions, as Kafka's consumer does. Timestamps are in µs when
    ``micros`` (Spark's unit), else ms.
    """
    cdef const uint8_t[::1] view
    cdef Py_ssize_t n = 0
    if records is not None:
        view = records
        n = view.shape[0]
    cdef Py_ssize_t pos = 0, size
    cdef const uint8_t* h
    cdef int64_t base_offset, base_ts, max_ts, pid, batch_next, next_offset = start
    cdef int32_t batch_length, lod, count
    cdef int16_t attributes
    cdef int codec
    cdef bint done = False
    cdef list picked = []  # (payload object, payload offset, payload length, header fields...)
    cdef Py_ssize_t rows_max = 0, bytes_max = 0
    cdef list pending = sorted(aborted, key=lambda a: a[1]) if aborted is not None else None
    cdef Py_ssize_t next_pending = 0
    cdef set active = set()

    while pos < n and not done:
        if n - pos < HEADER_SIZE:
            break  # a truncated last batch
        h = &view[pos]
        if h[16] != 2:
            if h[16] in (0, 1):
                raise UnsupportedForMessageFormatError(f"message format v{h[16]} is not supported")
            raise CorruptRecordError(f"invalid magic byte {<signed char>h[16]}")
        batch_length = _be32(h + 8)
        if batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"batch length {batch_length} below the minimum")
        size = <Py_ssize_t>batch_length + LOG_OVERHEAD
        if size > n - pos:
            break  # a truncated last batch
        base_offset = _be64(h)
        attributes = _be16(h + 21)
        lod = _be32(h + 23)
        base_ts = _be64(h + 27)
        max_ts = _be64(h + 35)
        pid = _be64(h + 43)
        count = _be32(h + 57)
        if count < 0 or lod < 0:
            raise CorruptRecordError("negative record count or last offset delta")
        codec = attributes & CODEC_MASK
        if codec > MAX_CODEC:
            raise UnsupportedCompressionTypeError(f"unknown compression codec {codec}")
        batch_next = base_offset + lod + 1
        if base_offset >= end:
            done = True
            break
        if batch_next > next_offset:
            next_offset = batch_next
        if batch_next >= end:
            done = True
        skip = batch_next <= start or count == 0
        if pending is not None and pid >= 0:
            while next_pending < len(pending) and pending[next_pending][1] <= batch_next - 1:
                active.add(pending[next_pending][0])
                next_pending += 1
            if attributes & CONTROL_MASK:
                if pid in active and _is_abort_marker(records, pos):
                    active.discard(pid)
            elif attributes & TRANSACTIONAL_MASK and pid in active:
                skip = True
        if not skip and not (attributes & CONTROL_MASK):
            if codec == 0:
                payload, at, length = records, pos + HEADER_SIZE, size - HEADER_SIZE
            else:
                payload = decompress(codec, memoryview(records)[pos + HEADER_SIZE:pos + size])
                at, length = 0, len(payload)
            if <int64_t>count * MIN_RECORD_SIZE > length:
                raise CorruptRecordError(f"record count {count} cannot fit in {length} bytes")
            picked.append((payload, at, length, base_offset, lod, count,
                           max_ts if attributes & TIMESTAMP_TYPE_MASK else base_ts,
                           bool(attributes & TIMESTAMP_TYPE_MASK)))
            rows_max += count
            bytes_max += length
        pos += size

    cdef _Buf offsets = _Buf(8 * rows_max)
    cdef _Buf timestamps = _Buf(8 * rows_max)
    cdef _Buf types = _Buf(4 * rows_max)
    cdef _Binary keys = _Binary(rows_max, bytes_max)
    cdef _Binary values = _Binary(rows_max, bytes_max)
    cdef _Binary header_keys = None, header_values = None
    cdef _Buf list_valid = None, list_offsets = None
    cdef Py_ssize_t list_nulls = 0
    if include_headers:
        header_keys, header_values = _Binary(0, 0), _Binary(0, 0)
        list_valid, list_offsets = _Buf((rows_max + 7) // 8 + 8), _Buf(4 * (rows_max + 1))
        list_offsets.put32(0)
    for item in picked:
        _decode_batch_records(item, start, end, micros, offsets, timestamps, types, keys, values,
                              header_keys, header_values, list_valid, list_offsets, &list_nulls)

    cdef Columns out = Columns.__new__(Columns)
    out.count = offsets.used // 8
    out.offsets = offsets.finish()
    out.timestamps = timestamps.finish()
    out.timestamp_types = types.finish()
    out.keys = keys.finish()
    out.values = values.finish()
    out.headers = None
    if include_headers:
        out.headers = (list_valid.finish() if list_nulls else None, list_offsets.finish(), list_nulls,
                       header_keys.finish(), header_values.finish())
    out.next_offset = next_offset
    out.done = done
    return out


cdef int _decode_batch_records(tuple item, int64_t start, int64_t end, bint micros, _Buf offsets,
                               _Buf timestamps, _Buf types, _Binary keys, _Binary values, _Binary header_keys,
                               _Binary header_values, _Buf list_valid, _Buf list_offsets,
                               Py_ssize_t* list_nulls) except -1:
    payload, at, length, base_offset_o, lod_o, count_o, ts_o, log_append_o = item
    cdef const uint8_t[::1] view = payload
    cdef Py_ssize_t begin = at
    cdef _Reader r
    r.p = &view[0] if view.shape[0] else NULL
    r.pos = begin
    r.end = begin + <Py_ssize_t>length
    cdef Py_ssize_t batch_end = r.end
    cdef int64_t base_offset = base_offset_o, lod = lod_o, count = count_o, ts_base = ts_o
    cdef bint log_append = log_append_o
    cdef int64_t rec_len, ts_delta, off_delta, klen, vlen, nh, hk, hv, offset, ts
    cdef const uint8_t* kptr
    cdef const uint8_t* vptr
    cdef Py_ssize_t rec_end, byte, row
    cdef int64_t i, j
    cdef int64_t scale = 1000 if micros else 1
    cdef int32_t kind = 1 if log_append else 0
    for i in range(count):
        _varlong(&r, &rec_len)
        if rec_len < 0 or rec_len > batch_end - r.pos:
            raise CorruptRecordError("record length runs past the batch")
        rec_end = r.pos + <Py_ssize_t>rec_len
        r.end = rec_end
        if r.pos >= r.end:
            raise CorruptRecordError("truncated record attributes")
        r.pos += 1  # attributes: unused
        _varlong(&r, &ts_delta)
        _varlong(&r, &off_delta)
        _varlong(&r, &klen)
        kptr = r.p + r.pos
        if klen >= 0:
            _length(&r, klen, b"key")
            r.pos += <Py_ssize_t>klen
        _varlong(&r, &vlen)
        vptr = r.p + r.pos
        if vlen >= 0:
            _length(&r, vlen, b"value")
            r.pos += <Py_ssize_t>vlen
        _varlong(&r, &nh)
        if nh < 0:
            raise CorruptRecordError("bad header count")
        offset = base_offset + off_delta
        keep = start <= offset < end
        if keep and header_keys is not None:
            row = offsets.used // 8
            byte = row >> 3
            if byte >= list_valid.used:
                list_valid.reserve(1)
                list_valid.data[byte] = 0
                list_valid.used = byte + 1
            if nh == 0:
                list_nulls[0] += 1
            else:
                list_valid.data[byte] |= <char>(1 << (row & 7))
        for j in range(nh):
            _varlong(&r, &hk)
            if hk < 0:
                raise CorruptRecordError("null header key")
            _length(&r, hk, b"header key")
            if keep and header_keys is not None:
                header_keys.append(r.p + r.pos, hk)
            r.pos += <Py_ssize_t>hk
            _varlong(&r, &hv)
            if hv >= 0:
                _length(&r, hv, b"header value")
            if keep and header_values is not None:
                header_values.append(r.p + r.pos, hv)
            if hv >= 0:
                r.pos += <Py_ssize_t>hv
        if r.pos != rec_end:
            raise CorruptRecordError("record length does not match its fields")
        r.end = batch_end
        if off_delta < 0 or off_delta > lod:
            raise CorruptRecordError(f"record offset delta {off_delta} outside the batch")
        if not keep:
            continue
        ts = ts_base if log_append else ts_base + ts_delta
        offsets.reserve(8)
        offsets.put64(offset)
        timestamps.reserve(8)
        timestamps.put64(<int64_t>(<uint64_t>ts * <uint64_t>scale))
        types.reserve(4)
        types.put32(kind)
        keys.append(kptr, klen)
        values.append(vptr, vlen)
        if header_keys is not None:
            list_offsets.reserve(4)
            list_offsets.put32(<int32_t>header_keys.length)
    if r.pos != batch_end:
        raise CorruptRecordError(f"{batch_end - r.pos} bytes after the last record")
    return 0
