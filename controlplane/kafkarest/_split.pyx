# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The JSON objects of a REST produce stream, found at byte level and parsed by orjson.

Why compiled: ``ConcatenatedJson`` decoded every chunk to ``str`` and let the standard library's ``raw_decode``
find each object's end while parsing it, which cost more than twice orjson's parse of the same record. Finding
the ends needs only string state (a quote opens or closes a string, a backslash escapes the next byte in one)
and bracket depth, so this scan does that in one pass over the bytes, jumping through strings with ``memchr``.
UTF-8 needs no decoding for it: every byte of a multi-byte character is 0x80 or above, never a quote, a
backslash or a bracket. Each object found is parsed here too, which saves a Python loop slicing the spans (a
fifth of the parse's cost). An object cut off by the end of a chunk is not scanned again when the rest
arrives: the scan resumes where it stopped (the regular expression it replaces went back to the start of an
unfinished string each time, 45 s for an 8 MB base64 value in 64 KB chunks).

The scan does not validate: a span whose brackets do not match (``}`` and ``]`` both close, as ``{`` and ``[``
both open) is found all the same, and its parse refuses it. It also notes a run of 19 or more digits outside
strings, an integer that may pass 64 bits, which orjson would read as a float: that object is not given to
orjson (``controlplane.kafkarest.fastjson`` searches the whole document for such a run, digits in strings too,
a search that costs as much as the parse; here it is free).

Nesting is bounded here, where it costs one comparison a bracket: an object nested deeper than ``MAX_DEPTH``
is still scanned to its end (the scan keeps a count, not a stack), but its place in ``values`` is taken by a
:class:`NestingTooDeep`, never parsed. Deeper documents made the standard library's recursive parser raise
RecursionError (a 500, or a stream ended with no answer), and orjson refuses beyond 1024 levels anyway.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE

from orjson import JSONDecodeError, loads


cdef extern from "string.h":
    const void* memchr(const void* s, int c, size_t n) nogil


cdef enum:
    LONG_RUN = 19  # digits that may spell an integer beyond 64 bits: 2**63 has 19
    DEPTH_LIMIT = 512  # below orjson's 1024; the standard library's parse and dumps recurse within Python's limit

MAX_DEPTH = DEPTH_LIMIT


class NestingTooDeep(ValueError):
    """A JSON document nested deeper than ``MAX_DEPTH`` levels: refused unparsed."""

    def __init__(self) -> None:
        super().__init__(f"it nests deeper than {MAX_DEPTH} levels")


cdef class ObjectSplitter:
    """The objects of one stream, chunk by chunk; the scan state of an incomplete object is kept between calls."""

    cdef Py_ssize_t offset  # how far an incomplete object has been scanned, from its first byte; 0: none
    cdef Py_ssize_t depth
    cdef Py_ssize_t run  # digits in a row, outside strings
    cdef bint in_string
    cdef bint long_number
    cdef bint too_deep

    def split(self, bytes data not None):
        """The complete top-level objects in ``data``: ``(values, position, status)``.

        ``data`` must begin with what the previous call said to keep. ``values`` holds each complete object in
        order, as orjson's dict, or as its ``bytes`` when orjson refused it or it holds a long integer: the
        caller parses those with the standard library (a parsed object is always a dict, so bytes cannot be
        mistaken for one), or as a :class:`NestingTooDeep` when it nests deeper than ``MAX_DEPTH``. Whitespace
        between objects is skipped.

        Status 0: the end of ``data`` was reached, and ``position`` is where an incomplete object begins
        (``len(data)`` when there is none), so ``data[position:]`` is what to keep for the next call.
        Status 1: the byte at ``position`` is neither whitespace nor ``{``, not the start of a JSON object.
        """
        cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
        cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
        cdef Py_ssize_t pos = 0, begin, depth, run, k
        cdef const unsigned char* quote
        cdef unsigned char c
        cdef bint in_string, long_number, too_deep
        cdef list values = []
        if self.offset and (self.offset > n or p[0] != 123):
            raise ValueError("the data does not begin with the incomplete object kept from the last call")
        while True:
            if self.offset:  # resume the object the last call stopped in
                begin, pos = 0, self.offset
                depth, run, in_string, long_number = self.depth, self.run, self.in_string, self.long_number
                too_deep = self.too_deep
                self.offset = 0
            else:
                while pos < n and (p[pos] == 32 or p[pos] == 9 or p[pos] == 10 or p[pos] == 13):
                    pos += 1
                if pos == n:
                    return values, n, 0
                if p[pos] != 123:  # {
                    return values, pos, 1
                begin, depth, run, in_string, long_number, too_deep = pos, 0, 0, False, False, False
            while True:
                if in_string:  # on to the first quote that no odd run of backslashes escapes
                    quote = <const unsigned char*>memchr(p + pos, 34, <size_t>(n - pos))
                    if quote == NULL:
                        pos = n
                        break
                    pos = quote - p
                    k = pos - 1
                    while k > begin and p[k] == 92:  # a backslash; the opening quote stops this at the latest
                        k -= 1
                    in_string = (pos - 1 - k) % 2 == 1
                    pos += 1
                    continue
                if pos == n:
                    break
                c = p[pos]
                pos += 1
                if c == 34:  # "
                    in_string = True
                    run = 0
                elif 48 <= c <= 57:  # a digit
                    run += 1
                    if run >= LONG_RUN:
                        long_number = True
                else:
                    run = 0
                    if c == 123 or c == 91:  # { [
                        depth += 1
                        if depth > DEPTH_LIMIT:
                            too_deep = True
                    elif c == 125 or c == 93:  # } ]
                        depth -= 1
                        if depth == 0:
                            values.append(NestingTooDeep() if too_deep else _parse(
                                PyBytes_FromStringAndSize(<const char*>p + begin, pos - begin), long_number))
                            break
            if pos == n and depth:  # cut off: kept by the caller from ``begin``, resumed from here
                self.offset, self.depth, self.run = n - begin, depth, run
                self.in_string, self.long_number, self.too_deep = in_string, long_number, too_deep
                return values, begin, 0


cdef object _parse(bytes piece, bint long_number):
    if long_number:
        return piece
    try:
        return loads(piece)
    except JSONDecodeError:
        return piece


def nesting_exceeds(bytes data not None, Py_ssize_t limit):
    """Whether any JSON value in ``data`` nests deeper than ``limit`` levels, brackets in strings not counted: the
    bound ``ObjectSplitter`` keeps, for a document that is not an object (and for the standard library's parse,
    which recurses once a level). Like the splitter it does not validate: a ``}`` closes a ``[``."""
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
    cdef Py_ssize_t pos = 0, depth = 0, start, k
    cdef const unsigned char* quote
    cdef unsigned char c
    while pos < n:
        c = p[pos]
        pos += 1
        if c == 34:  # a string: on to the first quote that no odd run of backslashes escapes
            start = pos
            while True:
                quote = <const unsigned char*>memchr(p + pos, 34, <size_t>(n - pos))
                if quote == NULL:
                    return False
                pos = quote - p
                k = pos - 1
                while k >= start and p[k] == 92:
                    k -= 1
                pos += 1
                if (pos - 2 - k) % 2 == 0:
                    break
        elif c == 123 or c == 91:
            depth += 1
            if depth > limit:
                return True
        elif c == 125 or c == 93:
            depth -= 1
    return False
