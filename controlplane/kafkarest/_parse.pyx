# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The usual v3 produce record parsed in C, or None to leave it to ``records.parse_any_produce_request``.

Why compiled: parsing ``{"partition_id": 0, "value": {"type": "BINARY", "data": "<base64>"}}`` in Python cost
a microsecond a record, a fifth of a web process's time per record in REST produce: a quarter of that in
``binascii.a2b_base64`` alone, and a sixth in making the NamedTuple through its Python ``__new__``. Here the
common shape is read with a few dict lookups, its base64 decoded by a table, and the ProduceRecord filled in
directly.

Only that shape is taken: anything else -- another key in ``key``/``value`` (schema fields), a type spelled
otherwise than BINARY, JSON or STRING, headers, a timestamp, a partition not an exact non-negative ``int``,
data not an exact ``str``, base64 that is not canonical (padding other than one or two final ``=``), a string
that cannot be UTF-8 -- returns None, and the Python function, the one source of every error message, parses
it. Keys of the body other than the five it reads are ignored, as there (a ``records:batch`` entry has an
``id``). Tests check on generated bodies that a result is always the Python function's.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.dict cimport PyDict_CheckExact, PyDict_Size
from cpython.long cimport PyLong_CheckExact
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_SET_ITEM
from cpython.unicode cimport PyUnicode_AsUTF8String, PyUnicode_CheckExact

from controlplane.kafkarest import fastjson


cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t* size) except NULL  # cached in the str
    long long PyLong_AsLongLongAndOverflow(object o, int* overflow) except? -1


cdef extern from *:
    """
    /* An empty instance of a tuple subclass (a NamedTuple), as tuple.__new__ makes one before copying the
       items in: the subclass's own __new__ is a Python function, and calling it cost more than the parse. */
    static PyObject* sluice_tuple_subclass_alloc(PyObject* type, Py_ssize_t size) {
        return ((PyTypeObject*)type)->tp_alloc((PyTypeObject*)type, size);
    }
    """
    object tuple_subclass_alloc "sluice_tuple_subclass_alloc"(object type, Py_ssize_t size)


cdef enum:
    NOT_PLAIN = -1
    ABSENT = 0
    BINARY = 1
    JSON = 2
    STRING = 3
    RECORD_FIELDS = 7  # ProduceRecord: partition, key, value, key_type, value_type, headers, timestamp_ms

cdef tuple KIND_NAMES = (None, "BINARY", "JSON", "STRING")
cdef object _dumps = fastjson.dumps
cdef object _missing = object()
cdef object _record_type = None  # records.ProduceRecord, imported on first use: records imports this module

cdef unsigned char BASE64[256]  # a character's 6 bits, 0xFF for one outside the standard alphabet


cdef void _fill_base64() noexcept:
    cdef const char* alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    cdef int i
    for i in range(256):
        BASE64[i] = 0xFF
    for i in range(64):
        BASE64[<unsigned char>alphabet[i]] = i


_fill_base64()


cdef object _base64(object text):
    """``binascii.a2b_base64(text, strict_mode=True)`` for canonical base64 (length a multiple of 4, only the
    alphabet, then at most two ``=``); None for anything else, right or wrong, which binascii then judges."""
    cdef Py_ssize_t n, i, o = 0, quads, pad = 0
    cdef const unsigned char* s
    try:
        s = <const unsigned char*>PyUnicode_AsUTF8AndSize(text, &n)
    except UnicodeEncodeError:
        return None
    if n % 4:
        return None
    if n and s[n - 1] == 61:  # =
        pad = 2 if s[n - 2] == 61 else 1
    quads = n // 4 - (1 if pad else 0)
    out = PyBytes_FromStringAndSize(NULL, n // 4 * 3 - pad)
    cdef unsigned char* w = <unsigned char*>PyBytes_AS_STRING(out)
    cdef unsigned int a, b, c, d
    for i in range(0, quads * 4, 4):
        a, b, c, d = BASE64[s[i]], BASE64[s[i + 1]], BASE64[s[i + 2]], BASE64[s[i + 3]]
        if (a | b | c | d) & 0x80:
            return None
        a = a << 18 | b << 12 | c << 6 | d
        w[o] = <unsigned char>(a >> 16)
        w[o + 1] = <unsigned char>(a >> 8)
        w[o + 2] = <unsigned char>a
        o += 3
    if pad:
        i = quads * 4
        a, b, c = BASE64[s[i]], BASE64[s[i + 1]], (BASE64[s[i + 2]] if pad == 1 else 0)
        if (a | b | c) & 0x80:
            return None
        w[o] = <unsigned char>(a << 2 | b >> 4)
        if pad == 1:
            w[o + 1] = <unsigned char>(b << 4 | c >> 2)
    return out


cdef object _payload(object spec, int* kind):
    """A key or value spec's bytes, its kind in ``kind`` (ABSENT for None, NOT_PLAIN to decline)."""
    kind[0] = NOT_PLAIN
    if spec is None:
        kind[0] = ABSENT
        return None
    if not PyDict_CheckExact(spec) or PyDict_Size(spec) != 2:
        return None
    name = (<dict>spec).get("type")
    data = (<dict>spec).get("data", _missing)
    if data is _missing or not PyUnicode_CheckExact(name):
        return None
    if <str>name == "JSON":
        try:
            value = _dumps(data)
        except Exception:  # the Python function raises it again
            return None
        kind[0] = JSON
        return value
    if <str>name == "BINARY":
        if data is None:
            kind[0] = BINARY
            return None
        if not PyUnicode_CheckExact(data):
            return None
        value = _base64(data)
        if value is not None:
            kind[0] = BINARY
        return value
    if <str>name == "STRING":
        if data is None:
            kind[0] = STRING
            return None
        if not PyUnicode_CheckExact(data):
            return None
        try:
            value = PyUnicode_AsUTF8String(data)
        except UnicodeEncodeError:  # a lone surrogate
            return None
        kind[0] = STRING
        return value
    return None


def parse_plain(object body):
    """``parse_produce_request(body)`` when ``body`` has the usual shape, else None (see the module)."""
    global _record_type
    cdef int overflow = 0, key_kind, value_kind
    if not PyDict_CheckExact(body):
        return None
    if (<dict>body).get("headers") is not None or (<dict>body).get("timestamp") is not None:
        return None
    partition = (<dict>body).get("partition_id")
    if partition is not None:
        if not PyLong_CheckExact(partition):
            return None
        if PyLong_AsLongLongAndOverflow(partition, &overflow) < 0 and overflow <= 0:  # overflow: beyond 64 bits
            return None
    key = _payload((<dict>body).get("key"), &key_kind)
    if key_kind == NOT_PLAIN:
        return None
    value = _payload((<dict>body).get("value"), &value_kind)
    if value_kind == NOT_PLAIN:
        return None
    if _record_type is None:
        from controlplane.kafkarest.records import ProduceRecord
        _record_type = ProduceRecord
    headers = []  # made first: nothing is allocated while the record has empty slots
    record = tuple_subclass_alloc(_record_type, RECORD_FIELDS)
    _set(record, 0, partition)
    _set(record, 1, key)
    _set(record, 2, value)
    _set(record, 3, KIND_NAMES[key_kind])
    _set(record, 4, KIND_NAMES[value_kind])
    _set(record, 5, headers)
    _set(record, 6, None)
    return record


cdef inline void _set(object record, Py_ssize_t index, object item) noexcept:
    Py_INCREF(item)  # PyTuple_SET_ITEM takes the reference
    PyTuple_SET_ITEM(record, index, item)
