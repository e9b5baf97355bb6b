"""A managed cluster under TLS: with SLUICE_TLS_CERT/KEY/CA set for the control plane and its agents, brokers
listen with SASL_SSL, the status says so and carries the CA, API keys produce and consume over TLS, the
control plane's own clients (reconcile, the admin client's wire path) reach the brokers over TLS, and a
plaintext client is turned away.
"""

from __future__ import annotations

import ssl
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from django.test.utils import override_settings

from tests.controlplane.conftest import make_world
from tests.controlplane.managed.conftest import Stack, wait_for
from tests.controlplane.managed.test_kafka_credentials import (
    QUIET,
    _acls_applied,
    _api,
    _create_cluster,
    _grant,
    _round_trip_confluent,
    _service_account_key,
    _wire,
)
from tests.controlplane.managed.test_lifecycle import _condition, _delete_and_wait, _ready, _status
from tests.support.wire import KafkaWire

pytestmark = [pytest.mark.xdist_group("heavy"), pytest.mark.timeout(600)]


@pytest.fixture(scope="module", autouse=True)
def tls_ca(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The deployment's TLS settings, for this process and (autouse: set before ``stack`` starts them) for the
    worker and the agents."""
    root = tmp_path_factory.mktemp("managed-pki")
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    ca.cert_pem.write_to_path(str(root / "ca.pem"))
    server.cert_chain_pems[0].write_to_path(str(root / "broker.pem"))
    server.private_key_pem.write_to_path(str(root / "broker.key"))
    values = {"SLUICE_TLS_CERT": str(root / "broker.pem"), "SLUICE_TLS_KEY": str(root / "broker.key"),
              "SLUICE_TLS_CA": str(root / "ca.pem")}
    with pytest.MonkeyPatch.context() as patch, override_settings(**values):
        for name, value in values.items():
            patch.setenv(name, value)
        yield root / "ca.pem"


def _tls_config(bootstrap: str, ca: Path, key_id: str, secret: str, mechanism: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL", "ssl.ca.location": str(ca),
            "sasl.mechanism": mechanism, "sasl.username": key_id, "sasl.password": secret, **QUIET}


@pytest.mark.django_db(transaction=True)
def test_a_managed_cluster_listens_with_sasl_ssl(stack: Stack, tls_ca: Path, tmp_path: Path) -> None:
    from controlplane.clusters.credentials import client_config
    from controlplane.clusters.kafka_clients import admin_as_internal
    from controlplane.clusters.models import Cluster

    world = make_world(f"t{uuid.uuid4().hex[:6]}")
    cluster_id = _create_cluster(world, "tls")
    try:
        body = wait_for(lambda: _ready(world, cluster_id), 120, "Ready", stack,
                        lambda: _status(world, cluster_id)["status"])
        status = body["status"]
        assert status["security_protocol"] == "SASL_SSL"
        assert status["ssl_ca_pem"] == tls_ca.read_text()
        bootstrap = status["bootstrap_servers"]
        # The worker creates the topic through its admin client: over TLS, or the topic never gets Ready.
        _api(world, "post", f"/clusters/{cluster_id}/topics", {"name": "orders", "partitions": 1})
        wait_for(lambda: _condition(_api(world, "get", f"/clusters/{cluster_id}/topics/orders"), "Ready").get(
            "status") == "True", 90, "the topic", stack)

        # A client that trusts the CA from the status produces and consumes with an API key.
        ca_file = tmp_path / "from-status.pem"
        ca_file.write_text(status["ssl_ca_pem"])
        principal, key_id, secret = _service_account_key(world)
        _grant(world, cluster_id, principal, "orders")
        config = _tls_config(bootstrap, ca_file, key_id, secret, "SCRAM-SHA-256")
        wait_for(lambda: _logs_in_over_tls(bootstrap, ca_file, key_id, secret), 60, "the key to log in over TLS",
                 stack)
        # The reconciler writes the ACLs through the control plane's admin client, which speaks TLS now.
        wait_for(lambda: _acls_applied(cluster_id, principal, 3), 60, "the ACLs", stack)
        _round_trip_confluent(config, "orders", b"over tls")

        # The control plane's own settings name TLS; its wire-path requests (DescribeLogDirs) go over TLS.
        cluster = Cluster.objects.get(pk=cluster_id)
        assert client_config(cluster)["security.protocol"] == "SASL_SSL"
        assert client_config(cluster)["ssl.ca.location"] == str(tls_ca)
        with admin_as_internal(cluster) as admin:
            assert any(size.topic == "orders" for size in admin.partition_sizes())

        # Plaintext Kafka on the TLS port gets nowhere.
        from kio.schema.metadata.v12.request import MetadataRequest

        with _wire(bootstrap) as wire, pytest.raises((ConnectionError, OSError)):
            wire.call(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                      include_topic_authorized_operations=False))
    finally:
        _delete_and_wait(world, cluster_id, stack)


def _logs_in_over_tls(bootstrap: str, ca: Path, key_id: str, secret: str) -> bool:
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    with KafkaWire(int(port), host=host, timeout=10, tls=ssl.create_default_context(cafile=str(ca))) as wire:
        try:
            wire.authenticate("SCRAM-SHA-256", key_id, secret)
        except PermissionError:
            return False
    return True
