"""How the control plane (and its brokers) authenticate to a managed cluster.

Every managed cluster's brokers listen with ``SASL_PLAINTEXT`` and the authorizer
on, or with ``SASL_SSL`` when the deployment has a certificate and key
(``SLUICE_TLS_CERT``/``SLUICE_TLS_KEY``): then every client config names the CA
to trust (``ssl.ca.location``) and the cluster's status carries its PEM.
Brokers talk to each other, and the control plane talks to them, as the
cluster-internal principal ``User:__sluice``, a super user. Its password is a
random secret of the cluster's own (``ClusterSecret``, read through
``clusters.internal_secrets``), made with the cluster: nothing derives it, so
reading ``SECRET_KEY`` or one cluster's broker config gives no other cluster.
Each host's agent reads it from the database when it writes a broker's config
(mode 0600); only its version crosses the task queue. A rotation
(``cluster_secrets_rotate``) rolls the brokers onto a new one
(``secret_plan`` says how) and the control plane follows once they all run it.

``client_config`` is the one place any control-plane Kafka client gets its
librdkafka settings for a cluster.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from controlplane.clusters import internal_secrets
from controlplane.clusters.internal_secrets import INTERNAL_PRINCIPAL, INTERNAL_USERNAME
from controlplane.clusters.models import BrokerNode, Cluster

# librdkafka settings frozen into a hashable value (sorted items), to key pools of clients by.
ClientSettings = tuple[tuple[str, str], ...]

__all__ = ["INTERNAL_PRINCIPAL", "INTERNAL_USERNAME"]
INTERNAL_MECHANISM = "SCRAM-SHA-512"  # what brokers use between themselves, so its credential is always there
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")  # the listeners of managed clusters, without and with TLS
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def internal_login(cluster: Cluster | str) -> tuple[str, str]:
    """(username, password) the control plane logs in to ``cluster`` (the row or its Kafka id) with now."""
    current = internal_secrets.current(cluster)
    return current.username, current.password


def tls_enabled() -> bool:
    """Whether managed clusters' listeners speak TLS (a certificate and key are configured)."""
    return bool(settings.SLUICE_TLS_CERT and settings.SLUICE_TLS_KEY)


def security_protocol() -> str:
    return "SASL_SSL" if tls_enabled() else "SASL_PLAINTEXT"


def ca_location() -> str | None:
    """The CA file clients trust the brokers with (the certificate itself when no CA is named), or None."""
    return (settings.SLUICE_TLS_CA or settings.SLUICE_TLS_CERT) if tls_enabled() else None


def tls_client_settings() -> dict[str, str]:
    """librdkafka's TLS settings for a managed cluster ({} without TLS)."""
    ca = ca_location()
    return {} if ca is None else {"ssl.ca.location": ca}


def bootstrap_servers(cluster: Cluster) -> str:
    """The cluster's client address list: every broker not being removed."""
    nodes = BrokerNode.objects.filter(cluster=cluster, removal_requested_at__isnull=True).select_related("agent")
    return ",".join(f"{n.agent.advertised_host}:{n.port}" for n in nodes)


def client_config(cluster: Cluster, *, bootstrap: str | None = None) -> dict[str, str]:
    """librdkafka settings for a control-plane client of ``cluster``: its brokers, SASL as the internal principal.

    ``bootstrap`` when the caller already has the broker list (reconcile); otherwise it is read.
    """
    username, password = internal_login(cluster)
    return {
        "bootstrap.servers": bootstrap_servers(cluster) if bootstrap is None else bootstrap,
        "security.protocol": security_protocol(),
        **tls_client_settings(),
        "sasl.mechanism": INTERNAL_MECHANISM,
        "sasl.username": username,
        "sasl.password": password,
    }


def frozen(config: dict[str, str]) -> ClientSettings:
    return tuple(sorted(config.items()))


def servers(settings: ClientSettings) -> str:
    """The ``bootstrap.servers`` of frozen settings ('' when the cluster has no broker yet)."""
    return dict(settings).get("bootstrap.servers", "")


def security_status() -> dict[str, object]:
    """What ``status`` says about how clients connect (next to ``bootstrap_servers``): the protocol, the SASL
    mechanisms and, under TLS, the CA certificate to trust (PEM: a client saves it as its ``ssl.ca.location``)."""
    status: dict[str, object] = {"security_protocol": security_protocol(), "sasl_mechanisms": list(SASL_MECHANISMS)}
    ca = ca_location()
    if ca is not None:
        try:
            status["ssl_ca_pem"] = Path(ca).read_text()
        except OSError as exc:  # the brokers' own TLS fails the same way; say so rather than fail the status
            status["ssl_ca_pem"] = None
            status["ssl_ca_error"] = f"cannot read {ca}: {exc.strerror}"
    return status
