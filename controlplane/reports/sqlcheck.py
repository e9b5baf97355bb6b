"""The API's check of a SQL report: syntax, one query, and the allowlists of ``reports.sqlpolicy``.

sqlglot's Spark dialect parses the query (the web tier runs no JVM); a parse error is a 400 with sqlglot's
line/column message. The tree is turned into ``sqlpolicy.Node``s and checked against the same allowlists the
sandboxed runner applies to Spark's own parse: only query syntax sqlglot knows, functions Spark names in its
registry's safe groups (a typed sqlglot function is named as sqlglot writes it back in Spark SQL), tables
that are the report's topic views or its CTEs, ``range`` as the one table function, and no hints. What only
Spark's analyzer knows (column names, function signatures) fails the run with Spark's message.
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, SqlglotError, TokenError

from controlplane.reports.kinds import ParamError, view_name
from controlplane.reports.sqlpolicy import Node, PolicyError, check

MAX_SQL_CHARS = 64 * 1024  # a report's query, not a program: also bounds the parsers' recursion
MAX_DEPTH = 200  # nesting of the parsed tree (deeper input is refused before it is walked recursively)
_CALL = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(")

# sqlglot node classes of query syntax (functions are checked by name, see ``_node``).
_SYNTAX: frozenset[type[exp.Expression]] = frozenset({
    exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Subquery, exp.With, exp.CTE, exp.From, exp.Join,
    exp.Where, exp.Group, exp.Having, exp.Qualify, exp.Order, exp.Ordered, exp.Limit, exp.Offset,
    exp.Distinct, exp.Column, exp.Identifier, exp.Star, exp.Literal, exp.Alias, exp.TableAlias, exp.Paren,
    exp.And, exp.Or, exp.Not, exp.EQ, exp.NEQ, exp.NullSafeEQ, exp.NullSafeNEQ, exp.GT, exp.GTE, exp.LT,
    exp.LTE, exp.Is, exp.In, exp.Between, exp.Like, exp.ILike, exp.RegexpLike, exp.Add, exp.Sub, exp.Mul,
    exp.Div, exp.IntDiv, exp.Mod, exp.Neg, exp.BitwiseAnd, exp.BitwiseOr, exp.BitwiseXor, exp.BitwiseNot,
    exp.BitwiseLeftShift, exp.BitwiseRightShift, exp.Case, exp.If, exp.Cast, exp.TryCast, exp.DataType,
    exp.DataTypeParam, exp.Window, exp.WindowSpec, exp.Interval, exp.Var, exp.Boolean, exp.Null, exp.Lambda,
    exp.Tuple, exp.Values, exp.Lateral, exp.TableSample, exp.Cube, exp.Rollup, exp.GroupingSets, exp.Filter,
    exp.Bracket, exp.Dot, exp.DPipe, exp.PropertyEQ, exp.Escape, exp.Any, exp.All, exp.Exists, exp.Slice,
    exp.Pivot, exp.PivotAlias, exp.Kwarg, exp.Collate, exp.IgnoreNulls, exp.RespectNulls,
})


def check_sql(sql: str, topics: list[str]) -> None:
    if len(sql) > MAX_SQL_CHARS:
        raise ParamError("params.sql", f"must be at most {MAX_SQL_CHARS} characters")
    try:
        statements = [s for s in sqlglot.parse(sql, read="spark") if s is not None]
    except (ParseError, TokenError) as e:
        raise ParamError("params.sql", f"Spark SQL syntax error: {_first_line(e)}") from None
    except (SqlglotError, RecursionError):
        raise ParamError("params.sql", "Spark SQL syntax error: the query cannot be read") from None
    if len(statements) != 1:
        raise ParamError("params.sql", "must be exactly one query")
    tree = statements[0]
    if not isinstance(tree, exp.Query):
        raise ParamError("params.sql", "must be a query (SELECT, WITH … SELECT, or a set operation of them)")
    try:
        check(_node(tree, 0), [view_name(t) for t in topics])  # type: ignore[arg-type]
    except PolicyError as e:
        raise ParamError("params.sql", str(e)) from None


def _node(e: exp.Expression, depth: int) -> Node:
    """``e`` as a policy tree: tables as relations or table functions, functions by their Spark name."""
    if depth > MAX_DEPTH:
        raise PolicyError(f"the query is nested more than {MAX_DEPTH} levels deep")
    children = tuple(_node(c, depth + 1) for c in e.iter_expressions())
    if isinstance(e, exp.Table):
        if isinstance(e.this, exp.Func):
            name = _function_name(e.this) or type(e.this).__name__
            return Node("table_function", (name,))
        parts = tuple(p for p in (e.catalog, e.db, e.name) if p)
        return Node("relation", parts or ("",), children)
    if isinstance(e, exp.Hint | exp.JoinHint):
        return Node("hint", ("hint",))
    if isinstance(e, exp.CTE):
        return Node("cte", (e.alias_or_name,), children)
    if isinstance(e, exp.Func) and type(e) not in _SYNTAX:
        called = _function_name(e)
        if called is None:
            return Node("unknown", (_label(e),), children)
        return Node("function", (called,), children)
    if type(e) in _SYNTAX or type(e).__name__.startswith("JSONPath"):
        return Node("syntax", (type(e).__name__,), children)
    return Node("unknown", (_label(e),), children)


# What the author wrote, for refused syntax sqlglot has a class for: never the class name itself.
_WORDS = {"QueryTransform": "TRANSFORM … USING", "Cluster": "CLUSTER BY", "Distribute": "DISTRIBUTE BY",
          "Sort": "SORT BY", "HexString": "X'…' (hex literals)", "BitString": "B'…' (bit literals)",
          "Placeholder": "query parameters (?, {…})", "Parameter": "query parameters (@…, $…)",
          "ColumnDef": "STRUCT<…> types with fields", "Command": "commands", "Into": "SELECT … INTO",
          "Set": "SET", "SetItem": "SET"}
_SNIPPET = 60


def _label(e: exp.Expression) -> str:
    """A refused node as its author would recognise it: a known phrase, else the SQL text it came from."""
    word = _WORDS.get(type(e).__name__)
    if word is not None:
        return word
    try:
        text = " ".join(e.sql(dialect="spark").split())
    except (SqlglotError, ValueError, RecursionError):
        text = ""
    if not text:
        return "this syntax"
    return text if len(text) <= _SNIPPET else text[:_SNIPPET - 1] + "…"


def _function_name(e: exp.Func) -> str | None:
    """The function Spark will call: sqlglot's Spark SQL for the node, up to its "(" (None for a function
    sqlglot writes as an operator or keyword syntax, e.g. ``CASE``)."""
    if isinstance(e, exp.Anonymous):
        return str(e.name)
    m = _CALL.match(e.sql(dialect="spark"))
    return m.group(1) if m else None


_CLASS_NAME = re.compile(r"\s*(?:for )?<class '[^']*'>")
_TOKEN = re.compile(r"<Token token_type: TokenType\.(\w+), text: (.*?), line: \d+, col: \d+, start: \d+, "
                    r"end: \d+, comments: \[.*?\]>")
_REQUIRED = re.compile(r"Required keyword: '\w+' missing(?: for [\w.]+)?")


def _token(match: re.Match[str]) -> str:
    return "the end of the query" if match.group(1) == "SENTINEL" else f"'{match.group(2)}'"


def _readable(description: str) -> str:
    """sqlglot's wording without its internals: class names, token reprs, argument names."""
    text = _CLASS_NAME.sub("", description)
    text = _TOKEN.sub(_token, text)
    text = _REQUIRED.sub("an expression is missing", text)
    text = text.replace("Invalid expression / Unexpected token", "unexpected input")
    return " ".join(text.split()) or "invalid syntax"


def _first_line(e: Exception) -> str:
    """sqlglot's first error in one line the author can read: what, near which text, where."""
    errors = getattr(e, "errors", None)
    if errors:
        first = errors[0]
        description = _readable(str(first.get("description") or "invalid syntax"))
        near = " ".join(str(first.get("highlight") or "").split())
        where = f" near '{near[:_SNIPPET]}'" if near else ""
        return f"{description}{where} at line {first.get('line')}, column {first.get('col')}"
    return _readable(str(e).splitlines()[0] if str(e) else "invalid syntax")
