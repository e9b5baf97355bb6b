"""Tenant SQL at the API: a table of hostile queries (each must be refused) and of ordinary ones (each must
pass), through ``check_sql`` (sqlglot) and ``sqlpolicy.check``; the tenant limits of runs. No Spark here: the
runner's check of Spark's own parse is ``test_sandbox_runs.py``'s."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.reports import kinds
from controlplane.reports.kinds import ParamError
from controlplane.reports.sqlcheck import check_sql
from controlplane.reports.sqlpolicy import Node, PolicyError, check

HOSTILE = [
    ("SELECT * FROM IDENTIFIER('text.`/etc/passwd`')", "IDENTIFIER"),
    ("SELECT * FROM IDENTIFIER('text.`/srv/var/clusters/*/broker.toml`')", "IDENTIFIER"),
    ("SELECT IDENTIFIER('reflect')('java.lang.System', 'getenv')", "syntax error"),
    ("SELECT reflect('java.lang.System', 'getenv', 'SECRET_KEY')", "function 'reflect'"),
    ("SELECT `reflect`('java.lang.System', 'exit', 0)", "function 'reflect'"),
    ("SELECT REFLECT('java.lang.System', 'exit', 0)", "function 'REFLECT'"),
    ("SELECT java_method('java.lang.System', 'exit', 0)", "function 'java_method'"),
    ("SELECT try_reflect('java.lang.System', 'getenv')", "function 'try_reflect'"),
    ("SELECT * FROM text.`/etc/passwd`", "only the topic views"),
    ("SELECT * FROM `text`.`/etc/passwd`", "only the topic views"),
    ("SELECT * FROM parquet.`/srv/var/reports`", "only the topic views"),
    ("SELECT * FROM json.`file:///etc/passwd`", "only the topic views"),
    ("SELECT * FROM orders, text.`/etc/passwd`", "only the topic views"),
    ("SELECT * FROM orders JOIN csv.`/etc/shadow` ON true", "only the topic views"),
    ("SELECT * FROM global_temp.orders", "only the topic views"),
    ("SELECT * FROM spark_catalog.default.orders", "only the topic views"),
    ("SELECT * FROM read_files('/etc')", "table function 'read_files'"),
    ("SELECT (SELECT reflect('a', 'b')) FROM orders", "function 'reflect'"),
    ("WITH x AS (SELECT java_method('a', 'b')) SELECT * FROM x", "function 'java_method'"),
    ("SELECT transform(array(1), x -> reflect('a', 'b')) FROM orders", "function 'reflect'"),
    ("SELECT * FROM orders WHERE key IN (SELECT reflect('a', 'b'))", "function 'reflect'"),
    ("SELECT input_file_name() FROM orders", "function 'input_file_name'"),
    ("SELECT xpath('<a/>', 'a')", "function 'xpath'"),
    ("SELECT from_protobuf(value, 'M', '/etc/passwd') FROM orders", "function 'from_protobuf'"),
    ("SELECT current_user()", "function"),
    ("SELECT version()", "function 'version'"),
    ("SELECT /*+ BROADCAST(o) */ * FROM orders o", "hints"),
    ("SELECT * FROM orders WITH (NOLOCK)", "not allowed"),
    ("SELECT * FROM orders VERSION AS OF 1", "not allowed"),
    ("SELECT :p FROM orders", "not allowed"),
    ("SET spark.sql.runSQLOnFiles=true", "must be a query"),
    ("RESET", "must be a query"),
    ("CREATE TEMPORARY FUNCTION f AS 'java.lang.Runtime'", "must be a query"),
    ("ADD JAR /tmp/x.jar", "must be a query"),
    ("CACHE TABLE t AS SELECT 1", "must be a query"),
    ("INSERT INTO orders SELECT * FROM orders", "must be a query"),
    ("EXPLAIN SELECT 1", "must be a query"),
    ("SELECT 1; SELECT reflect('a', 'b')", "exactly one query"),
    ("SELECT " + "(" * 5000 + "1" + ")" * 5000, "syntax error"),
    ("SELECT '" + "x" * 70_000 + "'", "at most"),
]

ORDINARY = [
    "SELECT count(*), approx_count_distinct(key), date_trunc('hour', timestamp) FROM orders GROUP BY 3",
    "SELECT CASE WHEN offset > 1 THEN 'a' ELSE 'b' END, CAST(value AS STRING), transform(array(1), x -> x + 1) "
    "FROM orders",
    "SELECT key_str, row_number() OVER (PARTITION BY key ORDER BY offset) FROM orders",
    "SELECT * FROM orders LATERAL VIEW explode(array(1)) t AS c",
    "SELECT count(*) FROM orders CROSS JOIN range(10)",
    "SELECT * FROM orders WHERE value_str RLIKE 'a' AND key IN (SELECT key FROM orders)",
    "SELECT * FROM VALUES (1, 2) AS t(a, b)",
    "WITH x AS (SELECT * FROM orders) SELECT o.key FROM x o JOIN orders p ON o.key = p.key",
    "SELECT key_str, count(*) AS n FROM orders GROUP BY key_str HAVING n > 2 ORDER BY n DESC LIMIT 5",
    "SELECT from_json(value_str, 'a INT').a, to_json(struct(key_str)), value_str::int, year(timestamp) FROM orders",
    "SELECT percentile_approx(offset, 0.5), sum(offset) FILTER (WHERE partition = 0) FROM orders",
    "SELECT window(timestamp, '1 minute').start, count(*) FROM orders GROUP BY 1",
    "SELECT * FROM orders UNION ALL SELECT * FROM orders",
]


@pytest.mark.parametrize(("sql", "words"), HOSTILE, ids=[h[0][:40] for h in HOSTILE])
def test_hostile_queries_are_refused_at_the_api(sql: str, words: str) -> None:
    with pytest.raises(ParamError) as refused:
        check_sql(sql, ["orders"])
    assert refused.value.field == "params.sql" and words in refused.value.message, refused.value.message
    assert "sqlglot" not in refused.value.message


@pytest.mark.parametrize("sql", ORDINARY + [
    kinds.builtin_sql(kind, params, kinds.TimeRange(None, None)).replace(" src", " orders")
    for kind, params in [("throughput", {"window": "1 minute"}), ("top_keys", {"limit": 10}),
                         ("value_size_histogram", {"bucket_bytes": 100}),
                         ("json_aggregate", {"field": "$.a", "group_by": "$.b", "functions": ["count", "sum"]})]])
def test_ordinary_queries_pass(sql: str) -> None:
    check_sql(sql, ["orders"])


@pytest.mark.parametrize(("tree", "words"), [
    (Node("plan", ("SetCommand",)), "'SET' is not allowed"),
    (Node("plan", ("Project",), (Node("function", ("system", "reflect")),)), "function 'system.reflect'"),
    (Node("plan", ("Project",), (Node("relation", ("orders",)), Node("relation", ("t",)))), "unknown view 't'"),
    (Node("plan", ("Project",), (Node("expression", ("SomethingNew",)),)), "'SomethingNew' is not allowed"),
    (Node("plan", ("Project",), (Node("generator", ("explode_files",)),)), "function 'explode_files'"),
    (Node("plan", ("Project",), (Node("table_function", ("range", "x")),)), "table function 'range.x'"),
    (Node("plan", ("UnresolvedHint",)), "is not allowed"),
    (Node("unknown", ("Placeholder",)), "'Placeholder' is not allowed"),
])
def test_policy_refuses_each_unknown_part(tree: Node, words: str) -> None:
    with pytest.raises(PolicyError, match=words):
        check(tree, ["orders"])


def test_policy_accepts_views_ctes_and_range() -> None:
    check(Node("plan", ("Root",), (Node("cte", ("x",)), Node("plan", ("Project",), (
        Node("relation", ("ORDERS",)), Node("relation", ("x",)), Node("table_function", ("range",)),
        Node("function", ("count",)), Node("expression", ("Add",)))))), ["orders"])


@pytest.mark.django_db(transaction=True)
def test_a_tenants_running_and_waiting_runs_are_bounded(settings: Any) -> None:
    from controlplane.core.actors import SYSTEM_ACTOR
    from controlplane.core.errors import QuotaExceeded
    from controlplane.reports.models import Report, ReportRun, RunStatus
    from controlplane.reports.runner import _claim
    from controlplane.reports.services import run_request
    from tests.controlplane.factories import ClusterFactory

    def report_of(tenant_cluster: Any) -> Report:
        return Report.objects.create(cluster=tenant_cluster, name="r", kind="sql",
                                     params={"sql": "SELECT 1", "topics": ["t"]})

    settings.SLUICE_REPORTS_TENANT_RUNNING = 2
    settings.SLUICE_REPORTS_TENANT_QUEUED = 3
    mine, theirs = report_of(ClusterFactory()), report_of(ClusterFactory())
    running = [ReportRun.objects.create(report=mine, definition={}, status=RunStatus.RUNNING) for _ in range(2)]
    waiting = ReportRun.objects.create(report=mine, definition={})
    other = ReportRun.objects.create(report=theirs, definition={})
    assert _claim(str(waiting.pk), "w") is None  # at its limit: stays queued
    assert ReportRun.objects.get(pk=waiting.pk).status == RunStatus.QUEUED
    assert _claim(str(other.pk), "w") is True  # another tenant's run is not held up
    ReportRun.objects.filter(pk=running[0].pk).update(status=RunStatus.SUCCEEDED)
    assert _claim(str(waiting.pk), "w") is True
    assert _claim(str(waiting.pk), "w") is False  # claimed once only
    for _ in range(3):
        ReportRun.objects.create(report=mine, definition={})
    with pytest.raises(QuotaExceeded) as refused:
        run_request(report=mine, actor=SYSTEM_ACTOR)
    assert refused.value.http_status == 429 and "3 report runs waiting" in refused.value.message
    run_request(report=theirs, actor=SYSTEM_ACTOR)


@pytest.mark.django_db
def test_the_reported_attacks_fail_closed_at_the_api(world_a: Any, world_b: Any) -> None:
    """Tenant B's member tries the attacks from the security review: on B's own cluster each is a 400 naming
    params.sql (nothing saved); on A's cluster every one is a 404 (A's cluster does not exist for B)."""
    from controlplane.reports.models import Report
    from controlplane.tenancy.models import Role
    from tests.controlplane.factories import ClusterFactory

    cluster_a, cluster_b = ClusterFactory(tenant=world_a.tenant), ClusterFactory(tenant=world_b.tenant)
    attacks = [
        "SELECT value FROM IDENTIFIER('text.`/srv/sluice/var/clusters/*/broker.toml`')",
        "SELECT reflect('java.lang.System', 'getenv', 'DATABASE_URL') AS leaked",
        "SELECT reflect('java.lang.System', 'exit', 0)",
        "SELECT * FROM text.`/srv/sluice/var/secret_key`",
    ]
    client = world_b.client(Role.MEMBER)
    for sql in attacks:
        body = {"name": "x", "kind": "sql", "params": {"topics": ["orders"], "sql": sql}}
        response = client.post(f"{world_b.base}/clusters/{cluster_b.pk}/reports", body, format="json")
        assert response.status_code == 400, response.json()
        assert "params.sql" in str(response.json()), response.json()
        response = client.post(f"/api/v1/tenants/{world_a.tenant.slug}/clusters/{cluster_a.pk}/reports", body,
                               format="json")
        assert response.status_code == 404, response.json()
    assert not Report.objects.exists()
