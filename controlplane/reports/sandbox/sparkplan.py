"""Spark's own parse of a report's query as a ``sqlpolicy.Node`` tree, for the runner's policy check.

``sqlParser().parsePlan`` only parses: nothing is resolved or run, so a refused query has done nothing. The
walk covers what a plan can hide a part in: its children, its inner children (CTE definitions), its
expressions, and the plans of subquery expressions. Parser-folded ``IDENTIFIER('a.b')`` arrives as the
relation it names, so it meets the same view check as a plain name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from controlplane.reports.sqlpolicy import Node

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MAX_NODES = 20_000


def _seq(scala_seq: Any) -> list[Any]:
    out = []
    it = scala_seq.iterator()
    while it.hasNext():
        out.append(it.next())
    return out


class _Walker:
    def __init__(self, spark: SparkSession) -> None:
        jvm: Any = spark._jvm
        self._subquery = jvm.java.lang.Class.forName(
            "org.apache.spark.sql.catalyst.expressions.SubqueryExpression")
        self._count = 0

    def _tick(self) -> None:
        self._count += 1
        if self._count > MAX_NODES:
            raise ValueError(f"the query has more than {MAX_NODES} parts")

    def plan(self, p: Any) -> Node:
        self._tick()
        cls = p.getClass().getSimpleName()
        children = [self.expression(e) for e in _seq(p.expressions())]
        children += [self.plan(c) for c in _seq(p.children())]
        children += [self.plan(c) for c in _seq(p.innerChildren())]
        if cls == "UnresolvedRelation":
            return Node("relation", tuple(str(x) for x in _seq(p.multipartIdentifier())), tuple(children))
        if cls == "UnresolvedTableValuedFunction":
            return Node("table_function", tuple(str(x) for x in _seq(p.name())), tuple(children))
        if cls == "UnresolvedHint":
            return Node("hint", (str(p.name()),), tuple(children))
        return Node("plan", (cls,), tuple(children))

    def expression(self, e: Any) -> Node:
        self._tick()
        cls = e.getClass().getSimpleName()
        children = [self.expression(c) for c in _seq(e.children())]
        if self._subquery.isInstance(e):
            children.append(self.plan(e.plan()))
        if cls == "UnresolvedFunction":
            return Node("function", tuple(str(x) for x in _seq(e.nameParts())), tuple(children))
        if cls == "UnresolvedGenerator":
            return Node("generator", tuple(str(x) for x in _seq(e.name().nameParts())), tuple(children))
        return Node("expression", (cls,), tuple(children))


def policy_tree(spark: SparkSession, sql: str) -> Node:
    """The query as Spark parses it (``ParseException`` for bad syntax, as ``spark.sql`` would raise)."""
    parsed = spark._jsparkSession.sessionState().sqlParser().parsePlan(sql)
    tree = _Walker(spark).plan(parsed)
    ctes = _cte_names(parsed)
    return Node("plan", ("Root",), (*(Node("cte", (n,)) for n in ctes), tree)) if ctes else \
        Node("plan", ("Root",), (tree,))


def _cte_names(plan: Any) -> list[str]:
    """Names a WITH clause defines (``UnresolvedWith.cteRelations``: (name, SubqueryAlias) pairs), at any
    depth, so the views check accepts them as it accepts the topic views."""
    names: list[str] = []
    stack = [plan]
    while stack:
        p = stack.pop()
        if p.getClass().getSimpleName() == "UnresolvedWith":
            for pair in _seq(p.cteRelations()):
                names.append(str(pair._1()))
        stack.extend(_seq(p.children()))
        stack.extend(_seq(p.innerChildren()))
    return names
