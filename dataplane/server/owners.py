"""What request handlers may use: the owners of the broker's state, as one frozen set (Kafka's ``KafkaApis``
constructor arguments), never the ``Broker`` itself.

Each field is the narrowest owner that answers for its part: the replica manager
for partitions and the waits on them, the admin manager for every metadata write,
the coordinators for groups and transactions, ``Access`` for decisions. The three
interfaces below are what the broker itself still provides, as typing ``Protocol``s,
so a handler cannot reach past them into the composition root; an import-linter
contract forbids ``dataplane.server.handlers`` from importing ``dataplane.server.broker``.

Built once by the broker (the composition root) before it serves a request; the
objects it names are owned by their builders and used on the broker's event loop.
Tests call handlers with a real broker's set (tests/dataplane/server/test_handlers_in_process.py),
in process, without a broker process or sockets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from dataplane.cluster.admin_manager import AdminManager
from dataplane.cluster.metadata_cache import MetadataCache
from dataplane.cluster.store import TopicState
from dataplane.coordinator.manager import GroupCoordinator
from dataplane.coordinator.txn_manager import TransactionCoordinator
from dataplane.coordinator.txn_state import TopicPartition
from dataplane.protocol.errors import ErrorCode
from dataplane.replication.manager import ReplicaManager
from dataplane.server.access import Access
from dataplane.server.config import BrokerConfig
from dataplane.server.quotas import QuotaManager
from dataplane.server.traffic import TopicTraffic

if TYPE_CHECKING:
    from dataplane.security.oauthbearer import TokenValidator
    from dataplane.server.apis import SaslSession


class MetadataSource(Protocol):
    """The metadata cache, made current first when this broker's lease lapsed (a pause may have left it stale)."""

    async def current_metadata(self) -> MetadataCache: ...


class CoordinatorHost(Protocol):
    """The broker's side of the coordinators: their internal topics, the markers a coordinator asks a
    partition leader to write, and the KIP-890 check a leader makes before a transactional write."""

    async def ensure_offsets_topic(self) -> TopicState: ...

    async def ensure_txn_topic(self) -> TopicState: ...

    async def write_markers_here(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                                 partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]: ...

    async def verify_in_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                    partition: TopicPartition) -> ErrorCode: ...


class Sessions(Protocol):
    """Connections authenticated on this broker, closed when their credential goes."""

    def authenticated(self, session: SaslSession) -> None: ...


@dataclass(frozen=True, slots=True)
class Owners:
    """Everything a request handler may use (see the module docstring)."""

    config: BrokerConfig
    metadata: MetadataCache
    fresh_metadata: MetadataSource
    access: Access
    quotas: QuotaManager
    traffic: TopicTraffic
    replicas: ReplicaManager
    admin: AdminManager
    groups: GroupCoordinator
    transactions: TransactionCoordinator
    coordinator_host: CoordinatorHost
    sessions: Sessions
    token_validator: TokenValidator | None
