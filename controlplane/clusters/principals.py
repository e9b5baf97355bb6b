"""Kafka client configs that act on a cluster *as a given principal* (the REST Proxy, WebSocket tail, Spark).

The control plane keeps only hashes of API key secrets, so it cannot log in with a caller's key. Instead it
mints a short-lived SASL/OAUTHBEARER token for the caller's principal (``dataplane.security.oauthbearer``),
signed HS256 with the cluster's token key: 32 random bytes of its own (``ClusterSecret``, made with the
cluster, nothing derived from SECRET_KEY), which the agent writes into the broker's 0600 config; after a
rotation, tokens signed with the old key are refused once the brokers run the new one. The broker checks
signature, audience (the cluster id) and expiry, and its ACLs then decide for the caller exactly as for any
Kafka client of that principal.

Built on ``controlplane.clusters.credentials.client_config`` (the control plane's own settings for a cluster,
as the internal super user): :func:`as_principal` swaps its credentials for the principal's tokens. On a
PLAINTEXT listener (unmanaged brokers) there is nothing to authenticate and the config is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from controlplane.clusters import internal_secrets
from controlplane.clusters.credentials import SASL_PROTOCOLS, client_config
from controlplane.clusters.models import Cluster
from dataplane.security.oauthbearer import mint

TOKEN_LIFETIME_SECONDS = 15 * 60  # librdkafka refreshes at 80 %, and re-authenticates its connections (KIP-368)
_CREDENTIAL_KEYS = ("sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password", "oauth_cb")


def spark_options_for(cluster: Cluster, principal: str, *, lifetime_seconds: float = 3600) -> dict[str, str]:
    """What a Spark report's run passes to the Sluice data source to read ``cluster`` as ``principal`` (the
    report's owner), so the cluster's ACLs decide what the report may read."""
    return spark_options(client_config(cluster), kafka_cluster_id=cluster.kafka_cluster_id,
                         principal=principal, lifetime_seconds=lifetime_seconds)


def cluster_token_key(kafka_cluster_id: str) -> bytes:
    """The key a cluster's brokers check OAUTHBEARER tokens with (the agent writes it into their config).

    The one this process loaded last (every ``client_config`` loads it), so it costs no query on an event loop.
    """
    return internal_secrets.token_key(kafka_cluster_id)


def principal_name(principal: str) -> str:
    """``User:u-42`` -> ``u-42`` (a token's ``sub``); only User principals exist."""
    kind, sep, name = principal.partition(":")
    if not sep or kind != "User" or not name:
        raise ValueError(f"not a User principal: {principal!r}")
    return name


OAuthCallback = Callable[[str], tuple[str, float, str, dict[str, str]]]


def token_source(kafka_cluster_id: str, principal: str,
                 lifetime_seconds: float = TOKEN_LIFETIME_SECONDS) -> OAuthCallback:
    """confluent-kafka's ``oauth_cb`` for ``principal`` on the cluster: mints a fresh token on every call."""
    name = principal_name(principal)
    key = cluster_token_key(kafka_cluster_id)

    def refresh(_oauthbearer_config: str) -> tuple[str, float, str, dict[str, str]]:
        # A long-lived client follows a rotation: the key this process loaded last, not the one it started with.
        token, expires = mint(internal_secrets.remembered_token_key(kafka_cluster_id) or key, principal_name=name,
                              audience=kafka_cluster_id, lifetime_seconds=lifetime_seconds)
        return token, expires, name, {}
    return refresh


def as_principal(cluster_config: Mapping[str, Any], *, kafka_cluster_id: str, principal: str) -> dict[str, Any]:
    """``cluster_config`` (librdkafka settings to reach the cluster) changed to authenticate as ``principal``.

    A SASL cluster's credentials (whoever they named) are replaced by an OAUTHBEARER token source for the
    principal; a PLAINTEXT cluster's config is returned unchanged.
    """
    config = dict(cluster_config)
    if str(config.get("security.protocol", "PLAINTEXT")).upper() not in SASL_PROTOCOLS:
        return config
    for name in _CREDENTIAL_KEYS:
        config.pop(name, None)
    config["sasl.mechanisms"] = "OAUTHBEARER"
    config["oauth_cb"] = token_source(kafka_cluster_id, principal)
    return config


def spark_options(cluster_config: Mapping[str, Any], *, kafka_cluster_id: str, principal: str,
                  lifetime_seconds: float = 3600) -> dict[str, str]:
    """The Sluice Spark data source's ``kafka.*`` options to read as ``principal`` (for a report's run).

    Spark executors cannot call back into the control plane, so the token is minted here, once, for the
    run's expected length (``lifetime_seconds``), and travels as ``kafka.sasl.oauthbearer.token`` (with its
    expiry and principal); the data source's clients hand it to librdkafka (``dataplane.client.tokens``).
    """
    options = {f"kafka.{k}": str(v) for k, v in cluster_config.items() if not callable(v)}
    if str(cluster_config.get("security.protocol", "PLAINTEXT")).upper() not in SASL_PROTOCOLS:
        return options
    for name in _CREDENTIAL_KEYS:
        options.pop(f"kafka.{name}", None)
    token, expires = mint(cluster_token_key(kafka_cluster_id), principal_name=principal_name(principal),
                          audience=kafka_cluster_id, lifetime_seconds=lifetime_seconds)
    options.update({"kafka.sasl.mechanisms": "OAUTHBEARER", "kafka.sasl.oauthbearer.token": token,
                    "kafka.sasl.oauthbearer.token.expiry": str(int(expires)),
                    "kafka.sasl.oauthbearer.principal": principal_name(principal)})
    return options
