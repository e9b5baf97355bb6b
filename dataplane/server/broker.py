"""The broker: the composition root that builds the dataplane's objects, wires them, and dispatches requests.

What each part owns:

* ``StoreThread`` (cluster): the metadata store's connection and its thread;
* ``MetadataCache`` (cluster): topics, partitions, live brokers, the controller,
  read by every handler; refreshed here by the metadata loop (woken by NOTIFY
  through the ``ChangeListener``, and on a timer in case a notification was
  missed), the lease heartbeat and the controller loop;
* ``BrokerLease`` and ``ControllerLoop`` (cluster): the registration lease, and
  the controller lease whose holder re-elects leaders of dead brokers;
* ``LogManager`` (storage): the partition logs of the data directory;
* ``RemoteLogManager`` (storage.remote, only with remote storage configured): uploads of tiered partitions'
  closed segments, their remote retention, remote reads and the cleanup of deleted topics' objects, on its
  own threads;
* ``ReplicaManager`` (replication): every hosted ``Partition`` (appends, reads,
  the high watermark) and the fetchers of followers, and the purgatory: the
  delayed fetch (long polls) and the acks=all wait;
* ``AdminManager`` (cluster): every metadata write the admin APIs make, each
  followed by the re-read that shows it here; producer-id blocks;
* ``GroupCoordinator`` (coordinator): consumer groups, on ``__consumer_offsets``;
* ``TransactionCoordinator`` (coordinator): transactional ids, on ``__transaction_state``;
* ``BrokerCoordinatorHost`` (server): both coordinators' internal topics, and the
  markers they ask partition leaders to write (here, or to others over WriteTxnMarkers);
* ``Access`` (server): the authorizer and SASL credentials, re-read when the
  store's security version moves;
* ``QuotaManager`` (server): client quotas, their rates and connection counts,
  re-read when the store's quota version moves;
* ``Admission`` (server): open connections per client address and those not yet
  authenticated, against their caps.

Handlers (``dataplane.server.handlers``) get the frozen ``Owners`` set built here
(``server.owners``), never the Broker: they translate requests into calls on those
owners and results into responses, described once as version-agnostic values that
``protocol.build`` shapes for the version the client asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import uuid
from collections.abc import Callable
from typing import Any

import psycopg

from dataplane.cluster.admin_manager import AdminManager, TopicDefaults
from dataplane.cluster.controller import ControllerLoop
from dataplane.cluster.lease import BrokerLease
from dataplane.cluster.listener import ChangeListener
from dataplane.cluster.metadata_cache import MetadataCache
from dataplane.cluster.quota_store import QuotaStore
from dataplane.cluster.security_store import SecurityStore
from dataplane.cluster.store import BrokerRegistration, MetadataStore, PartitionState, TopicState
from dataplane.cluster.store_thread import StoreThread
from dataplane.coordinator.manager import OFFSETS_TOPIC, GroupCoordinator
from dataplane.coordinator.txn_manager import TransactionCoordinator, TxnSettings
from dataplane.coordinator.txn_records import TRANSACTION_STATE_TOPIC
from dataplane.protocol.errors import KafkaError
from dataplane.protocol.messages import Request
from dataplane.replication.fetcher import FetcherSettings
from dataplane.replication.manager import ReplicaManager, ReplicaSettings
from dataplane.replication.partition import Role
from dataplane.security import scram
from dataplane.security.oauthbearer import TokenValidator
from dataplane.security.quotas import Window
from dataplane.security.sasl import PLAIN, ClientCredentials, plain_hash
from dataplane.security.tls import client_context
from dataplane.server import handlers  # noqa: F401  (registers every API in REGISTRY)
from dataplane.server.access import Access
from dataplane.server.admission import Admission, AdmissionLimits
from dataplane.server.apis import REGISTRY, RequestContext, SaslSession
from dataplane.server.config import BrokerConfig
from dataplane.server.coordinator_host import BrokerCoordinatorHost
from dataplane.server.identity import claim_data_dir
from dataplane.server.metrics import BrokerMetrics
from dataplane.server.owners import Owners
from dataplane.server.quotas import QuotaManager
from dataplane.server.topic_configs import TopicConfigResolver
from dataplane.server.traffic import TopicTraffic
from dataplane.storage import LogManager
from dataplane.storage.remote.manager import RemoteLogManager, TieredPartition
from dataplane.storage.remote.reader import ReaderSettings
from dataplane.storage.remote.store import RemoteStorageError, S3ObjectStore, S3Settings

log = logging.getLogger(__name__)

SECURITY_EVENTS_SECONDS = 5.0  # how often counted SASL failures and ACL denials are written for the audit trail


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
    with contextlib.suppress(RuntimeError):  # the loop closed while the listener thread was still waking
        loop.call_soon_threadsafe(callback)


class Broker:
    """One broker process's objects. Built and run on the broker's event loop by ``server.app``."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.incarnation = uuid.uuid4()
        self.manager = LogManager(config.data_dir)
        self.db = StoreThread(config.metadata_url, config.metadata_schema, config.cluster_id,
                              lease_seconds=config.lease_seconds)
        host, port = config.advertised
        self.metadata = MetadataCache(BrokerRegistration(config.node_id, host, port, config.rack, self.incarnation))
        supers = (*config.super_users, *filter(None, [config.inter_broker_principal]))
        self.access = Access(config.authorizer_enabled, supers)
        self.token_validator = (TokenValidator(config.oauthbearer_token_key, config.cluster_id)
                                if config.oauthbearer_token_key is not None else None)
        self._security_lock = asyncio.Lock()
        self.quotas = QuotaManager(Window(config.quota_window_num, config.quota_window_size_seconds),
                                   config.max_connections_per_principal, config.max_connections_per_credential)
        self.admission = Admission(AdmissionLimits(config.max_unauthenticated_connections,
                                                   config.max_connections_per_ip))
        # Connections authenticated on this broker (their SASL sessions): closed when their credential goes.
        self.sessions: set[SaslSession] = set()
        self.topic_configs = TopicConfigResolver(self.metadata)
        self.traffic = TopicTraffic()
        self.lease = BrokerLease(self.db, self.metadata, config.lease_seconds, after_lapse=self.refresh_topics,
                                 bytes_out=self.traffic.unpublished, published=self.traffic.published)
        self.controller = ControllerLoop(self.db, self.metadata, self.lease, on_change=self.request_metadata_refresh)
        self.replicas = ReplicaManager(
            config.node_id, self.manager, self.metadata, self.topic_configs, self, self,
            lease_ok=self.lease.ok, data_dir=config.data_dir,
            settings=ReplicaSettings(lag_time_max_ms=config.replica_lag_time_max_ms,
                                     fetcher=FetcherSettings(max_wait_ms=config.replica_fetch_wait_max_ms,
                                                             sasl=self._inter_broker_credentials(),
                                                             tls=self._inter_broker_tls()),
                                     throttled_rate=config.follower_replication_throttled_rate))
        self.remote = self._remote_log_manager()
        self.replicas.remote = self.remote
        self._loop: asyncio.AbstractEventLoop | None = None
        self.admin = AdminManager(self.db, self.metadata, self,
                                  TopicDefaults(config.num_partitions, config.default_replication_factor,
                                                config.auto_create_topics))
        self.coordinator_host = BrokerCoordinatorHost(config, self.metadata, self.replicas, self.admin,
                                                      lease_ok=self.lease.ok,
                                                      peer_credentials=self._inter_broker_credentials(),
                                                      peer_tls=self._inter_broker_tls())
        self.coordinator = GroupCoordinator(config.coordinator_settings(), self.coordinator_host)
        self.transactions = TransactionCoordinator(
            TxnSettings(config.transaction_max_timeout_ms, config.transaction_abort_timed_out_interval_ms,
                        config.transactional_id_expiration_ms),
            self.coordinator_host)
        self.coordinator_host.attach(self.coordinator, self.transactions)
        self.metrics = BrokerMetrics(self.manager)
        self.stopping = False
        self.owners = Owners(config=config, metadata=self.metadata, fresh_metadata=self, access=self.access,
                             quotas=self.quotas, traffic=self.traffic, replicas=self.replicas, admin=self.admin,
                             groups=self.coordinator, transactions=self.transactions,
                             coordinator_host=self.coordinator_host,
                             sessions=self, token_validator=self.token_validator)
        self._refresh_lock = asyncio.Lock()
        self._metadata_changed: asyncio.Event | None = None
        self._listener: ChangeListener | None = None
        self._tasks: list[asyncio.Task[None]] = []

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        loop = self._loop = asyncio.get_running_loop()
        self._metadata_changed = asyncio.Event()
        directory_id = claim_data_dir(self.config.data_dir, self.config.cluster_id, self.config.node_id)
        self.metadata.local = BrokerRegistration(self.config.node_id, *self.config.advertised, self.config.rack,
                                                 self.incarnation, directory_id)
        await self.db.open()
        if self.config.sasl:
            await self.db.call(self._store_inter_broker_credential)
        await self.refresh_security()
        await self.refresh_quotas()
        await self.lease.register()
        await asyncio.to_thread(self.manager.startup)
        self.replicas.load_checkpoint()
        self.coordinator.start()
        self.transactions.start()
        await self.refresh_topics()
        self.replicas.start()
        if self.remote is not None:
            self.remote.start()
        self._listener = ChangeListener(self.config.metadata_url, self.config.cluster_id,
                                        lambda: _call_soon(loop, self.request_metadata_refresh))
        self._listener.start()
        self._tasks = [loop.create_task(self.lease.run(), name="heartbeat"),
                       loop.create_task(self._metadata_loop(), name="metadata"),
                       loop.create_task(self.controller.run(), name="controller"),
                       loop.create_task(self._report_security_events(), name="security-events")]

    def _remote_log_manager(self) -> RemoteLogManager | None:
        """The remote tier, when an endpoint and a bucket are configured (decision 0032)."""
        c = self.config
        if not c.remote_storage:
            return None
        assert c.remote_storage_endpoint is not None and c.remote_storage_bucket is not None
        store = S3ObjectStore(S3Settings(c.remote_storage_endpoint, c.remote_storage_bucket, c.remote_storage_region,
                                         c.remote_storage_access_key, c.remote_storage_secret_key))
        chunk = ReaderSettings().chunk_bytes
        return RemoteLogManager(
            store, prefix=c.remote_storage_prefix, cluster_id=c.cluster_id,
            interval_ms=c.remote_log_manager_interval_ms,
            partitions=self._tiered_partitions, topic_id=self._topic_id_hex, live_topic_ids=self._live_topic_ids,
            is_controller=lambda: self.metadata.controller_id == c.node_id,
            reader=ReaderSettings(chunk_bytes=chunk, read_ahead_chunks=c.remote_log_reader_read_ahead_bytes // chunk))

    def _tiered_partitions(self) -> list[TieredPartition]:
        """The remote log manager's view of the partitions hosted here (read from its thread: plain reads of
        values the event loop replaces whole)."""
        found = []
        for (topic, index), partition in list(self.replicas.partitions.items()):
            state = self.metadata.topics.get(topic)
            if state is None or partition.log.closed or not partition.log.config.remote_storage:
                continue
            found.append(TieredPartition(topic, index, state.topic_id.hex, partition.log,
                                         partition.role is Role.LEADER, partition.role is Role.FOLLOWER,
                                         partition.leader_epoch, partition.high_watermark))
        return found

    def _topic_id_hex(self, topic: str) -> str | None:
        state = self.metadata.topics.get(topic)
        return state.topic_id.hex if state is not None else None

    def _live_topic_ids(self) -> set[str]:
        """Every topic id in the metadata store, read now (the remote log manager's thread waits for it)."""
        loop = self._loop
        if loop is None:
            raise RemoteStorageError("the broker is not running")
        future = asyncio.run_coroutine_threadsafe(
            self.db.call(lambda: {t.topic_id.hex for t in self.store.topics()}), loop)
        try:
            return future.result(30)
        except (psycopg.Error, KafkaError, TimeoutError) as exc:
            raise RemoteStorageError(f"reading the topic ids: {exc}") from exc

    @property
    def store(self) -> MetadataStore:
        return self.db.store

    async def _metadata_loop(self) -> None:
        """Re-read metadata when notified, and check its version on a timer in case a notification was missed."""
        assert self._metadata_changed is not None
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._metadata_changed.wait(), self.config.metadata_refresh_seconds)
            self._metadata_changed.clear()
            try:
                version, security_version, quota_version = await self.db.call(
                    lambda: (*self.store.versions(), QuotaStore(self.store).version()))
                if security_version != self.access.version:
                    await self.refresh_security()
                if quota_version != self.quotas.version:
                    await self.refresh_quotas()
                if version != self.metadata.version:
                    self.metadata.update_brokers(await self.db.call(self.store.live_brokers))
                    await self.refresh_topics()
            except (psycopg.Error, KafkaError) as exc:
                log.warning("metadata refresh failed (will retry): %s", exc)

    async def _report_security_events(self) -> None:
        """Every few seconds, write the counted SASL failures and ACL denials to the metadata store, where the
        control plane ingests them into its audit trail. A failed write drops that interval's counts (bounded
        memory matters more than a complete count under a database outage)."""
        while True:
            await asyncio.sleep(SECURITY_EVENTS_SECONDS)  # a reporting period, not synchronisation
            events = self.access.events.drain()
            if not events:
                continue
            try:
                await self.db.call(SecurityStore(self.store).add_security_events, self.config.node_id, events)
            except psycopg.Error as exc:
                log.warning("could not report %d security events: %s", len(events), exc)

    def request_metadata_refresh(self) -> None:
        if self._metadata_changed is not None:
            self.metadata.version = -1
            self._metadata_changed.set()

    async def begin_shutdown(self) -> None:
        """Refuse new requests, end long polls early, and hand leadership over (a controlled shutdown).

        The lease is given up first, so the controller moves this broker's
        partitions to replicas still in their ISR while this one stops; and no ISR
        change is made from here on, or followers refused by a stopping broker
        would be dropped from the ISR and leave nobody to take over.
        """
        self.stopping = True
        self.replicas.freeze()
        for task in self._tasks:  # no lease renewal and no controller pass from here on
            task.cancel()
        if self.db.is_open:
            try:
                await self.lease.give_up()
            except (psycopg.Error, KafkaError) as exc:
                log.warning("could not give up the lease at shutdown (it will lapse): %s", exc)
        self.replicas.wake_all()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._listener is not None:
            await asyncio.to_thread(self._listener.stop)
        await self.replicas.stop()
        if self.remote is not None:
            await asyncio.to_thread(self.remote.stop)
        await self.coordinator.stop()
        await self.transactions.stop()
        self.coordinator_host.close()
        await asyncio.to_thread(self.manager.shutdown)  # each log snapshots its producer state as it closes
        if self.db.is_open:
            with contextlib.suppress(psycopg.Error):
                await self.db.call(self.store.unregister_broker, self.config.node_id, self.incarnation)
        await self.db.close()

    # ------------------------------------------------------------------ topics

    async def refresh_topics(self) -> None:
        """Re-read topics and cluster defaults, push changed configs to the live logs, and apply leadership.

        Changes made through any broker (or while this one was down) reach the logs
        here, so AlterConfigs needs no path of its own to the storage layer.
        """
        async with self._refresh_lock:
            version, topics, defaults, broker_configs = await self.db.call(
                lambda: (self.store.metadata_version(), self.store.topics(), self.store.cluster_configs(),
                         self.store.broker_configs()))
            self.metadata.update_broker_configs(broker_configs)
            changed = self.metadata.config_changes(topics, defaults)
            # Roles are applied before the cache shows the new state, so a broker never names itself leader
            # of a partition (in Metadata) that it does not lead yet.
            await self.replicas.apply({t.name: t for t in topics}, defaults)
            self.metadata.update_topics(version, topics, defaults)
            for topic in changed:
                self.manager.update_topic_config(topic.name, self.topic_configs.log_config(topic))

    async def refresh_security(self) -> None:
        """Re-read ACLs and credentials (one transaction's view) and swap them in."""
        async with self._security_lock:
            def read() -> tuple[int, list[Any], Any]:
                security = SecurityStore(self.store)
                with self.store.conn.transaction():
                    return self.store.versions()[1], security.acls(), security.credentials()
            version, bindings, credentials = await self.db.call(read)
            self.access.update(version, bindings, credentials)
            self._close_revoked()

    def authenticated(self, session: SaslSession) -> None:
        """A connection completed SASL: remember it, so revoking its credential closes it."""
        self.sessions.add(session)

    def forget(self, session: SaslSession) -> None:
        self.sessions.discard(session)

    def _close_revoked(self) -> None:
        """Close every connection whose credential was deleted or replaced (a revoked or re-issued key).

        Kafka keeps such connections until they re-authenticate (KIP-368); a managed service must cut them
        at once, so a revoked key reads and writes nothing more.
        """
        credentials = self.access.credentials
        for session in list(self.sessions):
            if session.mechanism is None or session.username is None:
                continue
            if credentials.stored(session.mechanism, session.username) != session.stored:
                self.sessions.discard(session)
                log.info("closing a connection of %s (%s): its credential was revoked or changed",
                         session.principal, session.username)
                if session.close is not None:
                    session.close()

    async def refresh_quotas(self) -> None:
        """Re-read client quotas (one transaction's view) and swap them in."""
        version, quotas = await self.db.call(QuotaStore(self.store).snapshot)
        self.quotas.update(version, quotas)

    def _inter_broker_credentials(self) -> ClientCredentials | None:
        config = self.config
        if not config.sasl or config.inter_broker_username is None or config.inter_broker_password is None:
            return None
        return ClientCredentials(config.inter_broker_mechanism, config.inter_broker_username,
                                 config.inter_broker_password)

    def _inter_broker_tls(self) -> ssl.SSLContext | None:
        """How a follower checks its leader on a TLS listener: against ``ssl.ca``, or, without one, against
        this broker's own certificate (brokers of a cluster share it, or its chain); mutual TLS presents it."""
        config = self.config
        if not config.tls:
            return None
        mutual = config.ssl_client_auth != "none"
        return client_context(config.ssl_ca or config.ssl_certificate,
                              config.ssl_certificate if mutual else None, config.ssl_key if mutual else None)

    def _store_inter_broker_credential(self) -> None:
        """Make sure the store holds this cluster's broker credential, without rewriting one that already matches.

        On the store's thread: PBKDF2 runs here only when the credential is missing
        or was made from another password, never per connection.
        """
        credentials = self._inter_broker_credentials()
        assert credentials is not None
        security = SecurityStore(self.store)
        current = security.credentials()
        user, password, mechanism = credentials.username, credentials.password, credentials.mechanism
        if mechanism == PLAIN:
            if current.plain.get(user) != plain_hash(password):
                security.set_plain_credential(user, plain_hash(password))
            return
        stored = current.scram.get((user, mechanism))
        if stored is None or scram.derive(mechanism, password, stored.iterations, stored.salt) != stored:
            security.set_scram_credential(user, mechanism, scram.derive(mechanism, password))

    async def current_metadata(self) -> MetadataCache:
        """The metadata cache, re-read first if our lease lapsed (a pause: what we hold may be long stale).

        Otherwise NOTIFY and the timer keep it current and nothing is read here, so
        Metadata and DescribeCluster requests cost no Postgres round trip.
        """
        if not self.lease.ok() and self.db.is_open and not self.stopping:
            try:
                self.metadata.update_brokers(await self.db.call(self.store.live_brokers))
                await self.refresh_topics()
            except (psycopg.Error, KafkaError) as exc:  # cut off from the store: answer from what we know
                log.warning("metadata re-read failed, answering from the cache: %s", exc)
        return self.metadata

    # ------------------------------------------------------------------ the replica manager's listener and ISR writer

    def leadership_changed(self, topic: str, partition: int, leads: bool) -> None:
        if topic == OFFSETS_TOPIC:
            self.coordinator.leadership_changed(partition, leads)
        elif topic == TRANSACTION_STATE_TOPIC:
            self.transactions.leadership_changed(partition, leads)

    async def alter_isr(self, topic: TopicState, partition: int, *, leader_epoch: int, partition_epoch: int,
                        isr: tuple[int, ...]) -> PartitionState | None:
        result: PartitionState | None = await self.db.call(
            self.store.alter_isr, topic.topic_id, partition, leader=self.config.node_id, leader_epoch=leader_epoch,
            partition_epoch=partition_epoch, isr=isr)
        return result

    # ------------------------------------------------------------------ dispatch

    async def handle(self, request: Request, context: RequestContext) -> Any:
        if self.stopping:
            # A ConnectionError is what the connection loop treats as "this connection is over".
            raise ConnectionAbortedError("broker is shutting down")
        self.metrics.request_started(request.api_key)
        try:
            return await REGISTRY[request.api_key].handler(self.owners, request, context)
        finally:
            self.metrics.request_finished(request.api_key)
