"""Reports end to end: the API, a real Celery worker running Spark (local[2]) on a real broker's records."""

from __future__ import annotations

import csv
import io
import json
import uuid
from typing import Any

import pytest

from controlplane.tenancy.models import Role
from tests.controlplane.conftest import make_world
from tests.controlplane.managed.conftest import wait_for
from tests.controlplane.reports.conftest import ReportsStack, wait_for_run

pytestmark = [pytest.mark.xdist_group("spark"), pytest.mark.django_db(transaction=True)]

TS0 = 1_699_999_980_000  # a whole minute (ms)
KEYS = ["a", "a", "b", "a", "c", "b", "a", "b", "a", "c", "b", "a"]  # a: 6, b: 4, c: 2


def _topic(kafka: dict[str, str], partitions: int = 1) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"r-{uuid.uuid4().hex[:10]}"
    admin = AdminClient(kafka)  # held: a collected client fails its futures
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def _produce(kafka: dict[str, str], topic: str, records: list[tuple[int, bytes | None, bytes, int | None]]) -> None:
    from confluent_kafka import Producer

    producer = Producer({**kafka, "linger.ms": 5})
    for partition, key, value, ts in records:
        producer.produce(topic, key=key, value=value, partition=partition, **({"timestamp": ts} if ts else {}))
    assert producer.flush(30) == 0


def _orders(kafka: dict[str, str]) -> tuple[str, list[dict[str, Any]]]:
    """12 JSON records over 2 partitions, 20 s apart from TS0: 3 per minute."""
    topic = _topic(kafka, 2)
    values = [{"amount": i, "region": "eu" if i % 2 else "us"} for i in range(12)]
    _produce(kafka, topic, [(i % 2, KEYS[i].encode(), json.dumps(v).encode(), TS0 + i * 20_000)
                                for i, v in enumerate(values)])
    return topic, values


def _create(client: Any, base: str, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post(f"{base}/reports", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def _run(client: Any, base: str, report: dict[str, Any], stack: ReportsStack) -> dict[str, Any]:
    response = client.post(f"{base}/reports/{report['id']}/run")
    assert response.status_code == 202, response.json()
    run = wait_for_run(client, f"{base}/reports/{report['id']}/runs/{response.json()['id']}", stack)
    assert run["status"] == "succeeded", (run.get("error"), run)
    return run


def _rows(client: Any, base: str, report: dict[str, Any], run: dict[str, Any]) -> list[dict[str, Any]]:
    page = client.get(f"{base}/reports/{report['id']}/runs/{run['id']}/results?limit=1000").json()
    assert page["count"] == len(page["results"])
    return page["results"]


def test_sql_and_builtin_kinds_compute_exactly(reports_stack: ReportsStack, cluster_for: Any) -> None:
    world = make_world("rep-a")
    cluster = cluster_for(world.tenant)
    client, base = world.client(Role.MEMBER), f"{world.base}/clusters/{cluster.pk}"
    topic, values = _orders(reports_stack.kafka)
    view = topic.replace("-", "_")
    sizes = [len(KEYS[i]) + len(json.dumps(v)) for i, v in enumerate(values)]
    cases: list[tuple[dict[str, Any], list[dict[str, Any]]]] = [
        ({"kind": "sql", "params": {"topics": [topic], "sql": (
            f"SELECT key_str AS key, count(*) AS n, sum(CAST(get_json_object(value_str, '$.amount') AS INT)) AS total "
            f"FROM {view} GROUP BY key_str ORDER BY key")}},
         [{"key": k, "n": KEYS.count(k), "total": sum(i for i, kk in enumerate(KEYS) if kk == k)} for k in "abc"]),
        ({"kind": "throughput", "params": {"topic": topic, "window": "1 minute"}},
         [{"window_start": f"2023-11-14T22:{13 + m:02d}:00Z", "records": 3, "bytes": sum(sizes[3 * m:3 * m + 3])}
          for m in range(4)]),
        ({"kind": "top_keys", "params": {"topic": topic, "limit": 2}},
         [{"key": "a", "records": 6}, {"key": "b", "records": 4}]),
        ({"kind": "value_size_histogram", "params": {"topic": topic, "bucket_bytes": 5}},
         [{"bucket_start": b, "bucket_end": b + 5,
           "records": sum(1 for v in values if len(json.dumps(v)) // 5 * 5 == b)}
          for b in sorted({len(json.dumps(v)) // 5 * 5 for v in values})]),
        ({"kind": "json_aggregate", "params": {"topic": topic, "field": "$.amount", "group_by": "$.region"}},
         [{"group": "eu", "count": 6, "sum": 36.0, "avg": 6.0, "min": 1.0, "max": 11.0},
          {"group": "us", "count": 6, "sum": 30.0, "avg": 5.0, "min": 0.0, "max": 10.0}]),
        # An absolute time range: the second minute only (end exclusive).
        ({"kind": "sql", "params": {"topics": [topic], "sql": f"SELECT offset, partition FROM {view} ORDER BY 2, 1"},
          "time_range": {"start": "2023-11-14T22:14:00Z", "end": "2023-11-14T22:15:00Z"}},
         [{"offset": 2, "partition": 0}, {"offset": 1, "partition": 1}, {"offset": 2, "partition": 1}]),
    ]
    assert values and TS0 // 60_000 * 60_000 == TS0
    for i, (body, expected) in enumerate(cases):
        report = _create(client, base, {"name": f"r{i}", **body})
        run = _run(client, base, report, reports_stack)
        assert _rows(client, base, report, run) == expected, body
        assert run["records_scanned"] == (3 if "time_range" in body else 12), run
        assert run["storage"] == "rows" and run["row_count"] == len(expected)
        assert run["started_at"] and run["finished_at"] and run["duration_ms"] >= 0
    # The chart description comes with the results (a built-in kind's default).
    reports = client.get(f"{base}/reports?ordering=created_at").json()["results"]
    assert reports[1]["chart"] == {"kind": "line", "x": "window_start", "y": ["records", "bytes"]}
    assert reports[1]["last_run"]["status"] == "succeeded"


def test_consumer_lag_trend_from_committed_offsets(reports_stack: ReportsStack, cluster_for: Any) -> None:
    from confluent_kafka import Consumer, TopicPartition

    world = make_world("rep-lag")
    cluster = cluster_for(world.tenant)
    client, base = world.client(Role.MEMBER), f"{world.base}/clusters/{cluster.pk}"
    topic = _topic(reports_stack.kafka, 2)
    _produce(reports_stack.kafka, topic, [(i % 2, None, b"x", None) for i in range(10)])  # 5 per partition
    for group, commits in (("lag-g", [(0, 4), (1, 1)]), ("other-g", [(0, 5), (1, 5)])):
        consumer = Consumer({**reports_stack.kafka, "group.id": group})
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in commits], asynchronous=False)
        consumer.close()
    report = _create(client, base, {"name": "lag", "kind": "consumer_lag",
                                    "params": {"topic": topic, "group": "lag-g", "window": "1 day"}})
    rows = _rows(client, base, report, _run(client, base, report, reports_stack))
    assert rows[-1] | {"window_end": None} == {"window_end": None, "end_offset": 10, "committed_offset": 5, "lag": 5}


def test_large_result_is_parquet_paged_and_downloaded(reports_stack: ReportsStack, cluster_for: Any) -> None:
    world = make_world("rep-big")
    cluster = cluster_for(world.tenant)
    client, base = world.client(Role.VIEWER), f"{world.base}/clusters/{cluster.pk}"
    topic, _ = _orders(reports_stack.kafka)
    view = topic.replace("-", "_")
    report = _create(world.client(Role.MEMBER), base, {"name": "big", "kind": "sql", "params": {
        "topics": [topic], "sql": f"SELECT id, n, 'x,\"y' AS s FROM range(25000) CROSS JOIN "
                                  f"(SELECT count(*) AS n FROM {view}) ORDER BY id"}})
    run = _run(world.client(Role.MEMBER), base, report, reports_stack)
    assert run["storage"] == "parquet" and run["row_count"] == 25000
    runs = f"{base}/reports/{report['id']}/runs/{run['id']}"
    page = client.get(f"{runs}/results?limit=3&offset=24998").json()
    assert page["results"] == [{"id": 24998, "n": 12, "s": 'x,"y'}, {"id": 24999, "n": 12, "s": 'x,"y'}]
    assert page["next"] is None and page["previous"].endswith("offset=24995")
    assert client.get(f"{runs}/results?limit=2").json()["results"][1] == {"id": 1, "n": 12, "s": 'x,"y'}
    response = client.get(f"{runs}/download?format=csv")
    assert response.status_code == 200 and response.streaming and response["Content-Type"].startswith("text/csv")
    table = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert table[0] == ["id", "n", "s"] and len(table) == 25001 and table[25000] == ["24999", "12", 'x,"y']
    response = client.get(f"{runs}/download?format=json")
    data = json.loads(b"".join(response.streaming_content))
    assert len(data) == 25000 and data[7] == {"id": 7, "n": 12, "s": 'x,"y'}
    assert client.get(f"{runs}/download?format=xml").status_code == 400


def test_failures_are_readable_and_cancel_stops_a_running_job(reports_stack: ReportsStack,
                                                             cluster_for: Any) -> None:
    world = make_world("rep-fail")
    cluster = cluster_for(world.tenant)
    client, base = world.client(Role.MEMBER), f"{world.base}/clusters/{cluster.pk}"
    topic, _ = _orders(reports_stack.kafka)
    view = topic.replace("-", "_")
    failing = {"unresolved": (f"SELECT no_such_column FROM {view}", "no_such_column"),
               "raised": (f"SELECT raise_error(concat('bad record ', key_str)) FROM {view}", "bad record")}
    for name, (sql, words) in failing.items():
        report = _create(client, base, {"name": name, "kind": "sql", "params": {"topics": [topic], "sql": sql}})
        run_id = client.post(f"{base}/reports/{report['id']}/run").json()["id"]
        run = wait_for_run(client, f"{base}/reports/{report['id']}/runs/{run_id}", reports_stack)
        assert run["status"] == "failed" and words in run["error"], run
        assert "\n\tat " not in run["error"] and "Traceback" not in run["error"] and len(run["error"]) < 600
        result = client.get(f"{base}/reports/{report['id']}/runs/{run_id}/results")
        assert result.status_code == 409 and result.json()["code"] == "no_result"
    # A long job: cancelled while it runs, then the worker goes on with the next report.
    slow = _create(client, base, {"name": "slow", "kind": "sql", "params": {"topics": [topic], "sql": (
        f"SELECT count(*) AS n FROM {view} CROSS JOIN range(1000000000000)")}})
    run_id = client.post(f"{base}/reports/{slow['id']}/run").json()["id"]
    url = f"{base}/reports/{slow['id']}/runs/{run_id}"
    wait_for(lambda: client.get(url).json()["progress"].get("tasks_active"), 180, "the long job's tasks to run",
             detail=lambda: client.get(url).json())
    response = client.post(f"{url}/cancel")
    assert response.status_code == 200, response.json()
    run = wait_for_run(client, url, reports_stack, timeout=120)
    assert run["status"] == "cancelled" and run["error"] == "Cancelled.", run
    assert client.post(f"{url}/cancel").status_code == 409
    quick = _create(client, base, {"name": "quick", "kind": "top_keys", "params": {"topic": topic, "limit": 1}})
    assert _rows(client, base, quick, _run(client, base, quick, reports_stack)) == [{"key": "a", "records": 6}]


def test_schedule_runs_on_beat(reports_stack: ReportsStack, cluster_for: Any) -> None:
    from django_celery_beat.models import PeriodicTask

    world = make_world("rep-beat")
    cluster = cluster_for(world.tenant)
    client, base = world.client(Role.MEMBER), f"{world.base}/clusters/{cluster.pk}"
    topic, _ = _orders(reports_stack.kafka)
    report = _create(client, base, {"name": "every-2s", "kind": "top_keys", "params": {"topic": topic},
                                    "schedule": {"interval_seconds": 2}})
    assert PeriodicTask.objects.get(name=f"report:{report['id']}").interval.every == 2
    beat = reports_stack.beat()
    beat.start()
    try:
        def two_done() -> list[dict[str, Any]] | None:
            runs = client.get(f"{base}/reports/{report['id']}/runs?status=succeeded").json()["results"]
            return runs if len(runs) >= 2 else None
        runs = wait_for(two_done, 240, "two scheduled runs", detail=lambda: beat.tail(40) + "\n"
                        + reports_stack.worker.tail(40))
    finally:
        beat.stop()
    assert {r["trigger"] for r in runs} == {"schedule"} and {r["requested_by"] for r in runs} == {"system"}
    page = client.get(f"{base}/reports/{report['id']}/runs/{runs[0]['id']}/results").json()
    assert page["results"][0] == {"key": "a", "records": 6}
    # No schedule: the beat entry goes.
    assert client.patch(f"{base}/reports/{report['id']}", {"schedule": None}, format="json").status_code == 200
    assert not PeriodicTask.objects.filter(name=f"report:{report['id']}").exists()


def test_unknown_topic_and_bad_offsets_are_400(reports_stack: ReportsStack, cluster_for: Any) -> None:
    world = make_world("rep-bad")
    cluster = cluster_for(world.tenant)
    client, base = world.client(Role.MEMBER), f"{world.base}/clusters/{cluster.pk}"
    topic = _topic(reports_stack.kafka)
    response = client.post(f"{base}/reports", {"name": "x", "kind": "top_keys", "params": {"topic": "nope"}},
                           format="json")
    assert response.status_code == 400
    assert "unknown topic 'nope'" in response.json()["extra"]["fields"]["params.topic"][0]
    response = client.post(f"{base}/reports", {"name": "x", "kind": "sql", "params": {
        "topics": [topic], "sql": f"SELECT * FROM {topic.replace('-', '_')}", "starting_offsets": "{\"t\": "}},
        format="json")
    assert response.status_code == 400, response.json()
    assert "startingOffsets" in response.json()["message"] and "JSON" in response.json()["message"]


def test_runs_of_a_gone_worker_are_failed(reports_stack: ReportsStack, cluster_for: Any) -> None:
    import socket
    from datetime import timedelta

    from django.utils import timezone

    from controlplane.reports.models import Report, ReportRun
    from controlplane.reports.tasks import reap_lost_runs

    world = make_world("rep-reap")
    report = Report.objects.create(cluster=cluster_for(world.tenant), name="r", kind="top_keys",
                                   params={"topic": "t", "limit": 10})
    before = timezone.now() - timedelta(minutes=5)
    runs = {name: ReportRun.objects.create(report=report, status="running", started_at=started, worker=worker)
            for name, started, worker in [
                ("gone", before, "gone@nowhere"),
                ("young", timezone.now(), "gone@nowhere"),  # its worker may not have been asked yet
                ("alive", before, f"{reports_stack.queue}@{socket.gethostname()}")]}  # answers the ping
    assert reap_lost_runs() == 1
    states = {name: ReportRun.objects.get(pk=run.pk) for name, run in runs.items()}
    assert states["gone"].status == "failed" and "gone@nowhere" in states["gone"].error
    assert states["young"].status == "running" and states["alive"].status == "running"
