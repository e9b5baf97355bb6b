"""What the console needs of reports without Spark: the kinds' parameters described for a form, a run's stage,
elapsed time and progress, and a bad SQL report's error as one readable line (no parser internals)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from sqlglot import exp

from controlplane.reports.kinds import normalize_params
from controlplane.reports.models import Report, ReportRun
from controlplane.reports.sqlcheck import check_sql
from controlplane.tenancy.models import Role
from tests.controlplane.conftest import TenantWorld
from tests.controlplane.factories import ClusterFactory

pytestmark = pytest.mark.django_db


def _value(param: dict[str, Any]) -> Any:
    """What a form would send for a required parameter without a default."""
    return {"topic": "orders", "topics": ["orders"], "sql": "SELECT count(*) AS n FROM orders",
            "json_path": "$.total", "string": "readers"}[param["type"]]


def test_kinds_describe_their_parameters_and_a_form_built_from_them_is_accepted(world_a: TenantWorld,
                                                                                 world_b: TenantWorld) -> None:
    cluster = ClusterFactory(tenant=world_a.tenant)
    base = f"{world_a.base}/clusters/{cluster.pk}/reports"
    response = world_a.client(Role.VIEWER).get(f"{base}/kinds")
    assert response.status_code == 200
    kinds = {k["kind"]: k for k in response.json()}
    assert set(kinds) == {"sql", "throughput", "top_keys", "value_size_histogram", "json_aggregate",
                          "consumer_lag"}
    limit = {p["name"]: p for p in kinds["top_keys"]["parameters"]}["limit"]
    assert limit == {"name": "limit", "type": "integer", "required": False, "default": 10, "help": "How many keys.",
                     "choices": None, "minimum": 1, "maximum": 10_000}
    functions = {p["name"]: p for p in kinds["json_aggregate"]["parameters"]}["functions"]
    assert functions["choices"] == ["count", "sum", "avg", "min", "max"] and functions["type"] == "choice_list"
    assert kinds["top_keys"]["columns"] == ["key", "records"] and kinds["sql"]["columns"] is None
    assert kinds["throughput"]["default_chart"] == {"kind": "line", "x": "window_start", "y": ["records", "bytes"]}
    member = world_a.client(Role.MEMBER)
    for kind, described in kinds.items():
        params = {p["name"]: _value(p) if p["default"] is None else p["default"]
                  for p in described["parameters"] if p["required"] or p["default"] is not None}
        # The API's own rules (its create then asks the cluster whether the topics exist: no cluster here).
        normalized = normalize_params(kind, params)
        if kind == "sql":
            check_sql(normalized["sql"], normalized["topics"])
        # A required parameter left out is refused by name.
        for p in described["parameters"]:
            if p["required"]:
                refused = member.post(base, {"name": "x", "kind": kind, "params": {
                    k: v for k, v in params.items() if k != p["name"]}}, format="json")
                assert refused.status_code == 400 and f"params.{p['name']}" in refused.json()["extra"]["fields"]
    assert world_b.client(Role.OWNER).get(f"{base}/kinds").status_code == 404


def test_a_runs_stage_elapsed_time_and_progress(world_a: TenantWorld) -> None:
    cluster = ClusterFactory(tenant=world_a.tenant)
    report = Report.objects.create(cluster=cluster, name="r", kind="top_keys", params={"topic": "t", "limit": 10})
    now = timezone.now()
    runs = {
        "queued": ReportRun.objects.create(report=report, status="queued"),
        "starting": ReportRun.objects.create(report=report, status="running", started_at=now - timedelta(seconds=3)),
        "running": ReportRun.objects.create(report=report, status="running", started_at=now - timedelta(minutes=2),
                                            progress={"jobs": 2, "tasks": 8, "tasks_done": 6, "tasks_active": 2}),
        "succeeded": ReportRun.objects.create(report=report, status="succeeded", started_at=now,
                                              finished_at=now, duration_ms=4200, storage="rows"),
        "failed": ReportRun.objects.create(report=report, status="failed", started_at=now - timedelta(seconds=1),
                                           finished_at=now, error="x"),
    }
    base = f"{world_a.base}/clusters/{cluster.pk}/reports/{report.pk}/runs"
    client = world_a.client(Role.VIEWER)
    got = {name: client.get(f"{base}/{run.pk}").json() for name, run in runs.items()}
    assert [got[n]["stage"] for n in runs] == ["queued", "starting", "running", "done", "done"]
    assert got["queued"]["elapsed_ms"] is None and got["queued"]["progress_percent"] is None
    assert got["starting"]["elapsed_ms"] >= 3000 and got["starting"]["progress_percent"] is None
    assert got["running"]["elapsed_ms"] >= 120_000 and got["running"]["progress_percent"] == 75.0
    assert (got["succeeded"]["elapsed_ms"], got["succeeded"]["progress_percent"]) == (4200, 100.0)
    assert got["failed"]["elapsed_ms"] == 1000 and got["failed"]["progress_percent"] is None
    listed = {r["id"]: r for r in client.get(base).json()["results"]}
    assert listed[str(runs["running"].pk)]["progress_percent"] == 75.0


_SQLGLOT_CLASSES = {name for name, value in vars(exp).items()
                    if isinstance(value, type) and issubclass(value, exp.Expression) and not name.isupper()}


@pytest.mark.parametrize(("sql", "says"), [
    ("SELEC * FROM orders", "an expression is missing near 'FROM'"),
    ("SELECT * FROM orders WHERE", "an expression is missing near 'WHERE'"),
    ("SELECT * FROM orders JOIN", "the end of the query"),
    ("SELECT TRANSFORM(key) USING 'cat' FROM orders", "'TRANSFORM … USING' is not allowed"),
    ("SELECT * FROM orders SORT BY key", "'SORT BY' is not allowed"),
    ("SELECT * FROM orders CLUSTER BY key", "'CLUSTER BY' is not allowed"),
    ("SELECT x'00' FROM orders", "hex literals"),
    ("SELECT CAST(value AS STRUCT<b: INT>) FROM orders", "STRUCT<…>"),
    ("SELECT ? FROM orders", "query parameters"),
    ("SELECT key FROM orders ORDER BY key NULLS", "unexpected input near 'NULLS'"),
])
def test_a_bad_sql_report_gets_one_readable_line(world_a: TenantWorld, sql: str, says: str) -> None:
    cluster = ClusterFactory(tenant=world_a.tenant)
    response = world_a.client(Role.MEMBER).post(f"{world_a.base}/clusters/{cluster.pk}/reports", {
        "name": "bad", "kind": "sql", "params": {"sql": sql, "topics": ["orders"]}}, format="json")
    assert response.status_code == 400
    message = response.json()["extra"]["fields"]["params.sql"][0]
    assert says in message and "\n" not in message
    assert not re.search(r"<class|<Token|TokenType|Required keyword", message), message
    leaked = [w for w in re.findall(r"[A-Za-z]+", message) if w in _SQLGLOT_CLASSES and not w.isupper()]
    assert not leaked, message
