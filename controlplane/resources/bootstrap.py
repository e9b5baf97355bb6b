"""The demo cluster and topic `sluice up` ensures, so the first command gives a Kafka endpoint.

Idempotent: created once (by name) and then left alone, whatever the user did to them since.
"""

from __future__ import annotations

import os
import shlex
import uuid
from pathlib import Path

from django.db import transaction

from controlplane.clusters.credentials import security_protocol, tls_client_settings
from controlplane.clusters.models import Cluster, Plan
from controlplane.clusters.services import cluster_create
from controlplane.clusters.tasks import request_reconcile
from controlplane.core.actors import SYSTEM_ACTOR
from controlplane.resources.models import Topic
from controlplane.resources.services import topic_create
from controlplane.tenancy.models import Tenant

DEMO_CLUSTER = "demo"
DEMO_TOPIC = "demo"


@transaction.atomic
def demo_cluster(tenant_slug: str) -> Cluster:
    tenant = Tenant.objects.get(slug=tenant_slug)
    cluster = Cluster.objects.filter(tenant=tenant, name=DEMO_CLUSTER).first()
    if cluster is None:
        cluster = cluster_create(tenant=tenant, name=DEMO_CLUSTER, plan=Plan.BASIC, actor=SYSTEM_ACTOR)
        topic_create(cluster=cluster, name=DEMO_TOPIC, actor=SYSTEM_ACTOR, partitions=3, replication_factor=1)
    elif cluster.deletion_requested_at is None and not Topic.objects.filter(cluster=cluster).exists() \
            and cluster.generation == 1:
        topic_create(cluster=cluster, name=DEMO_TOPIC, actor=SYSTEM_ACTOR, partitions=3, replication_factor=1)
    else:
        request_reconcile(cluster)
    return cluster


def demo_client_config(bootstrap: str, key_id: str, secret: str) -> dict[str, str]:
    """A Kafka client's settings for the demo cluster with the demo key (librdkafka / Java property names).

    PLAIN, which every key has (SCRAM works too for keys made since SCRAM credentials are derived).
    """
    return {"bootstrap.servers": bootstrap, "security.protocol": security_protocol(), **tls_client_settings(),
            "sasl.mechanism": "PLAIN",
            "sasl.username": key_id, "sasl.password": secret}


def write_demo_client_config(path: Path, config: dict[str, str]) -> None:
    """The demo client config as a properties file only its owner can read (it holds the key's secret).

    Local development only: `sluice up`'s demo key is kept in clear under var/ so a first user can connect
    at once; a real key's secret is shown once and never stored.
    """
    _write_private(path, "# The demo cluster of `sluice up` with the demo API key (local development only).\n"
                   + "".join(f"{k}={v}\n" for k, v in config.items()))


def demo_shell_env(*, url: str, bootstrap: str, key_id: str, secret: str, tenant_slug: str, kafka_cluster_id: str,
                   cluster_id: uuid.UUID, client_config: Path) -> dict[str, str]:
    """What the README's tour reads from the environment, so its commands run unchanged on any ports."""
    return {"SLUICE_URL": url, "SLUICE_BOOTSTRAP": bootstrap, "SLUICE_API_KEY": f"{key_id}:{secret}",
            "SLUICE_TENANT": tenant_slug, "SLUICE_CLUSTER": kafka_cluster_id, "SLUICE_CLUSTER_ID": str(cluster_id),
            "SLUICE_CLIENT_CONFIG": str(client_config)}


def write_demo_env(path: Path, env: dict[str, str]) -> None:
    """``env`` as a file of shell ``export`` lines (``. var/demo.env``), private like the client config."""
    _write_private(path, "# `sluice up`'s demo cluster and API key for a shell (local development only).\n"
                   + "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items()))


def _write_private(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def ready_bootstrap(cluster_id: uuid.UUID) -> str | None:
    """The cluster's bootstrap servers once it is Ready, else None."""
    cluster = Cluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        return None
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in cluster.status.get("conditions", []))
    return cluster.status.get("bootstrap_servers") or None if ready else None
