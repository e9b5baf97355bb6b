"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics and the broker.

Topic resources read and write a topic's overrides. The BROKER resource shows
Kafka's broker-level names (``log.retention.ms``…) for the cluster-wide topic
defaults in ``cluster_configs`` plus the static settings. Brokers share one
metadata store, so a topic default set through a BROKER resource, named ``""``
(Kafka's cluster default) or by this broker's id (librdkafka refuses empty
names), changes the cluster-wide defaults; it is reported back as
DYNAMIC_DEFAULT_BROKER_CONFIG, never as a per-broker value. The few true dynamic
broker configs (``DYNAMIC_BROKER_CONFIGS``: the replication throttle) live in
``broker_configs``, per broker or for the cluster default, as in Kafka.
Every change is a read-modify-write in one store transaction with the row locked;
``Broker.refresh_topics`` then pushes the new values to the live logs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as WireError

from dataplane.config.resolver import ConfigSource, Resolved, Synonym, resolve, resolve_all, resolved_value
from dataplane.config.tiering import check_tiering
from dataplane.config.topic import (
    BROKER_SYNONYMS,
    TOPIC_CONFIGS,
    TOPIC_NAME_FOR_BROKER_CONFIG,
    ConfigType,
    validate_topic_configs,
)
from dataplane.protocol.answers import ZERO, wire
from dataplane.protocol.build import build, nested
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.protocol.messages import Request
from dataplane.security.acl import AclOperation, ResourceType
from dataplane.server.apis import RequestContext, api
from dataplane.server.owners import Owners
from dataplane.storage import LogConfig

if TYPE_CHECKING:
    from dataplane.server.config import BrokerConfig

TOPIC, BROKER = 2, 4  # ConfigResource.Type on the wire
CLUSTER_DEFAULT = ""  # the BROKER resource name of the cluster-wide defaults


class AlterOp(IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


# DescribeConfigsResponse's ConfigType numbers.
WIRE_TYPES = {ConfigType.BOOLEAN: 1, ConfigType.STRING: 2, ConfigType.INT: 3, ConfigType.LONG: 5,
              ConfigType.DOUBLE: 6, ConfigType.LIST: 7}


@dataclass(frozen=True, slots=True)
class Entry:
    """One described config; ``synonyms`` run from highest precedence down."""

    name: str
    value: str
    source: ConfigSource
    synonyms: tuple[Synonym, ...]
    type: ConfigType
    doc: str
    read_only: bool = False

    @classmethod
    def of(cls, resolved: Resolved, name: str) -> Entry:
        d = resolved.definition
        return cls(name, resolved.value, resolved.source, resolved.synonyms, d.type, d.doc)


@dataclass(frozen=True, slots=True)
class DynamicBrokerConfig:
    doc: str
    minimum: int = 0


# Broker configs an operator changes at run time (Kafka's DynamicConfig.Broker names); LONG values.
DYNAMIC_BROKER_CONFIGS: dict[str, DynamicBrokerConfig] = {
    "follower.replication.throttled.rate": DynamicBrokerConfig(
        "bytes/s all of this broker's fetchers may copy while it catches up as a reassignment's new replica "
        "(0: unlimited)"),
}


def _request_error(message: str) -> KafkaError:
    return KafkaError(message, code=ErrorCode.INVALID_REQUEST)


def _config_error(message: str) -> KafkaError:
    return KafkaError(message, code=ErrorCode.INVALID_CONFIG)


def _check_broker_name(owners: Owners, name: str) -> None:
    if name == CLUSTER_DEFAULT:
        return
    try:
        node = int(name)
    except ValueError:
        raise _request_error(f"Broker id must be an integer, got '{name}'.") from None
    if node != owners.config.node_id:
        raise _request_error(f"Unexpected broker id, expected {owners.config.node_id} but received {node}.")


# ---------------------------------------------------------------------------- describe


def topic_entries(overrides: Mapping[str, str], defaults: Mapping[str, str]) -> list[Entry]:
    return [Entry.of(resolved, resolved.name) for resolved in resolve_all(overrides, defaults)]


def broker_entries(owners: Owners, defaults: Mapping[str, str], *, only_dynamic: bool,
                   dynamic: Mapping[int, Mapping[str, str]]) -> list[Entry]:
    """The broker's view: topic defaults under Kafka's broker names, then the static settings."""
    entries = []
    for name in BROKER_SYNONYMS:
        resolved = resolve(name, {}, defaults)
        if only_dynamic and resolved.source is ConfigSource.DEFAULT_CONFIG:
            continue
        entries.append(Entry.of(resolved, BROKER_SYNONYMS[name]))
    if only_dynamic:
        for name, value in sorted(dynamic.get(-1, {}).items()):
            source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
            entries.append(Entry(name, value, source, (Synonym(name, value, source),), ConfigType.LONG,
                                 DYNAMIC_BROKER_CONFIGS[name].doc if name in DYNAMIC_BROKER_CONFIGS else ""))
        return entries
    own, default = dynamic.get(owners.config.node_id, {}), dynamic.get(-1, {})
    for name, value, kind, doc in static_broker_settings(owners.config):
        synonyms = [Synonym(name, value, ConfigSource.STATIC_BROKER_CONFIG)]
        if name in DYNAMIC_BROKER_CONFIGS:
            if name in default:
                synonyms.insert(0, Synonym(name, default[name], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
            if name in own:
                synonyms.insert(0, Synonym(name, own[name], ConfigSource.DYNAMIC_BROKER_CONFIG))
        top = synonyms[0]
        entries.append(Entry(name, top.value, top.source, tuple(synonyms), kind, doc,
                             read_only=name not in DYNAMIC_BROKER_CONFIGS))
    return entries


def static_broker_settings(config: BrokerConfig) -> list[tuple[str, str, ConfigType, str]]:
    """The broker's own settings under Kafka's names, as a Kafka broker lists them (read-only: set at start)."""
    host, port = config.advertised
    protocol = config.security_protocol
    i, b, s, lst = ConfigType.INT, ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.LIST
    settings = [
        ("broker.id", str(config.node_id), i, "this broker's node id"),
        ("node.id", str(config.node_id), i, "this broker's node id"),
        ("listeners", f"{protocol}://{config.host}:{config.port}", lst, "where the broker listens"),
        ("advertised.listeners", f"{protocol}://{host}:{port}", lst, "the address clients are told to use"),
        ("listener.security.protocol.map", f"{protocol}:{protocol}", lst, "each listener's security protocol"),
        ("inter.broker.listener.name", protocol, s, "the listener brokers use to reach each other"),
        ("security.inter.broker.protocol", protocol, s, "the security protocol brokers use with each other"),
        ("log.dirs", str(config.data_dir), lst, "where partition logs live"),
        ("log.dir", str(config.data_dir), s, "where partition logs live"),
        ("num.partitions", str(config.num_partitions), i, "partitions of auto-created topics"),
        ("default.replication.factor", str(config.default_replication_factor), i,
         "replication factor of auto-created topics"),
        ("auto.create.topics.enable", str(config.auto_create_topics).lower(), b,
         "create unknown topics on Metadata and Produce"),
        ("socket.request.max.bytes", str(config.max_request_bytes), i, "the largest request accepted"),
        ("sasl.server.max.receive.size", str(config.sasl_server_max_receive_size), i,
         "the largest request accepted before SASL authentication"),
        ("max.unauthenticated.connections", str(config.max_unauthenticated_connections), i,
         "connections that have not finished SASL authentication, at most"),
        ("sasl.server.authn.timeout.ms", str(config.sasl_server_authn_timeout_ms), ConfigType.LONG,
         "how long a connection may take to finish SASL authentication"),
        ("max.connections.per.ip", str(config.max_connections_per_ip or 2**31 - 1), i,
         "open connections from one address, at most"),
        ("broker.session.timeout.ms", str(round(config.lease_seconds * 1000)), i,
         "the broker's registration lease in the metadata store"),
        ("replica.lag.time.max.ms", str(config.replica_lag_time_max_ms), ConfigType.LONG,
         "how long a follower may lag before it leaves the ISR"),
        ("replica.fetch.wait.max.ms", str(config.replica_fetch_wait_max_ms), i, "a follower fetch's long-poll wait"),
        ("follower.replication.throttled.rate", str(config.follower_replication_throttled_rate), ConfigType.LONG,
         "bytes/s for a reassignment's new replicas (0: unlimited)"),
        ("offsets.topic.num.partitions", str(config.offsets_topic_partitions), i, "partitions of __consumer_offsets"),
        ("offsets.topic.replication.factor", str(config.offsets_topic_replication_factor), i,
         "replication factor of __consumer_offsets"),
        ("offsets.retention.minutes", f"{config.offsets_retention_minutes:g}", i,
         "how long committed offsets of an empty group are kept"),
        ("offsets.retention.check.interval.ms", str(config.offsets_retention_check_interval_ms), ConfigType.LONG,
         "how often expired offsets are removed"),
        ("offsets.commit.timeout.ms", str(config.offsets_commit_timeout_ms), i,
         "how long an offset commit waits for the offsets topic's replicas"),
        ("offset.metadata.max.bytes", str(config.offset_metadata_max_bytes), i, "the largest commit metadata"),
        ("group.min.session.timeout.ms", str(config.group_min_session_timeout_ms), i, "shortest member session"),
        ("group.max.session.timeout.ms", str(config.group_max_session_timeout_ms), i, "longest member session"),
        ("group.initial.rebalance.delay.ms", str(config.group_initial_rebalance_delay_ms), i,
         "how long a new group waits for more members before its first rebalance"),
        ("group.max.size", str(config.group_max_size), i, "most members in a group"),
    ]
    if config.rack is not None:
        settings.append(("broker.rack", config.rack, s, "this broker's rack, for rack-aware replica placement"))
    return settings


def _describe_entry(entry: Entry, *, synonyms: bool, documentation: bool) -> dict[str, Any]:
    return {
        "name": entry.name, "value": entry.value, "read_only": entry.read_only, "config_source": int(entry.source),
        "is_sensitive": False,
        "synonyms": [{"name": s.name, "value": s.value, "source": int(s.source)} for s in entry.synonyms]
        if synonyms else (),
        "config_type": WIRE_TYPES[entry.type], "documentation": entry.doc if documentation else None,
    }


@api(32, "DescribeConfigs", 1, 4)
async def describe_configs(owners: Owners, request: Request, context: RequestContext) -> Any:
    body, version = request.body, request.api_version
    await owners.admin.refresh_topics()
    documentation = version >= 3 and body.include_documentation
    schema = load_response_schema(32, version)
    entry_class = nested(schema, "results", "configs")
    # Topics with the same overrides describe alike (most have none): their entries are resolved and built once
    # per request (the cluster defaults cannot change within it), which is most of the work at 1,000 topics.
    built: dict[tuple[frozenset[tuple[str, str]], frozenset[str]], tuple[Any, ...]] = {}
    results = []
    for resource in body.resources:
        result: dict[str, Any] = {"error_code": WireError.none, "error_message": None, "configs": (),
                                  "resource_type": resource.resource_type, "resource_name": resource.resource_name}
        try:
            _authorize(owners, context, AclOperation.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name)
            keys = frozenset(resource.configuration_keys or ())  # null or empty: every config (Kafka's reading)
            topic = owners.metadata.topics.get(resource.resource_name) if resource.resource_type == TOPIC else None
            key = (frozenset(topic.configs.items()), keys) if topic is not None else None
            configs = built.get(key) if key is not None else None
            if configs is None:
                entries = _entries_for(owners, resource.resource_type, resource.resource_name)
                configs = tuple(build(entry_class, _describe_entry(e, synonyms=body.include_synonyms,
                                                                   documentation=documentation))
                                for e in entries if not keys or e.name in keys)
                if key is not None:
                    built[key] = configs
            result["configs"] = configs
        except KafkaError as exc:
            result.update(error_code=wire(exc.code), error_message=str(exc))
        results.append(result)
    return build(schema, {"throttle_time": ZERO, "results": results})


def _authorize(owners: Owners, context: RequestContext, operation: AclOperation, resource_type: int,
               name: str) -> None:
    """Kafka's checks: the operation on the topic, or on the cluster for a broker resource."""
    if resource_type == TOPIC and not owners.access.allows(context, operation, ResourceType.TOPIC, name):
        raise KafkaError("Topic authorization failed.", code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if resource_type == BROKER and not owners.access.allows_cluster(context, operation):
        raise KafkaError("Cluster authorization failed.", code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)


def _entries_for(owners: Owners, resource_type: int, name: str) -> list[Entry]:
    if resource_type == TOPIC:
        topic = owners.metadata.topics.get(name)
        if topic is None:
            raise KafkaError(f"Topic '{name}' does not exist.", code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return topic_entries(topic.configs, owners.metadata.cluster_defaults)
    if resource_type == BROKER:
        _check_broker_name(owners, name)
        return broker_entries(owners, owners.metadata.cluster_defaults, only_dynamic=name == CLUSTER_DEFAULT,
                              dynamic=owners.metadata.broker_configs)
    raise _request_error(f"Unsupported resource type {resource_type}: only topics (2) and brokers (4).")


# ---------------------------------------------------------------------------- alter

Change = Callable[[Mapping[str, str]], dict[str, str]]


def incremental_change(ops: Sequence[tuple[str, int, str | None]], base: Callable[[str], str]) -> Change:
    """IncrementalAlterConfigs' operations as a function of the current overrides.

    APPEND and SUBTRACT start from the value in force (``base``) when the config has
    no override yet, so appending ``compact`` to a default ``delete`` gives both.
    """
    for name, op, _ in ops:
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            raise _config_error(f"Unknown topic config '{name}'.")
        if op not in {o.value for o in AlterOp}:
            raise _request_error(f"Unknown config operation {op} for '{name}'.")
        if op in (AlterOp.APPEND, AlterOp.SUBTRACT) and definition.type is not ConfigType.LIST:
            raise _config_error(f"Config value {AlterOp(op).name.lower()} is not allowed for config key: {name}.")

    def change(current: Mapping[str, str]) -> dict[str, str]:
        configs = dict(current)
        for name, op, value in ops:
            if op == AlterOp.DELETE:
                configs.pop(name, None)
                continue
            if value is None:
                raise _config_error(f"Null value not supported for: {name}.")
            if op == AlterOp.SET:
                configs[name] = value
                continue
            items = [i.strip() for i in configs.get(name, base(name)).split(",") if i.strip()]
            given = [i.strip() for i in value.split(",") if i.strip()]
            items = items + [i for i in given if i not in items] if op == AlterOp.APPEND \
                else [i for i in items if i not in given]
            configs[name] = ",".join(items)
        return _validated(configs)
    return change


def _validated(configs: Mapping[str, object]) -> dict[str, str]:
    canonical = validate_topic_configs(configs)  # ConfigError is INVALID_CONFIG
    LogConfig.for_topic(canonical)  # the storage layer's own limits, before anything is written
    return canonical


def _replacement(ops: Sequence[tuple[str, int, str | None]]) -> Change:
    """AlterConfigs: the given configs become the whole set (a null value leaves a config out)."""
    given = {key: value for key, _, value in ops if value is not None}
    unknown = sorted(set(given) - TOPIC_CONFIGS.keys())
    if unknown:
        raise _config_error(f"Unknown topic config '{unknown[0]}'.")
    validated = _validated(given)
    return lambda _current: validated


def _to_topic_names(names: Iterable[str]) -> None:
    for name in names:
        if name not in TOPIC_NAME_FOR_BROKER_CONFIG:
            dynamic = sorted({*TOPIC_NAME_FOR_BROKER_CONFIG, *DYNAMIC_BROKER_CONFIGS})
            raise _config_error(f"Cannot update broker config '{name}' dynamically: the dynamic broker "
                                f"configs are {', '.join(dynamic)}.")


def _dynamic_change(ops: Sequence[tuple[str, int, str | None]], *, replace: bool) -> Change:
    """Operations on dynamic broker configs (SET and DELETE; the values are LONGs) as a function of the current."""
    values: dict[str, str | None] = {}
    for name, op, value in ops:
        definition = DYNAMIC_BROKER_CONFIGS[name]
        if op == AlterOp.DELETE or (replace and value is None):
            values[name] = None
            continue
        if op != AlterOp.SET:
            raise _config_error(f"Config value {AlterOp(op).name.lower() if op in {o.value for o in AlterOp} else op}"
                                f" is not allowed for config key: {name}.")
        try:
            number = int(str(value).strip())
        except ValueError:
            raise _config_error(f"Invalid value {value} for configuration {name}: Not a number of type LONG") \
                from None
        if number < definition.minimum:
            raise _config_error(f"Invalid value {value} for configuration {name}: Value must be at least "
                                f"{definition.minimum}")
        values[name] = str(number)

    def change(current: Mapping[str, str]) -> dict[str, str]:
        configs = {} if replace else dict(current)
        for name, value in values.items():
            if value is None:
                configs.pop(name, None)
            else:
                configs[name] = value
        return configs
    return change


async def _alter(owners: Owners, resource_type: int, name: str, ops: Sequence[tuple[str, int, str | None]],
                 *, replace: bool, validate_only: bool) -> None:
    """Apply ``ops`` to one resource; ``replace`` is AlterConfigs (the given set becomes the whole set)."""
    counts = Counter(op[0] for op in ops)
    duplicates = sorted(key for key, n in counts.items() if n > 1)
    if duplicates:
        raise _request_error(f"Error due to duplicate config keys: {', '.join(duplicates)}.")
    if resource_type == TOPIC:
        defaults = owners.metadata.cluster_defaults
        base = (_replacement(ops) if replace
                else incremental_change(ops, lambda key: resolved_value(key, {}, defaults)))

        def tiering_checked(current: Mapping[str, str]) -> dict[str, str]:
            configs = base(current)
            check_tiering(configs, defaults, previous=current, remote_storage_configured=owners.config.remote_storage)
            return configs
        await owners.admin.alter_topic_configs(name, tiering_checked, validate_only=validate_only)
    elif resource_type == BROKER:
        _check_broker_name(owners, name)
        dynamic_ops = [op for op in ops if op[0] in DYNAMIC_BROKER_CONFIGS]
        other_ops = [op for op in ops if op[0] not in DYNAMIC_BROKER_CONFIGS]
        _to_topic_names(op[0] for op in other_ops)
        dynamic_change = _dynamic_change(dynamic_ops, replace=replace)  # validated before anything is written
        if other_ops or replace:
            topic_ops = [(TOPIC_NAME_FOR_BROKER_CONFIG[key], op, value) for key, op, value in other_ops]
            change = (_replacement(topic_ops) if replace
                      else incremental_change(topic_ops, lambda key: TOPIC_CONFIGS[key].default))
            await owners.admin.alter_cluster_configs(change, validate_only=validate_only)
        if dynamic_ops or replace:
            node = -1 if name == CLUSTER_DEFAULT else int(name)
            await owners.admin.alter_broker_configs(node, dynamic_change, validate_only=validate_only)
    else:
        raise _request_error(f"Unsupported resource type {resource_type}: only topics (2) and brokers (4).")


async def _alter_all(owners: Owners, request: Request, context: RequestContext, *,
                     replace: bool) -> list[dict[str, Any]]:
    body = request.body
    seen = Counter((r.resource_type, r.resource_name) for r in body.resources)
    results = []
    changed = False
    for resource in body.resources:
        result: dict[str, Any] = {"error_code": WireError.none, "error_message": None,
                                  "resource_type": resource.resource_type, "resource_name": resource.resource_name}
        ops = [(c.name, AlterOp.SET if replace else c.config_operation, c.value) for c in resource.configs]
        try:
            if seen[(resource.resource_type, resource.resource_name)] > 1:
                raise _request_error("Duplicate resource in request.")
            _authorize(owners, context, AclOperation.ALTER_CONFIGS, resource.resource_type, resource.resource_name)
            await _alter(owners, resource.resource_type, resource.resource_name, ops, replace=replace,
                         validate_only=body.validate_only)
            changed = changed or not body.validate_only
        except KafkaError as exc:
            result.update(error_code=wire(exc.code), error_message=str(exc))
        results.append(result)
    if changed:
        await owners.admin.refresh_topics()
    return results


@api(33, "AlterConfigs", 0, 2)
async def alter_configs(owners: Owners, request: Request, context: RequestContext) -> Any:
    results = await _alter_all(owners, request, context, replace=True)
    return build(load_response_schema(33, request.api_version), {"throttle_time": ZERO, "responses": results})


@api(44, "IncrementalAlterConfigs", 0, 1)
async def incremental_alter_configs(owners: Owners, request: Request, context: RequestContext) -> Any:
    results = await _alter_all(owners, request, context, replace=False)
    return build(load_response_schema(44, request.api_version), {"throttle_time": ZERO, "responses": results})
