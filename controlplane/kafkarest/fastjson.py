"""JSON for the REST Proxy's hot paths: orjson where it can, the standard library where it cannot.

orjson parses and writes JSON several times faster than :mod:`json` (py-spy: JSON was a fifth of the event
loop's time in ``records:batch``). It differs on a few things :mod:`json` accepts: it reads an integer beyond
64 bits as a float (the value would change), refuses NaN and Infinity, and words its errors differently. So a
document with a run of 19 or more digits, or one orjson refuses, is handed to :mod:`json`, which either parses
it exactly or raises the error clients have always seen. (A produce stream's objects are parsed by
``_split.ObjectSplitter`` on the same terms, its scan finding long integers as it goes.)
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from controlplane.kafkarest._split import ObjectSplitter

# Where an integer could pass 64 bits (2**63 has 19 digits). A base64 string may hold such a run too: that
# document merely takes the slower parser. Found by mapping every digit to NUL and searching for 19 NULs: both
# loops in C, six times faster than the regular expression ``\d{19}``, which tried a match at every byte and cost
# more than orjson's parse of a 100-record batch. (A raw NUL is never valid JSON: at worst a slower parse.)
_DIGITS_TO_NUL = bytes.maketrans(b"0123456789", b"\0" * 10)
_RUN = b"\0" * 19


def _long_digit_run(data: bytes) -> bool:
    return data.translate(_DIGITS_TO_NUL).find(_RUN) >= 0


def loads(data: bytes) -> Any:
    """Parse JSON; raises :class:`json.JSONDecodeError` (or UnicodeDecodeError) as :func:`json.loads`."""
    if data[:1] == b"{":
        # An object (every produce body): the compiled scan finds its end and any long integer on the way, at a
        # fraction of the cost of the digit search below, which reads the whole body again (a 1 KiB-record
        # ``records:batch`` spent as long in it as in orjson's parse).
        values, position, status = ObjectSplitter().split(data)
        if status == 0 and position == len(data) and len(values) == 1 and type(values[0]) is dict:
            return values[0]
    if not _long_digit_run(data):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(data)


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON (``separators=(",", ":")``, ``ensure_ascii=False``), as bytes."""
    try:
        return orjson.dumps(value)
    except TypeError:  # an integer beyond 64 bits, or a type orjson does not know
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
