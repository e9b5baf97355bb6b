"""Server-side filters: a JMESPath expression evaluated against each record's document.

JMESPath is a query language with a specification and a pure-Python implementation: it can read and
compare but never call out, so a client's expression cannot run code (unlike ``eval``) and its cost is
bounded by the record's size. A record passes when the expression's result is truthy in JMESPath's
sense (``false``, ``null``, ``""``, ``[]`` and ``{}`` are false).

The document a filter sees::

    {"partition": 0, "offset": 12, "timestamp": 1700000000000,
     "key": "user-7", "value": "{\\"level\\": \\"error\\"}",    # text, or base64 when not UTF-8
     "key_json": null, "value_json": {"level": "error"},     # parsed JSON, null when not JSON
     "headers": {"source": "billing"}}                       # last value wins for a repeated name

Examples: ``key == 'user-7'``, ``contains(value, 'timeout')``, ``value_json.level == 'error'``,
``headers.source == 'billing' && value_json.amount > `100```.
"""

from __future__ import annotations

import jmespath
from jmespath import exceptions as jmespath_errors
from jmespath.parser import ParsedResult

from controlplane.kafkarest.tail.protocol import ProtocolError
from controlplane.kafkarest.tail.records import Record


class RecordFilter:
    """A compiled expression; stateless after construction, used on the event loop."""

    def __init__(self, expression: str) -> None:
        try:
            self._parsed: ParsedResult = jmespath.compile(expression)
        except jmespath_errors.JMESPathError as exc:
            raise ProtocolError("invalid_filter", f"Not a valid JMESPath expression: {exc}") from exc
        self.expression = expression

    def matches(self, record: Record) -> bool:
        """Whether the record passes; an expression that fails on this record (a type error, say
        ``contains(value_json.tags, 'x')`` where there are no tags) does not pass it."""
        try:
            result = self._parsed.search(record.document())
        except jmespath_errors.JMESPathError:
            return False
        return result not in (None, False, "", [], {})


def compile_filter(expression: str | None) -> RecordFilter | None:
    return RecordFilter(expression) if expression is not None else None
