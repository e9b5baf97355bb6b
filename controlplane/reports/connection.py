"""How a report reaches its cluster: the ``sluice`` source's connection options, and the group commits the
consumer-lag trend needs, in one place.

A managed cluster authenticates (SASL) and authorizes: a run reads as the report's owner (the principal of
whoever made it), with an OAUTHBEARER token minted for the run (``clusters.principals.spark_options_for``),
so the cluster's ACLs decide what a report may read, as they do for Kafka clients, REST and the tail. That
token is all the sandboxed runner gets: never the cluster-internal super user's credentials. A cluster whose
status does not say it authenticates (a broker registered by hand, as tests do) gets the bootstrap servers
alone: if its brokers do require SASL, the run fails to connect rather than reading more.

The consumer-lag trend needs the history of a group's commits, kept in ``__consumer_offsets``, which holds
every group's commits and which no tenant principal is granted. So the worker reads it (as the control plane,
``group_commits``) after asking the cluster, as the owner, for the group's committed offsets: Kafka's
OffsetFetch rules (DESCRIBE on the group, and on the topic) decide whether the owner may see them. Only the
named group's commits on the named topic go to the runner.
"""

from __future__ import annotations

import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from controlplane.clusters.credentials import SASL_PROTOCOLS, client_config
from controlplane.clusters.kafka_clients import admin_as_caller, admin_for_config
from controlplane.clusters.models import Cluster
from controlplane.clusters.observability import ClusterUnavailable, bootstrap
from controlplane.clusters.principals import spark_options_for
from controlplane.reports.engine import ReportError
from controlplane.reports.models import Report
from dataplane.client.wire import AdminError
from dataplane.coordinator.records import partition_for_group

RUN_TOKEN_SECONDS = 6 * 3600  # a run's longest expected life: its executors cannot ask for a fresh token
COMMITS_READ_SECONDS = 60.0


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


def _secured(cluster: Cluster) -> bool:
    return cluster.status.get("security_protocol") in SASL_PROTOCOLS


def check_group_access(report: Report, group: str, topic: str) -> None:
    """``ReportError`` unless the report's owner may read ``group``'s committed offsets on ``topic``."""
    cluster: Cluster = report.cluster
    if not _secured(cluster):
        return
    if not report.owner_principal:
        raise ClusterUnavailable("The report has no owner to read as (made by the system); recreate it.")
    try:
        with admin_as_caller(cluster, report.owner_principal, timeout=30) as admin:
            committed = admin.committed_offsets(group)
            topics = admin.topics()
    except AdminError as e:
        if "AUTHORIZATION" in e.code:
            raise ReportError(f"The report's owner may not read consumer group '{group}' (DESCRIBE on the "
                              "group is needed).") from None
        raise
    if topic not in topics:
        raise ReportError(f"The report's owner may not read topic '{topic}' (or it does not exist).")
    del committed


def group_commits(report: Report, group: str, topic: str, end_ms: int | None) -> list[list[int]]:
    """``group``'s commits on ``topic`` as ``[partition, offset, commit time ms]``, read from the one
    ``__consumer_offsets`` partition that holds the group, up to its end now (records before ``end_ms``)."""
    from dataplane.client.spark.records import offset_commit  # noqa: PLC0415 - loads pyspark (reports worker only)

    cluster: Cluster = report.cluster
    config = client_config(cluster) if _secured(cluster) else {"bootstrap.servers": bootstrap(cluster)}
    with admin_for_config(config, timeout=30) as admin:
        info = admin.topics(include_internal=True).get("__consumer_offsets")
    if info is None:
        return []
    partition = partition_for_group(group, len(info.partitions))
    consumer = Consumer({**config, "group.id": f"sluice-reports-commits-{report.pk}", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    rows: list[list[int]] = []
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition("__consumer_offsets", partition), timeout=30)
        if high <= low:
            return []
        consumer.assign([TopicPartition("__consumer_offsets", partition, OFFSET_BEGINNING)])
        deadline = time.monotonic() + COMMITS_READ_SECONDS
        position = low
        while position < high:
            if time.monotonic() > deadline:
                raise ReportError("Reading the group's commits took too long; try again.")
            for message in consumer.consume(1000, timeout=1.0):
                if message.error():
                    continue
                position = (message.offset() or 0) + 1
                if end_ms is not None and message.timestamp()[1] >= end_ms:
                    continue
                decoded = offset_commit(message.key(), message.value())
                if decoded is not None and decoded[0] == group and decoded[1] == topic:
                    rows.append([decoded[2], decoded[3], decoded[4]])
    finally:
        consumer.close()
    return rows
