"""Broker settings, and the config file that sets them with Kafka's names.

``BrokerConfig`` validates itself, so a bad value is refused the same way whether
it came from a flag, the file or code. ``settings_from_file`` turns a TOML table
into ``BrokerConfig`` keyword arguments; dotted TOML keys (``node.id = 1``) and
tables (``[log] dirs = ...``) both flatten to Kafka's dotted names.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dataplane.coordinator.group import GroupSettings
from dataplane.coordinator.manager import CoordinatorSettings
from dataplane.protocol.framing import DEFAULT_MAX_FRAME_BYTES
from dataplane.security.tls import CLIENT_AUTH
from dataplane.server.admission import (
    MAX_UNAUTHENTICATED_CONNECTIONS,
    SASL_SERVER_AUTHN_TIMEOUT_MS,
    SASL_SERVER_MAX_RECEIVE_SIZE,
)

FETCH_TRANSFERS = ("sendfile", "copy")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
OAUTHBEARER = "OAUTHBEARER"  # offered only when a token key is configured (the control plane's tokens)


class ConfigError(ValueError):
    """A setting that cannot be used; the message names it as an operator would write it."""


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    node_id: int
    host: str
    port: int
    data_dir: Path
    metadata_url: str
    cluster_id: str = "sluice-dev"
    metadata_schema: str = "sluice_meta"
    advertised_host: str | None = None
    advertised_port: int | None = None
    auto_create_topics: bool = True
    num_partitions: int = 1
    default_replication_factor: int = 1
    max_request_bytes: int = DEFAULT_MAX_FRAME_BYTES
    rack: str | None = None
    lease_seconds: float = 10.0  # broker registration lease in the metadata store, renewed every third
    metrics_listen: tuple[str, int] | None = None  # HOST:PORT of the Prometheus endpoint; None = off
    fetch_transfer: str = "sendfile"  # how Fetch sends record data: "sendfile" (zero-copy) or "copy"
    # The group coordinator, with Kafka's names and defaults.
    offsets_topic_partitions: int = 50
    offsets_topic_replication_factor: int = 3  # capped at the live brokers when the topic is created
    offsets_retention_minutes: float = 7 * 24 * 60
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = 2**31 - 1
    # The transaction coordinator, with Kafka's names and defaults.
    transaction_state_partitions: int = 50
    transaction_state_replication_factor: int = 3  # capped at the live brokers when the topic is created
    transaction_max_timeout_ms: int = 900_000
    transaction_abort_timed_out_interval_ms: int = 10_000
    transactional_id_expiration_ms: int = 7 * 24 * 3600 * 1000  # an id idle this long is forgotten
    # Replication, with Kafka's names and defaults.
    replica_lag_time_max_ms: int = 30_000
    replica_fetch_wait_max_ms: int = 500
    offsets_commit_timeout_ms: int = 5_000
    metadata_refresh_seconds: float = 1.0  # the timer that catches a missed NOTIFY
    follower_replication_throttled_rate: int = 0  # bytes/s for a reassignment's new replicas; 0 = unlimited
    # Security: the listener's protocol, SASL mechanisms, the authorizer, and how brokers authenticate to each other.
    security_protocol: str = "PLAINTEXT"  # of the one listener: PLAINTEXT, SASL_PLAINTEXT, SSL or SASL_SSL
    # TLS (SSL and SASL_SSL listeners): PEM files. ``ssl_ca`` is what this broker trusts when it connects to
    # its peers (default: its own certificate) and, with ``ssl_client_auth``, what client certificates need.
    ssl_certificate: Path | None = None
    ssl_key: Path | None = None
    ssl_ca: Path | None = None
    ssl_client_auth: str = "none"
    sasl_mechanisms: tuple[str, ...] = SASL_MECHANISMS
    authorizer_enabled: bool = False  # ACLs decide every request (default deny); off: everything is allowed
    super_users: tuple[str, ...] = ()  # principals the authorizer always allows, e.g. ("User:admin",)
    inter_broker_username: str | None = None  # this cluster's broker principal on a SASL listener (a super user)
    inter_broker_password: str | None = None
    inter_broker_mechanism: str = "SCRAM-SHA-512"
    # OAUTHBEARER tokens the control plane mints per principal (HS256 with this key; audience = cluster.id).
    oauthbearer_token_key: bytes | None = field(default=None, repr=False)
    connections_max_reauth_ms: int = 0  # KIP-368: a session's longest life (0 = only a token's expiry bounds it)
    # Before authentication (``server.admission``): the largest frame a SASL listener reads from a client that has
    # not logged in (Kafka's), how many such clients there may be and for how long; open connections per address.
    sasl_server_max_receive_size: int = SASL_SERVER_MAX_RECEIVE_SIZE
    max_unauthenticated_connections: int = MAX_UNAUTHENTICATED_CONNECTIONS
    sasl_server_authn_timeout_ms: int = SASL_SERVER_AUTHN_TIMEOUT_MS
    max_connections_per_ip: int = 0  # 0 = none, as Kafka's default
    # Client quotas: the window rates are measured over (Kafka's quota.window.num x quota.window.size.seconds;
    # fractions of a second allowed, for tests), and a broker-wide cap on connections per principal (0 = none;
    # the max_connections quota key overrides it per user), and one per SASL credential (an API key: several keys
    # of one service account share its principal, and each gets its own cap; 0 = none).
    quota_window_num: int = 11
    quota_window_size_seconds: float = 1.0
    max_connections_per_principal: int = 0
    max_connections_per_credential: int = 0
    # The remote tier (tiered storage, decision 0032): an S3-compatible endpoint and bucket turn it on; a topic
    # then tiers with remote.storage.enable=true.
    remote_storage_endpoint: str | None = None
    remote_storage_bucket: str | None = None
    remote_storage_prefix: str = ""
    remote_storage_region: str = "us-east-1"
    remote_storage_access_key: str = field(default="", repr=False)
    remote_storage_secret_key: str = field(default="", repr=False)
    remote_log_manager_interval_ms: int = 30_000  # Kafka's remote.log.manager.task.interval.ms
    remote_log_reader_read_ahead_bytes: int = 4 << 20  # fetched ahead of a consumer reading the remote tier

    def __post_init__(self) -> None:
        _at_least("node.id", self.node_id, 0)
        _port("listeners", self.port, allow_zero=True)
        if self.advertised_port is not None:
            _port("advertised.listeners", self.advertised_port, allow_zero=False)
        _at_least("num.partitions", self.num_partitions, 1)
        _at_least("default.replication.factor", self.default_replication_factor, 1)
        _at_least("socket.request.max.bytes", self.max_request_bytes, 1)
        if self.max_request_bytes > 2**31 - 1:
            raise ConfigError(f"socket.request.max.bytes must be at most {2**31 - 1}, not {self.max_request_bytes}")
        if self.metrics_listen is not None:
            _port("metrics.listen", self.metrics_listen[1], allow_zero=True)
        if self.fetch_transfer not in FETCH_TRANSFERS:
            raise ConfigError(f"fetch.transfer must be one of {', '.join(FETCH_TRANSFERS)}, "
                              f"not {self.fetch_transfer!r}")
        if not self.cluster_id:
            raise ConfigError("cluster.id must not be empty")
        _at_least("offsets.topic.num.partitions", self.offsets_topic_partitions, 1)
        _at_least("offsets.topic.replication.factor", self.offsets_topic_replication_factor, 1)
        _at_least("transaction.state.log.num.partitions", self.transaction_state_partitions, 1)
        _at_least("transaction.state.log.replication.factor", self.transaction_state_replication_factor, 1)
        _at_least("transaction.max.timeout.ms", self.transaction_max_timeout_ms, 1)
        _at_least("transaction.abort.timed.out.transaction.cleanup.interval.ms",
                  self.transaction_abort_timed_out_interval_ms, 1)
        _at_least("transactional.id.expiration.ms", self.transactional_id_expiration_ms, 1)
        if not self.offsets_retention_minutes > 0:
            raise ConfigError(f"offsets.retention.minutes must be positive, not {self.offsets_retention_minutes}")
        _at_least("offsets.retention.check.interval.ms", self.offsets_retention_check_interval_ms, 1)
        _at_least("offset.metadata.max.bytes", self.offset_metadata_max_bytes, 0)
        _at_least("group.min.session.timeout.ms", self.group_min_session_timeout_ms, 0)
        _at_least("group.max.session.timeout.ms", self.group_max_session_timeout_ms,
                  self.group_min_session_timeout_ms)
        _at_least("group.initial.rebalance.delay.ms", self.group_initial_rebalance_delay_ms, 0)
        _at_least("group.max.size", self.group_max_size, 1)
        if not 0.1 <= self.lease_seconds <= 3600:
            raise ConfigError(f"broker.session.timeout.ms must be between 100 and 3600000, "
                              f"not {round(self.lease_seconds * 1000)}")
        _at_least("replica.lag.time.max.ms", self.replica_lag_time_max_ms, 1)
        _at_least("replica.fetch.wait.max.ms", self.replica_fetch_wait_max_ms, 0)
        _at_least("offsets.commit.timeout.ms", self.offsets_commit_timeout_ms, 1)
        _at_least("follower.replication.throttled.rate", self.follower_replication_throttled_rate, 0)
        if self.security_protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"listeners: the security protocol must be one of {', '.join(SECURITY_PROTOCOLS)}, "
                              f"not {self.security_protocol!r}")
        if self.tls:
            for name, path in (("ssl.certificate", self.ssl_certificate), ("ssl.key", self.ssl_key)):
                if path is None:
                    raise ConfigError(f"the {self.security_protocol} listener needs {name} (a PEM file)")
                _readable(name, path)
        if self.ssl_ca is not None:
            _readable("ssl.ca", self.ssl_ca)
        if self.ssl_client_auth not in CLIENT_AUTH:
            raise ConfigError(f"ssl.client.auth must be one of {', '.join(CLIENT_AUTH)}, not {self.ssl_client_auth!r}")
        if self.ssl_client_auth != "none" and self.ssl_ca is None:
            raise ConfigError("ssl.client.auth needs ssl.ca (the CA client certificates are checked against)")
        unknown = [m for m in self.sasl_mechanisms if m not in SASL_MECHANISMS]
        if unknown or not self.sasl_mechanisms:
            raise ConfigError(f"sasl.enabled.mechanisms must be some of {', '.join(SASL_MECHANISMS)}, "
                              f"not {','.join(self.sasl_mechanisms)!r}")
        for principal in self.super_users:
            if ":" not in principal:
                raise ConfigError(f"super.users: {principal!r} must look like 'User:<name>'")
        if self.sasl:
            if not self.inter_broker_username or not self.inter_broker_password:
                raise ConfigError("a SASL listener needs inter.broker.sasl.username and inter.broker.sasl.password "
                                  "(brokers authenticate to each other)")
            if self.inter_broker_mechanism not in self.sasl_mechanisms:
                raise ConfigError(f"sasl.mechanism.inter.broker.protocol {self.inter_broker_mechanism!r} is not in "
                                  f"sasl.enabled.mechanisms")
        if self.oauthbearer_token_key is not None and len(self.oauthbearer_token_key) < 32:
            raise ConfigError("sasl.oauthbearer.token.key must be at least 32 bytes (64 hex digits)")
        _at_least("connections.max.reauth.ms", self.connections_max_reauth_ms, 0)
        _at_least("sasl.server.max.receive.size", self.sasl_server_max_receive_size, 1)
        if self.sasl_server_max_receive_size > 2**31 - 1:
            raise ConfigError(f"sasl.server.max.receive.size must be at most {2**31 - 1}, "
                              f"not {self.sasl_server_max_receive_size}")
        _at_least("max.unauthenticated.connections", self.max_unauthenticated_connections, 1)
        _at_least("sasl.server.authn.timeout.ms", self.sasl_server_authn_timeout_ms, 1)
        _at_least("max.connections.per.ip", self.max_connections_per_ip, 0)
        _at_least("quota.window.num", self.quota_window_num, 2)
        if not 0.01 <= self.quota_window_size_seconds <= 3600:
            raise ConfigError(f"quota.window.size.seconds must be between 0.01 and 3600, "
                              f"not {self.quota_window_size_seconds}")
        _at_least("max.connections.per.principal", self.max_connections_per_principal, 0)
        _at_least("max.connections.per.credential", self.max_connections_per_credential, 0)
        if bool(self.remote_storage_endpoint) != bool(self.remote_storage_bucket):
            raise ConfigError("remote storage needs both remote.storage.endpoint and remote.storage.bucket "
                              "(or neither)")
        if self.remote_storage_endpoint and not self.remote_storage_endpoint.startswith(("http://", "https://")):
            raise ConfigError(f"remote.storage.endpoint must be an http:// or https:// URL, "
                              f"not {self.remote_storage_endpoint!r}")
        _at_least("remote.log.manager.task.interval.ms", self.remote_log_manager_interval_ms, 10)
        _at_least("remote.log.reader.read.ahead.bytes", self.remote_log_reader_read_ahead_bytes, 0)
        if not self.metadata_refresh_seconds > 0:
            raise ConfigError(f"metadata.refresh.seconds must be positive, not {self.metadata_refresh_seconds}")

    @property
    def remote_storage(self) -> bool:
        """Whether this broker has a remote tier (endpoint and bucket set)."""
        return bool(self.remote_storage_endpoint and self.remote_storage_bucket)

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def offered_mechanisms(self) -> tuple[str, ...]:
        """The SaslHandshake's list: the enabled mechanisms, and OAUTHBEARER when a token key is configured."""
        if self.oauthbearer_token_key is None:
            return self.sasl_mechanisms
        return (*self.sasl_mechanisms, OAUTHBEARER)

    @property
    def inter_broker_principal(self) -> str | None:
        return f"User:{self.inter_broker_username}" if self.sasl and self.inter_broker_username else None

    @property
    def advertised(self) -> tuple[str, int]:
        return self.advertised_host or self.host, self.advertised_port or self.port

    def coordinator_settings(self) -> CoordinatorSettings:
        return CoordinatorSettings(
            group=GroupSettings(self.group_min_session_timeout_ms, self.group_max_session_timeout_ms,
                                self.group_initial_rebalance_delay_ms, self.group_max_size),
            offsets_topic_partitions=self.offsets_topic_partitions,
            offsets_topic_replication_factor=self.offsets_topic_replication_factor,
            offsets_retention_ms=round(self.offsets_retention_minutes * 60_000),
            offsets_retention_check_interval_ms=self.offsets_retention_check_interval_ms,
            offset_metadata_max_bytes=self.offset_metadata_max_bytes)


def _at_least(name: str, value: int, low: int) -> None:
    if value < low:
        raise ConfigError(f"{name} must be at least {low}, not {value}")


def _readable(name: str, path: Path) -> None:
    if not os.access(path, os.R_OK) or not path.is_file():
        reason = "no such file" if not path.exists() else "not a readable file"
        raise ConfigError(f"{name}: cannot read {str(path)!r}: {reason}")


def _port(name: str, value: int, *, allow_zero: bool) -> None:
    if not (0 if allow_zero else 1) <= value < 65536:
        raise ConfigError(f"{name} port must be between {0 if allow_zero else 1} and 65535, not {value}")


# ---------------------------------------------------------------------- value parsers


def parse_listener(text: str) -> tuple[str, str, int]:
    """(security protocol, host, port) of Kafka's single-listener ``PROTOCOL://HOST:PORT`` (or ``HOST:PORT``)."""
    if "," in text:
        raise ValueError(f"only one listener is supported, got {text!r}")
    scheme, sep, rest = text.partition("://")
    if not sep:
        return ("PLAINTEXT", *parse_host_port(text))
    if scheme.upper() not in SECURITY_PROTOCOLS:
        raise ValueError(f"the listener's protocol must be one of {', '.join(SECURITY_PROTOCOLS)}, got {text!r}")
    return (scheme.upper(), *parse_host_port(rest))


def parse_host_port(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[v6]:PORT`` or Kafka's single-listener ``PLAINTEXT://HOST:PORT``."""
    scheme, sep, rest = text.partition("://")
    if sep:
        if scheme.upper() not in SECURITY_PROTOCOLS:
            raise ValueError(f"the listener's protocol must be one of {', '.join(SECURITY_PROTOCOLS)}, got {text!r}")
        text = rest
    if "," in text:
        raise ValueError(f"only one listener is supported, got {text!r}")
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"expected an integer, got {value!r}")
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"expected an integer, got {value!r}") from None


def _number(value: object) -> float:
    """Kafka's whole minutes, or a fraction of one (tests and impatient operators)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"expected a number, got {value!r}")
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"expected a number, got {value!r}") from None


def _bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ValueError(f"expected true or false, got {value!r}")


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    return value


def _path(value: object) -> Path:
    text = _str(value)
    if not text:
        raise ValueError("must not be empty")
    return Path(text).expanduser()


def _hex_key(value: object) -> bytes:
    try:
        return bytes.fromhex(_str(value))
    except ValueError:
        raise ValueError("expected hex digits") from None


def _listen(value: object) -> dict[str, Any]:
    text = _str(value)
    protocol, host, port = parse_listener(text)
    return {"host": host, "port": port, **({"security_protocol": protocol} if "://" in text else {})}


def _names(separator: str) -> Callable[[object], tuple[str, ...]]:
    """A list setting: a TOML array, or Kafka's separated string (``super.users`` uses ``;``)."""
    def parse(value: object) -> tuple[str, ...]:
        items = value if isinstance(value, list) else _str(value).split(separator)
        return tuple(s for s in (_str(item).strip() for item in items) if s)
    return parse


def _advertise(value: object) -> dict[str, Any]:
    host, port = parse_host_port(_str(value))
    return {"advertised_host": host, "advertised_port": port}


def _data_dir(value: object) -> dict[str, Any]:
    text = _str(value)
    if "," in text:
        raise ValueError(f"only one log directory is supported, got {text!r}")
    if not text:
        raise ValueError("must not be empty")
    return {"data_dir": Path(text)}


def _metrics(value: object) -> dict[str, Any]:
    text = _str(value)
    return {"metrics_listen": parse_host_port(text) if text else None}


def _field(name: str, convert: Callable[[object], object]) -> Callable[[object], dict[str, Any]]:
    return lambda value: {name: convert(value)}


# Kafka's name where Kafka has one; the short forms are what the flags are called.
FILE_SETTINGS: dict[str, Callable[[object], dict[str, Any]]] = {
    "node.id": _field("node_id", _int),
    "broker.id": _field("node_id", _int),
    "listeners": _listen,
    "listen": _listen,
    "advertised.listeners": _advertise,
    "advertise": _advertise,
    "log.dirs": _data_dir,
    "log.dir": _data_dir,
    "metadata.url": _field("metadata_url", _str),
    "metadata.schema": _field("metadata_schema", _str),
    "cluster.id": _field("cluster_id", _str),
    "num.partitions": _field("num_partitions", _int),
    "default.replication.factor": _field("default_replication_factor", _int),
    "auto.create.topics.enable": _field("auto_create_topics", _bool),
    "socket.request.max.bytes": _field("max_request_bytes", _int),
    "broker.rack": _field("rack", _str),
    "metrics.listen": _metrics,
    "fetch.transfer": _field("fetch_transfer", _str),
    "offsets.topic.num.partitions": _field("offsets_topic_partitions", _int),
    "offsets.topic.replication.factor": _field("offsets_topic_replication_factor", _int),
    "offsets.retention.minutes": _field("offsets_retention_minutes", _number),
    "offsets.retention.check.interval.ms": _field("offsets_retention_check_interval_ms", _int),
    "offset.metadata.max.bytes": _field("offset_metadata_max_bytes", _int),
    "group.min.session.timeout.ms": _field("group_min_session_timeout_ms", _int),
    "group.max.session.timeout.ms": _field("group_max_session_timeout_ms", _int),
    "group.initial.rebalance.delay.ms": _field("group_initial_rebalance_delay_ms", _int),
    "group.max.size": _field("group_max_size", _int),
    "transaction.state.log.num.partitions": _field("transaction_state_partitions", _int),
    "transaction.state.log.replication.factor": _field("transaction_state_replication_factor", _int),
    "transaction.max.timeout.ms": _field("transaction_max_timeout_ms", _int),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms":
        _field("transaction_abort_timed_out_interval_ms", _int),
    "transactional.id.expiration.ms": _field("transactional_id_expiration_ms", _int),
    "broker.session.timeout.ms": lambda value: {"lease_seconds": _int(value) / 1000},
    "replica.lag.time.max.ms": _field("replica_lag_time_max_ms", _int),
    "replica.fetch.wait.max.ms": _field("replica_fetch_wait_max_ms", _int),
    "offsets.commit.timeout.ms": _field("offsets_commit_timeout_ms", _int),
    "follower.replication.throttled.rate": _field("follower_replication_throttled_rate", _int),
    "sasl.enabled.mechanisms": _field("sasl_mechanisms", _names(",")),
    "authorizer.enabled": _field("authorizer_enabled", _bool),
    "super.users": _field("super_users", _names(";")),
    "inter.broker.sasl.username": _field("inter_broker_username", _str),
    "inter.broker.sasl.password": _field("inter_broker_password", _str),
    "sasl.mechanism.inter.broker.protocol": _field("inter_broker_mechanism", _str),
    "sasl.oauthbearer.token.key": lambda value: {"oauthbearer_token_key": _hex_key(value)},
    "connections.max.reauth.ms": _field("connections_max_reauth_ms", _int),
    "sasl.server.max.receive.size": _field("sasl_server_max_receive_size", _int),
    "max.unauthenticated.connections": _field("max_unauthenticated_connections", _int),
    "sasl.server.authn.timeout.ms": _field("sasl_server_authn_timeout_ms", _int),
    "max.connections.per.ip": _field("max_connections_per_ip", _int),
    "quota.window.num": _field("quota_window_num", _int),
    "quota.window.size.seconds": _field("quota_window_size_seconds", _number),
    "max.connections.per.principal": _field("max_connections_per_principal", _int),
    "max.connections.per.credential": _field("max_connections_per_credential", _int),
    "ssl.certificate": _field("ssl_certificate", _path),
    "ssl.key": _field("ssl_key", _path),
    "ssl.ca": _field("ssl_ca", _path),
    "ssl.client.auth": _field("ssl_client_auth", _str),
    "remote.storage.endpoint": _field("remote_storage_endpoint", _str),
    "remote.storage.bucket": _field("remote_storage_bucket", _str),
    "remote.storage.prefix": _field("remote_storage_prefix", _str),
    "remote.storage.region": _field("remote_storage_region", _str),
    "remote.storage.access.key": _field("remote_storage_access_key", _str),
    "remote.storage.secret.key": _field("remote_storage_secret_key", _str),
    "remote.log.manager.task.interval.ms": _field("remote_log_manager_interval_ms", _int),
    "remote.log.reader.read.ahead.bytes": _field("remote_log_reader_read_ahead_bytes", _int),
}


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, object]:
    flat: dict[str, object] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def settings_from_table(table: Mapping[str, Any]) -> dict[str, tuple[str, object]]:
    """BrokerConfig field -> (setting name it came from, value). Raises ConfigError."""
    fields: dict[str, tuple[str, object]] = {}
    for name, raw in _flatten(table).items():
        parse = FILE_SETTINGS.get(name)
        if parse is None:
            raise ConfigError(f"unknown setting {name!r}")
        try:
            parsed = parse(raw)
        except ValueError as exc:
            raise ConfigError(f"{name}: {exc}") from None
        for target, value in parsed.items():
            if target in fields and fields[target][0] != name:
                raise ConfigError(f"{name} and {fields[target][0]} both set the same thing; keep one")
            fields[target] = (name, value)
    return fields


def settings_from_file(path: Path) -> dict[str, tuple[str, object]]:
    """Read a TOML broker config. Raises ConfigError (unreadable, not TOML, unknown or bad settings)."""
    try:
        with path.open("rb") as fh:
            table = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}") from None
    return settings_from_table(table)

