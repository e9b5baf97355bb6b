"""A real reports stack: one broker, and a Celery worker on a queue of its own that runs reports on its Spark.

Module-scoped (started once per module, stopped by pid), in the ``spark`` xdist group so the JVMs of Spark
tests never run two at a time on the 2 cores. Tests use ``transactional_db`` so the worker sees their rows;
``cluster_for`` points a tenant's cluster row at the broker (an agent row and a broker node row, as
provisioning would write them).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from tests.controlplane.managed.conftest import wait_for
from tests.support.broker import BrokerProcess
from tests.support.secured_broker import secured_broker, store_secrets, super_user_config
from tests.support.stack import Process, celery_beat, celery_worker, database_url


@dataclass
class ReportsStack:
    env: dict[str, str]
    queue: str
    worker: Process
    bootstrap: str
    root: Path
    kafka_cluster_id: str

    @property
    def kafka(self) -> dict[str, str]:
        """librdkafka settings as the cluster-internal super user (what the control plane's own clients use)."""
        return super_user_config(self.bootstrap, self.kafka_cluster_id)

    def beat(self) -> Process:
        """A real ``celery beat`` on the database scheduler (not started); stop it before the test ends."""
        env = {**self.env, "SLUICE_RESYNC_SECONDS": "86400", "CELERY_DEFAULT_QUEUE": f"unused-{self.queue}"}
        return celery_beat(env, self.root / f"beat-{uuid.uuid4().hex[:6]}.log")


def open_to_everyone(broker: BrokerProcess) -> None:
    """Everyone may read and describe here: these tests are about what reports compute (ACLs deciding what a
    report reads is tests/kafkarest/test_principal.py's)."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient(super_user_config(broker.bootstrap, broker.cluster_id))
    bindings = [AclBinding(kind, "*", ResourcePatternType.LITERAL, "User:*", "*", AclOperation.ALL,
                           AclPermissionType.ALLOW) for kind in (ResourceType.TOPIC, ResourceType.GROUP)]
    for future in admin.create_acls(bindings).values():
        future.result(30)


@pytest.fixture(scope="module")
def reports_stack(django_db_setup: None, django_db_blocker: Any) -> Iterator[ReportsStack]:

    from django.conf import settings
    from django.db import connection

    with django_db_blocker.unblock():
        db_name = connection.settings_dict["NAME"]
    root = Path(tempfile.mkdtemp(prefix="sluice-reports-"))
    queue = f"reports-test-{uuid.uuid4().hex[:10]}"
    env = {**os.environ, "DATABASE_URL": database_url(db_name), "CELERY_DEFAULT_QUEUE": queue,
           "SLUICE_REPORTS_QUEUE": queue, "SLUICE_VAR_DIR": str(root / "var"), "SPARK_MASTER": "local[2]",
           "PYTHONUNBUFFERED": "1", "LOG_LEVEL": "INFO"}
    worker = celery_worker("reports worker", queue, env, root / "worker.log", concurrency=2)
    previous = (settings.SLUICE_REPORTS_QUEUE, settings.VAR_DIR)
    try:
        with secured_broker(root, f"skc-{uuid.uuid4().hex[:16]}") as broker:
            open_to_everyone(broker)
            settings.SLUICE_REPORTS_QUEUE, settings.VAR_DIR = queue, root / "var"
            worker.start()
            try:
                yield ReportsStack(env, queue, worker, broker.bootstrap, root, broker.cluster_id)
            finally:
                worker.stop()
    finally:
        settings.SLUICE_REPORTS_QUEUE, settings.VAR_DIR = previous
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def cluster_for(reports_stack: ReportsStack) -> Callable[[Any], Any]:
    from controlplane.clusters.models import Agent, BrokerNode
    from tests.controlplane.factories import ClusterFactory

    def make(tenant: Any) -> Any:
        from controlplane.clusters.models import Cluster

        assert not Cluster.objects.filter(kafka_cluster_id=reports_stack.kafka_cluster_id).exists(), \
            "one cluster row per test points at the reports broker"
        cluster = ClusterFactory(tenant=tenant)
        Cluster.objects.filter(pk=cluster.pk).update(kafka_cluster_id=reports_stack.kafka_cluster_id,
                                                     status={"security_protocol": "SASL_PLAINTEXT"})
        cluster.refresh_from_db()
        store_secrets(cluster)  # tokens the worker mints must match the broker's key
        now = timezone.now()
        host, port = reports_stack.bootstrap.rsplit(":", 1)
        agent = Agent.objects.create(host=f"reports-{uuid.uuid4().hex[:8]}", advertised_host=host,
                                     port_min=int(port), port_max=int(port), last_seen=now, started_at=now)
        BrokerNode.objects.create(cluster=cluster, node_id=1, agent=agent, port=int(port))
        return cluster
    return make


def wait_for_run(client: Any, url: str, stack: ReportsStack, *, statuses: tuple[str, ...] = (
        "succeeded", "failed", "cancelled"), timeout: float = 240) -> dict[str, Any]:
    """Poll a run until its status is one of ``statuses``; the worker's log tail on timeout."""
    def check() -> dict[str, Any] | None:
        body: dict[str, Any] = client.get(url).json()
        return body if body["status"] in statuses else None
    return wait_for(check, timeout, f"run {url} to reach {statuses}",
                    detail=lambda: f"{client.get(url).json()}\n{stack.worker.tail(80)}")
