"""Report definitions without Spark: parameter rules, SQL checks, errors, roles, schedules in beat's table."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.reports import engine, kinds
from controlplane.reports.kinds import ParamError
from controlplane.reports.sqlcheck import check_sql
from controlplane.tenancy.models import Role
from tests.controlplane.conftest import TenantWorld
from tests.controlplane.factories import ClusterFactory


@pytest.mark.parametrize(("kind", "params", "field"), [
    ("throughput", {"topic": "t", "window": "fortnightly"}, "params.window"),
    ("throughput", {}, "params.topic"),
    ("top_keys", {"topic": "t", "limit": 0}, "params.limit"),
    ("top_keys", {"topic": "t", "limit": True}, "params.limit"),
    ("value_size_histogram", {"topic": "t", "bucket_bytes": "10"}, "params.bucket_bytes"),
    ("json_aggregate", {"topic": "t", "field": "total"}, "params.field"),
    ("json_aggregate", {"topic": "t", "field": "$.a'b"}, "params.field"),
    ("json_aggregate", {"topic": "t", "field": "$.a", "functions": ["median"]}, "params.functions"),
    ("consumer_lag", {"topic": "t"}, "params.group"),
    ("sql", {"sql": "SELECT 1"}, "params.topics"),
    ("sql", {"topics": ["t"]}, "params.sql"),
    ("sql", {"sql": "SELECT 1", "topics": ["a.b", "a-b"]}, "params.topics"),
    ("top_keys", {"topic": "t", "colour": "red"}, "params.colour"),
])
def test_bad_parameters_name_their_field(kind: str, params: dict[str, Any], field: str) -> None:
    with pytest.raises(ParamError) as caught:
        kinds.normalize_params(kind, params)
    assert caught.value.field == field and caught.value.message


def test_defaults_and_views() -> None:
    assert kinds.normalize_params("top_keys", {"topic": "t"}) == {"topic": "t", "limit": 10}
    assert kinds.normalize_params("json_aggregate", {"topic": "t", "field": "$.x", "functions": ["max", "count"]}) \
        == {"topic": "t", "field": "$.x", "group_by": None, "functions": ["count", "max"]}
    assert kinds.view_name("orders.v2-eu") == "orders_v2_eu" and kinds.view_name("9lives") == "t_9lives"
    assert kinds.window_ms("30 seconds") == 30_000 and kinds.window_ms("1 Hour") == 3_600_000


@pytest.mark.parametrize(("value", "field"), [
    ({"last_minutes": 0}, "time_range.last_minutes"),
    ({"last_minutes": 5, "start": "2026-01-01T00:00:00Z"}, "time_range"),
    ({"start": "yesterday"}, "time_range.start"),
    ({"start": "2026-01-01T00:00:00"}, "time_range.start"),  # no zone
    ({"start": "2026-01-02T00:00:00Z", "end": "2026-01-01T00:00:00Z"}, "time_range.end"),
])
def test_bad_time_ranges(value: dict[str, Any], field: str) -> None:
    with pytest.raises(ParamError) as caught:
        kinds.normalize_time_range(value)
    assert caught.value.field == field


def test_sql_checks_syntax_statements_and_views() -> None:
    check_sql("WITH x AS (SELECT * FROM orders) SELECT o.key FROM x o JOIN orders p ON o.key = p.key", ["orders"])
    check_sql("SELECT count(*) FROM orders CROSS JOIN range(10)", ["orders"])
    for sql, words in [("SELEC 1", "syntax error"), ("SELECT * FROM order", "unknown view 'order'"),
                       ("SELECT 1; SELECT 2", "exactly one"), ("DROP TABLE orders", "must be a query"),
                       ("SELECT * FROM db.orders", "only the topic views"),
                       ("INSERT INTO orders SELECT * FROM orders", "must be a query")]:
        with pytest.raises(ParamError, match=words):
            check_sql(sql, ["orders"])


def test_readable_errors_drop_traces_and_plans() -> None:
    python = ("An exception was thrown from the Python worker. Please see the stack trace below.\n"
              "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
              "dataplane.client.spark.options.SparkSourceError: unknown topic 'x' (option 'subscribe')\n")
    assert engine.readable_error(RuntimeError(python)) == "SparkSourceError: unknown topic 'x' (option 'subscribe')"
    analysis = ("[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column `nosuch` cannot be resolved. SQLSTATE: 42703; "
                "line 1 pos 7;\n'Project ['nosuch]\n+- Range (0, 3)")
    assert engine.readable_error(RuntimeError(analysis)) == \
        "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column `nosuch` cannot be resolved. SQLSTATE: 42703"


def test_json_values() -> None:
    import datetime as dt
    import decimal

    assert engine.json_value(dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC)) == "2026-01-01T12:00:00Z"
    assert engine.json_value(decimal.Decimal("1.5")) == 1.5 and engine.json_value(b"\x00\x01") == "AAE="
    assert engine.json_value([("k", 1)]) == {"k": 1} and engine.json_value(float("nan")) is None


@pytest.mark.django_db
def test_api_validation_roles_and_schedules(world_a: TenantWorld) -> None:
    cluster = ClusterFactory(tenant=world_a.tenant)
    base = f"{world_a.base}/clusters/{cluster.pk}/reports"
    member = world_a.client(Role.MEMBER)
    cases = [
        ({"name": "x", "kind": "sql", "params": {"topics": ["t"], "sql": "SELEC 1"}}, "params.sql"),
        ({"name": "x", "kind": "sql", "params": {"topics": ["t"], "sql": "SELECT * FROM u"}}, "params.sql"),
        ({"name": "x", "kind": "pie", "params": {}}, "kind"),
        ({"name": "x", "kind": "top_keys", "params": {"topic": "t"}, "schedule": {"cron": "61 * * * *"}},
         "schedule.cron"),
        ({"name": "x", "kind": "top_keys", "params": {"topic": "t"}, "schedule": {"interval_seconds": 0}},
         "schedule.interval_seconds"),
        ({"name": "x", "kind": "top_keys", "params": {"topic": "t"}, "chart": {"kind": "bar", "x": "nope",
                                                                             "y": "records"}}, "chart.x"),
        ({"name": "x", "kind": "throughput", "params": {"topic": "t"}, "time_range": {"last_minutes": -1}},
         "time_range.last_minutes"),
    ]
    for body, field in cases:
        response = member.post(base, body, format="json")
        assert response.status_code == 400, (body, response.json())
        assert response.json()["code"] == "validation_error" and field in response.json()["extra"]["fields"], \
            response.json()
    # Viewers read but cannot create or run; nothing was written by the refused requests.
    viewer = world_a.client(Role.VIEWER)
    assert viewer.post(base, cases[0][0], format="json").status_code == 403
    assert viewer.get(base).json()["count"] == 0


@pytest.mark.django_db
def test_schedule_is_a_beat_entry(world_a: TenantWorld) -> None:
    from django_celery_beat.models import PeriodicTask

    from controlplane.core.actors import SYSTEM_ACTOR
    from controlplane.reports import services
    from controlplane.reports.models import Report

    cluster = ClusterFactory(tenant=world_a.tenant)
    report = Report.objects.create(cluster=cluster, name="r", kind="top_keys", params={"topic": "t", "limit": 10},
                                   schedule=services._normalize_schedule({"cron": "*/5 * * * *"}))
    services._sync_schedule(report)
    task = PeriodicTask.objects.get(name=f"report:{report.pk}")
    assert task.task == "reports.run_scheduled" and task.crontab is not None and task.crontab.minute == "*/5"
    assert task.args == f'["{report.pk}"]'
    report.schedule = {"interval_seconds": 60}
    services._sync_schedule(report)
    task.refresh_from_db()
    assert task.interval is not None and task.interval.every == 60 and task.crontab is None
    services.report_delete(report=report, actor=SYSTEM_ACTOR)
    assert not PeriodicTask.objects.filter(name=f"report:{report.pk}").exists()


@pytest.mark.django_db
def test_lists_have_no_n_plus_one_and_viewers_cannot_run(world_a: TenantWorld) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from controlplane.reports.models import Report, ReportRun

    cluster = ClusterFactory(tenant=world_a.tenant)
    base = f"{world_a.base}/clusters/{cluster.pk}/reports"
    owner = world_a.client(Role.OWNER)
    made = iter(range(1000))

    def report() -> Report:
        r = Report.objects.create(cluster=cluster, name=f"r{next(made)}", kind="top_keys",
                                  params={"topic": "t", "limit": 10})
        ReportRun.objects.create(report=r, status="succeeded", storage="rows")
        ReportRun.objects.create(report=r, status="failed", error="x")
        return r

    first = report()

    def queries(url: str) -> int:
        owner.get(url)
        with CaptureQueriesContext(connection) as ctx:
            assert owner.get(url).status_code == 200
        return len(ctx.captured_queries)

    for url, grow in ((base, report), (f"{base}/{first.pk}/runs",
                                        lambda: ReportRun.objects.create(report=first, status="queued"))):
        few = queries(url)
        for _ in range(10):
            grow()
        assert queries(url) == few, url
    listed = owner.get(base).json()["results"]
    assert listed[0]["last_run"]["status"] == "queued" and listed[1]["last_run"]["status"] == "failed"  # newest
    viewer = world_a.client(Role.VIEWER)
    run = ReportRun.objects.filter(report=first, status="queued").first()
    assert run is not None
    assert viewer.post(f"{base}/{first.pk}/run").status_code == 403
    assert viewer.post(f"{base}/{first.pk}/runs/{run.pk}/cancel").status_code == 403
    assert viewer.delete(f"{base}/{first.pk}").status_code == 403
    assert viewer.get(f"{base}/{first.pk}/runs/{run.pk}").json()["status"] == "queued"
    # A member cancels a queued run at once; a finished one is a 409.
    member = world_a.client(Role.MEMBER)
    assert member.post(f"{base}/{first.pk}/runs/{run.pk}/cancel").json()["status"] == "cancelled"
    assert member.post(f"{base}/{first.pk}/runs/{run.pk}/cancel").status_code == 409


@pytest.mark.django_db
def test_update_asks_the_cluster_only_about_changed_topics(world_a: TenantWorld) -> None:
    from controlplane.reports.models import Report

    cluster = ClusterFactory(tenant=world_a.tenant)  # no brokers: any question to it is a 503
    report = Report.objects.create(cluster=cluster, name="r", kind="top_keys", params={"topic": "t", "limit": 10},
                                   chart={"kind": "bar", "x": "key", "y": ["records"]})
    url = f"{world_a.base}/clusters/{cluster.pk}/reports/{report.pk}"
    member = world_a.client(Role.MEMBER)
    response = member.patch(url, {"name": "renamed", "time_range": {"last_minutes": 5}}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["name"] == "renamed" and response.json()["time_range"] == {"last_minutes": 5}
    response = member.patch(url, {"params": {"topic": "u"}}, format="json")
    assert response.status_code == 503 and response.json()["code"] == "cluster_unavailable"
    assert member.patch(url, {"params": {"topic": "u", "limit": 0}}, format="json").status_code == 400
    from controlplane.audit.models import AuditEvent

    actions = list(AuditEvent.objects.filter(tenant=world_a.tenant, target_id=str(report.pk))
                   .values_list("action", "actor_display"))
    assert actions == [("report.update", f"{world_a.tenant.slug}-member")]


@pytest.mark.django_db
def test_a_restarted_worker_fails_what_its_previous_life_left_running(world_a: TenantWorld) -> None:
    from controlplane.reports.models import Report, ReportRun
    from controlplane.reports.runner import runs_fail_orphaned

    report = Report.objects.create(cluster=ClusterFactory(tenant=world_a.tenant), name="r", kind="top_keys",
                                   params={"topic": "t", "limit": 10})
    mine = ReportRun.objects.create(report=report, status="running", worker="reports@h1")
    other = ReportRun.objects.create(report=report, status="running", worker="reports@h2")
    assert runs_fail_orphaned(worker="reports@h1") == 1
    mine.refresh_from_db()
    other.refresh_from_db()
    assert mine.status == "failed" and "run it again" in mine.error and other.status == "running"


@pytest.mark.django_db
def test_result_pages_and_bad_paging(world_a: TenantWorld) -> None:
    from controlplane.reports.models import Report, ReportResultRow, ReportRun

    report = Report.objects.create(cluster=ClusterFactory(tenant=world_a.tenant), name="r", kind="top_keys",
                                   params={"topic": "t", "limit": 10})
    run = ReportRun.objects.create(report=report, status="succeeded", storage="rows", row_count=3,
                                   columns=[{"name": "key", "type": "string"}, {"name": "records", "type": "bigint"}],
                                   definition={"chart": {"kind": "bar", "x": "key", "y": ["records"]}})
    ReportResultRow.objects.bulk_create([ReportResultRow(run=run, ordinal=i, values=[k, n])
                                         for i, (k, n) in enumerate([("a", 3), (None, 2), ("c,d", 1)])])
    url = f"{world_a.base}/clusters/{report.cluster_id}/reports/{report.pk}/runs/{run.pk}"
    viewer = world_a.client(Role.VIEWER)
    page = viewer.get(f"{url}/results?limit=2").json()
    assert page["results"] == [{"key": "a", "records": 3}, {"key": None, "records": 2}] and page["count"] == 3
    assert page["chart"] == {"kind": "bar", "x": "key", "y": ["records"]} and page["next"].endswith("offset=2")
    assert viewer.get(f"{url}/results?offset=2").json()["results"] == [{"key": "c,d", "records": 1}]
    for bad in ("limit=abc", "offset=-1", "limit=0"):
        response = viewer.get(f"{url}/results?{bad}")
        assert response.status_code == 400 and response.json()["code"] == "validation_error", bad
    csv_text = b"".join(viewer.get(f"{url}/download").streaming_content).decode()
    assert csv_text == 'key,records\r\na,3\r\n,2\r\n"c,d",1\r\n'
    assert b"".join(viewer.get(f"{url}/download?format=json").streaming_content) == \
        b'[{"key":"a","records":3},{"key":null,"records":2},{"key":"c,d","records":1}]'


@pytest.mark.django_db
def test_a_run_reads_an_authenticating_cluster_as_the_reports_owner(world_a: TenantWorld) -> None:
    import jwt
    from django.utils import timezone

    from controlplane.clusters.models import Agent, BrokerNode, Cluster
    from controlplane.clusters.observability import ClusterUnavailable
    from controlplane.clusters.principals import cluster_token_key
    from controlplane.reports.connection import connection_options
    from controlplane.reports.models import Report
    from controlplane.tenancy.selectors import actor_for

    cluster = ClusterFactory(tenant=world_a.tenant)
    now = timezone.now()
    agent = Agent.objects.create(host="h-owner", advertised_host="10.0.0.7", port_min=9092, port_max=9092,
                                 last_seen=now, started_at=now)
    BrokerNode.objects.create(cluster=cluster, node_id=1, agent=agent, port=9092)
    report = Report.objects.create(cluster=cluster, name="plain", kind="top_keys", params={"topic": "t", "limit": 1})
    assert connection_options(report) == {"kafka.bootstrap.servers": "10.0.0.7:9092"}

    Cluster.objects.filter(pk=cluster.pk).update(status={"security_protocol": "SASL_PLAINTEXT"})
    cluster.refresh_from_db()
    member = world_a.users[Role.MEMBER]
    owned = Report.objects.create(cluster=cluster, name="owned", kind="top_keys", params={"topic": "t", "limit": 1},
                                  owner_principal=actor_for(member).principal or "")
    options = connection_options(owned)
    assert options["kafka.sasl.mechanisms"] == "OAUTHBEARER" and "kafka.sasl.password" not in options
    claims = jwt.decode(options["kafka.sasl.oauthbearer.token"], cluster_token_key(cluster.kafka_cluster_id),
                        algorithms=["HS256"], audience=cluster.kafka_cluster_id)
    assert claims["sub"] == f"u-{member.pk}"  # type: ignore[attr-defined]  # the owner's principal, not the control plane's own
    system_made = Report.objects.create(cluster=cluster, name="system", kind="top_keys",
                                        params={"topic": "t", "limit": 1})
    with pytest.raises(ClusterUnavailable):
        connection_options(system_made)
