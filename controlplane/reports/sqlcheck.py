"""What the API can tell about a SQL report before Spark sees it: the syntax, and the views it names.

sqlglot's Spark dialect parses the query (the web tier runs no JVM); a parse error is a 400 with sqlglot's
line/column message. Tables the query reads must be the report's topic views (or its own CTEs), so a typo in
a topic name fails at the API, not minutes later in a worker. What only Spark's analyzer knows (column
names, function signatures) fails the run with Spark's message.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from controlplane.reports.kinds import ParamError, view_name

_READ_ONLY = (exp.Query,)  # SELECT, set operations, WITH ... SELECT


def check_sql(sql: str, topics: list[str]) -> None:
    try:
        statements = [s for s in sqlglot.parse(sql, read="spark") if s is not None]
    except (ParseError, TokenError) as e:
        raise ParamError("params.sql", f"Spark SQL syntax error: {_first_line(e)}") from None
    if len(statements) != 1:
        raise ParamError("params.sql", "must be exactly one query")
    tree = statements[0]
    if not isinstance(tree, _READ_ONLY):
        raise ParamError("params.sql", "must be a query (SELECT, WITH … SELECT, or a set operation of them)")
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    views = {view_name(t).lower() for t in topics}
    for table in tree.find_all(exp.Table):
        if isinstance(table.this, exp.Func) or not table.name:
            continue  # a table-valued function such as range(10)
        if table.db:
            raise ParamError("params.sql", f"'{table.sql(dialect='spark')}': only the topic views can be read "
                             f"({', '.join(sorted(views))})")
        name = table.name.lower()
        if name not in views and name not in ctes:
            raise ParamError("params.sql", f"unknown view '{table.name}': the views are "
                             f"{', '.join(sorted(views))} (one per topic in params.topics)")


def _first_line(e: Exception) -> str:
    errors = getattr(e, "errors", None)
    if errors:
        first = errors[0]
        return f"{first.get('description', 'invalid syntax')} at line {first.get('line')}, " \
               f"column {first.get('col')}"
    return str(e).splitlines()[0]
