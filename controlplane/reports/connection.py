"""How a report reaches its cluster: the ``sluice`` source's connection options, in one place.

A managed cluster authenticates (SASL) and authorizes: a run reads as the report's owner (the principal of
whoever made it), with an OAUTHBEARER token minted for the run (``clusters.principals.spark_options_for``),
so the cluster's ACLs decide what a report may read, as they do for Kafka clients, REST and the tail. A
cluster whose status does not say it authenticates (a broker registered by hand, as tests do) gets the
bootstrap servers alone: if its brokers do require SASL, the run fails to connect rather than reading more.
"""

from __future__ import annotations

from controlplane.clusters.credentials import SASL_PROTOCOLS, client_config
from controlplane.clusters.models import Cluster
from controlplane.clusters.observability import ClusterUnavailable, bootstrap
from controlplane.clusters.principals import spark_options_for
from controlplane.reports.models import Report

RUN_TOKEN_SECONDS = 6 * 3600  # a run's longest expected life: its executors cannot ask for a fresh token


def connection_options(report: Report) -> dict[str, str]:
    cluster: Cluster = report.cluster
    servers = bootstrap(cluster)
    if not servers:
        raise ClusterUnavailable("The cluster has no brokers yet.")
    if cluster.status.get("security_protocol") not in SASL_PROTOCOLS:
        return {"kafka.bootstrap.servers": servers}
    if not report.owner_principal:
        raise ClusterUnavailable("The report has no owner to read as (made by the system); recreate it.")
    return spark_options_for(cluster, report.owner_principal, lifetime_seconds=RUN_TOKEN_SECONDS)


def internal_options(cluster: Cluster) -> dict[str, str]:
    """The control plane's own access (the cluster-internal super user), for what no tenant principal may read:
    the consumer-lag trend's ``__consumer_offsets`` (of which the run keeps only its report's group)."""
    if cluster.status.get("security_protocol") not in SASL_PROTOCOLS:
        return {"kafka.bootstrap.servers": bootstrap(cluster)}
    return {f"kafka.{key}": value for key, value in client_config(cluster).items()}
