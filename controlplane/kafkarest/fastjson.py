"""JSON for the REST Proxy's hot paths: orjson where it can, the standard library where it cannot.

orjson parses and writes JSON several times faster than :mod:`json` (py-spy: JSON was a fifth of the event
loop's time in ``records:batch``). It differs on a few things: it reads an integer beyond 64 bits as a float
(the value would change) and words its errors differently. So a document with a run of 19 or more digits, or
one orjson refuses, is handed to :func:`careful_loads`, the standard library held to what orjson refuses:
NaN and Infinity, numbers a double cannot hold (``1e400``), lone surrogates (``"\\ud800"``, which no UTF-8 can
carry), and bytes that are not UTF-8. (A produce stream's objects are parsed by ``_split.ObjectSplitter`` on
the same terms, its scan finding long integers as it goes.)

Every document is bounded before it is parsed: at most ``MAX_DEPTH`` levels of nesting (the standard library
recurses once a level: 5,000 levels were a RecursionError, a 500) and numbers of at most ``MAX_NUMBER_LENGTH``
characters (Jackson's default, so what Confluent's REST Proxy reads is read; Python refuses an integer of
4,300 digits with a ValueError its callers took for a server error). A refusal is a :class:`Refused` (a
ValueError) that says why.
"""

from __future__ import annotations

import json
import math
from typing import Any

import orjson

from controlplane.kafkarest._split import MAX_DEPTH, NestingTooDeep, ObjectSplitter, nesting_exceeds

MAX_NUMBER_LENGTH = 1000

# Where an integer could pass 64 bits (2**63 has 19 digits). A base64 string may hold such a run too: that
# document merely takes the slower parser. Found by mapping every digit to NUL and searching for 19 NULs: both
# loops in C, six times faster than the regular expression ``\d{19}``, which tried a match at every byte and cost
# more than orjson's parse of a 100-record batch. (A raw NUL is never valid JSON: at worst a slower parse.)
_DIGITS_TO_NUL = bytes.maketrans(b"0123456789", b"\0" * 10)
_RUN = b"\0" * 19


class Refused(ValueError):
    """A document that is JSON to the standard library but that this service does not take; the message says
    why, as a clause ("it nests deeper than 512 levels")."""


def _long_digit_run(data: bytes) -> bool:
    return data.translate(_DIGITS_TO_NUL).find(_RUN) >= 0


def loads(data: bytes) -> Any:
    """Parse JSON; raises :class:`json.JSONDecodeError`, UnicodeDecodeError or :class:`Refused` (all ValueErrors)."""
    if data[:1] == b"{":
        # An object (every produce body): the compiled scan finds its end and any long integer on the way, at a
        # fraction of the cost of the digit search below, which reads the whole body again (a 1 KiB-record
        # ``records:batch`` spent as long in it as in orjson's parse).
        values, position, status = ObjectSplitter().split(data)
        if status == 0 and position == len(data) and len(values) == 1:
            value = values[0]
            if type(value) is dict:
                return value
            if type(value) is NestingTooDeep:
                raise Refused(str(value))
            return careful_loads(data)
    if nesting_exceeds(data, MAX_DEPTH):  # orjson would take up to 1024 levels: the same bound for every document
        raise Refused(str(NestingTooDeep()))
    if not _long_digit_run(data):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return careful_loads(data)


def careful_loads(data: bytes) -> Any:
    """The standard library's parse of a document orjson refused or could misread, refusing what orjson refuses.

    The text is decoded strictly first: from bytes :mod:`json` lets UTF-8-encoded surrogates through. NaN,
    Infinity and overflowing numbers are caught by the decoder's hooks as they are read; lone surrogates, which
    an escape can spell anywhere, by one walk of the result (this path is rare: orjson takes the usual body).
    """
    if nesting_exceeds(data, MAX_DEPTH):
        raise Refused(str(NestingTooDeep()))
    value = _DECODER.decode(data.decode())
    _check_strings(value)
    return value


def _constant(name: str) -> Any:
    raise Refused(f"{name} is not a JSON number")


def _float(text: str) -> float:
    if len(text) > MAX_NUMBER_LENGTH:
        raise Refused(f"a number is longer than {MAX_NUMBER_LENGTH} characters")
    value = float(text)
    if not math.isfinite(value):
        raise Refused(f"the number {text[:40]} is out of range for a double")
    return value


def _int(text: str) -> int:
    if len(text) > MAX_NUMBER_LENGTH:
        raise Refused(f"a number is longer than {MAX_NUMBER_LENGTH} characters")
    return int(text)


_DECODER = json.JSONDecoder(parse_float=_float, parse_int=_int, parse_constant=_constant)


def _check_strings(value: Any) -> None:
    """Refuse a lone surrogate in any string or key. A stack, not recursion; the depth is bounded anyway."""
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is str:
            if not item.isascii():
                _utf8(item)
        elif type(item) is dict:
            for key, inner in item.items():
                if not key.isascii():
                    _utf8(key)
                stack.append(inner)
        elif type(item) is list:
            stack.extend(item)


def _utf8(text: str) -> None:
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        raise Refused(f"a string holds a lone surrogate ({text[exc.start]!r}), which UTF-8 cannot carry") from exc


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON (``separators=(",", ":")``, ``ensure_ascii=False``), as bytes."""
    try:
        return orjson.dumps(value)
    except TypeError:  # an integer beyond 64 bits, a nesting beyond orjson's 255 levels, or a type it does not know
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
