"""Which value of a topic config is in force, where it comes from, and what it overrides.

Kafka's order: the topic's override, then the cluster-wide dynamic default (a
broker's ``cluster_configs``, kept under the topic config's own name or under
any of its broker synonyms, e.g. ``log.retention.hours``), then the static
default from ``TOPIC_CONFIGS``. DescribeConfigs, the storage layer's
``LogConfig``, the broker and the controller all read through here, so what is
described is what is enforced.

Values are validated when written, so reading never refuses one: a stored value
this version cannot parse (written by hand, or by a newer version during an
upgrade) is skipped with a warning, and the next in line is in force. Refusing
it instead would stop the metadata refresh or the controller for every topic.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import IntEnum
from types import MappingProxyType

from dataplane.config.topic import (
    TOPIC_CONFIGS,
    TOPIC_NAME_FOR_SYNONYM,
    TOPIC_ONLY_CONFIGS,
    BrokerSynonym,
    ConfigDef,
    ConfigError,
)

log = logging.getLogger(__name__)

NO_CONFIGS: Mapping[str, str] = MappingProxyType({})
MIN_INSYNC_REPLICAS = "min.insync.replicas"
UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"


class ConfigSource(IntEnum):
    """DescribeConfigsResponse's ConfigSource numbers."""

    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


@dataclass(frozen=True, slots=True)
class Synonym:
    """One place a config is set, as DescribeConfigs lists it: ``value`` in the unit of ``name``."""

    name: str
    value: str
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class Resolved:
    """A topic config's value in force; ``synonyms`` run from highest precedence down, the first gave ``value``."""

    definition: ConfigDef
    value: str
    source: ConfigSource
    synonyms: tuple[Synonym, ...]

    @property
    def name(self) -> str:
        return self.definition.name


def _definition(name: str) -> ConfigDef:
    definition = TOPIC_CONFIGS.get(name)
    if definition is None:
        raise ConfigError(name, f"Unknown topic config '{name}'.")
    return definition


_warned: set[tuple[str, str]] = set()


def _skip(name: str, raw: str, exc: ConfigError) -> None:
    if (name, raw) not in _warned:  # once per value: resolution runs on every acks=all produce
        _warned.add((name, raw))
        log.warning("ignoring stored config %s=%r: %s", name, raw, exc.message)


def _candidates(definition: ConfigDef, overrides: Mapping[str, str],
                cluster_defaults: Mapping[str, str]) -> Iterator[tuple[str, Synonym]]:
    """(canonical topic value, where it was set) in precedence order, the static default last."""
    name = definition.name
    primary = definition.synonyms[0] if definition.synonyms else BrokerSynonym(name)
    raw = overrides.get(name)
    if raw is not None:
        try:
            value = definition.parse(raw)
            yield value, Synonym(name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG)
        except ConfigError as exc:
            _skip(name, raw, exc)
    if name != primary.name:  # the cluster default under the topic config's own name (how the store keeps it)
        raw = cluster_defaults.get(name)
        if raw is not None:
            try:
                value = definition.parse(raw)
                yield value, Synonym(primary.name, value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
            except ConfigError as exc:
                _skip(name, raw, exc)
    for synonym in definition.synonyms:
        raw = cluster_defaults.get(synonym.name)
        if raw is not None:
            try:
                value = synonym.to_topic_value(definition, raw)
                shown = value if synonym.unit_ms == 1 else str(int(raw))  # in its own unit, as set
                yield value, Synonym(synonym.name, shown, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
            except ConfigError as exc:
                _skip(synonym.name, raw, exc)
    yield definition.default, Synonym(primary.name, definition.default, ConfigSource.DEFAULT_CONFIG)


def resolve(name: str, overrides: Mapping[str, str],
            cluster_defaults: Mapping[str, str] = NO_CONFIGS) -> Resolved:
    """One topic config in force, with its source and synonyms (for DescribeConfigs)."""
    definition = _definition(name)
    found = list(_candidates(definition, overrides, cluster_defaults))
    value, first = found[0]
    return Resolved(definition, value, first.source, tuple(synonym for _, synonym in found))


def resolve_all(overrides: Mapping[str, str],
                cluster_defaults: Mapping[str, str] = NO_CONFIGS) -> list[Resolved]:
    """Every topic config in force, in the table's order."""
    return [resolve(name, overrides, cluster_defaults) for name in TOPIC_CONFIGS]


def resolved_value(name: str, overrides: Mapping[str, str],
                   cluster_defaults: Mapping[str, str] = NO_CONFIGS) -> str:
    """One topic config's canonical value in force, without building its synonyms."""
    value, _ = next(_candidates(_definition(name), overrides, cluster_defaults))
    return value


def resolved_values(overrides: Mapping[str, str],
                    cluster_defaults: Mapping[str, str] = NO_CONFIGS) -> dict[str, str]:
    """Every topic config's canonical value in force, by topic config name."""
    return {name: resolved_value(name, overrides, cluster_defaults) for name in TOPIC_CONFIGS}


def min_insync_replicas(overrides: Mapping[str, str], cluster_defaults: Mapping[str, str] = NO_CONFIGS) -> int:
    """Replicas an acks=all write needs (at least 1: the table's minimum)."""
    return int(resolved_value(MIN_INSYNC_REPLICAS, overrides, cluster_defaults))


def unclean_leader_election_enable(overrides: Mapping[str, str],
                                   cluster_defaults: Mapping[str, str] = NO_CONFIGS) -> bool:
    """Whether an out-of-sync live replica may be elected when no in-sync one is left."""
    return resolved_value(UNCLEAN_LEADER_ELECTION_ENABLE, overrides, cluster_defaults) == "true"


def validate_cluster_defaults(configs: Mapping[str, object]) -> dict[str, str]:
    """Canonical values for cluster defaults keyed by topic config names or broker synonyms.

    Raises ConfigError (INVALID_CONFIG) naming the first unknown key or bad value;
    a synonym counting minutes or hours keeps its unit.
    """
    canonical = {}
    for key, raw in configs.items():
        if key in TOPIC_ONLY_CONFIGS:
            raise ConfigError(key, f"'{key}' is a topic-level config only: it has no cluster-wide default.")
        if key in TOPIC_CONFIGS:
            canonical[key] = TOPIC_CONFIGS[key].parse(raw)
            continue
        topic_name = TOPIC_NAME_FOR_SYNONYM.get(key)
        if topic_name is None:
            raise ConfigError(key, f"Unknown topic config or broker synonym '{key}'.")
        definition = TOPIC_CONFIGS[topic_name]
        synonym = next(s for s in definition.synonyms if s.name == key)
        value = synonym.to_topic_value(definition, raw)  # validates the converted value too
        canonical[key] = value if synonym.unit_ms == 1 else str(int(str(raw)))
    return canonical
