"""Where consumer instances live, and how a request reaches the process holding one.

An instance's Kafka consumer lives in the web process that created it, but the next request for it may
land on any web process, on any host. Each process that holds instances:

* has a node id (host, pid, random suffix) and keeps ``node:<id>`` alive in Redis with a short TTL;
* registers each instance under ``owner:<cluster, group, name>`` = its node id (``SET NX``: a name is
  unique across the whole web tier, which is what makes 40902 correct with many processes);
* serves ``inbox:<id>``, a Redis list of requests forwarded by other processes.

A process that gets a request for an instance it does not hold looks up the owner, pushes the operation
(already authenticated and parsed) to the owner's inbox with a fresh reply key, and waits on that key;
the owner runs it on the instance's thread and pushes the answer back. An owner whose node key has
expired is gone (killed, or its host lost): the instance is reported not found (40403), as Confluent's
REST Proxy does after a restart, and its registration is dropped. Redis is already every process's
shared state (Channels, Celery, the cache), so this adds no infrastructure and needs no sticky routing
in front of the web tier; ``base_uri`` is simply the URL the client used.

Ownership: the module-level :data:`router` belongs to the process. Request threads call
:meth:`InstanceRouter.create` and :meth:`InstanceRouter.call`; two daemon threads, started with the
first instance this process creates, serve the inbox and keep time (heartbeat, idle expiry). Each
instance holds the credential it was created with (``kafkarest.revocation``): revoking it deletes the
instance here, on a closer thread, and later requests for it get 40403.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import hashlib
import json
import logging
import os
import secrets
import socket
import threading
import time
import uuid
from typing import Any

import redis
from confluent_kafka import KafkaException
from django.conf import settings

from controlplane.kafkarest.errors import (
    CONSUMER_ALREADY_EXISTS,
    CONSUMER_INSTANCE_NOT_FOUND,
    INVALID_CONSUMER_CONFIG,
    KAFKA_RETRIABLE,
    RestError,
)
from controlplane.kafkarest.revocation import Hold, watcher
from controlplane.kafkarest.v2.consumers import ConsumerInstance, InstanceConfig, InstanceKey
from controlplane.tenancy.revocation import Credential

log = logging.getLogger(__name__)

PREFIX = "sluice:kafkarest:v2:"
HEARTBEAT_SECONDS = 1.0
NODE_TTL_SECONDS = 10  # a node silent this long is gone; generous, so a busy process is not declared dead
OWNER_TTL_SECONDS = 60  # refreshed by the owner's heartbeat; only garbage collection once the owner is gone
REPLY_TTL_SECONDS = 120
WAIT_SECONDS = 60.0  # the longest a forwarded operation may take (reads wait at most 30 s)
POLL_SECONDS = 1  # how often a forwarding request checks that the owner is still alive


def _not_found() -> RestError:
    return RestError(CONSUMER_INSTANCE_NOT_FOUND, "Consumer instance not found.")


def _owner_key(key: InstanceKey) -> str:
    digest = hashlib.sha256(json.dumps([key.cluster_id, key.group, key.name]).encode()).hexdigest()
    return f"{PREFIX}owner:{digest}"


def _node_key(node: str) -> str:
    return f"{PREFIX}node:{node}"


def _inbox_key(node: str) -> str:
    return f"{PREFIX}inbox:{node}"


def _text(value: Any) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


def _outcome(future: concurrent.futures.Future[Any]) -> dict[str, Any]:
    try:
        return {"ok": future.result()}
    except RestError as exc:
        return {"error": [exc.error_code, exc.message]}
    except Exception as exc:
        log.exception("consumer instance operation failed")
        return {"error": [500, f"Internal error: {type(exc).__name__}"]}


def _raise_or_return(outcome: dict[str, Any]) -> Any:
    if "error" in outcome:
        code, message = outcome["error"]
        raise RestError(int(code), str(message))
    return outcome["ok"]


class InstanceRouter:
    """The process's consumer instances, and the way to reach any process's; see the module docstring."""

    def __init__(self) -> None:
        self._instances: dict[InstanceKey, ConsumerInstance] = {}
        self._holds: dict[ConsumerInstance, Hold] = {}  # on the credentials each instance was created with
        self._lock = threading.Lock()
        self._pid = 0
        self._node = ""
        self._redis: redis.Redis | None = None
        self._started = False
        self._stopping = threading.Event()
        self._closers = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="rest-consumer-close")

    @property
    def node(self) -> str:
        if self._pid != os.getpid():  # a forked child is another node
            self._pid, self._node = os.getpid(), f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"
            self._redis, self._started, self._instances, self._holds = None, False, {}, {}
        return self._node

    @property
    def redis(self) -> redis.Redis:
        _ = self.node
        if self._redis is None:
            self._redis = redis.Redis.from_url(settings.REDIS_URL, decode_responses=True,
                                               health_check_interval=30)
        return self._redis

    # ------------------------------------------------------------------ request threads

    def create(self, key: InstanceKey, client_config: dict[str, Any], config: InstanceConfig, principal: str,
               credential: Credential | None = None) -> None:
        """Make the instance here and register this process as its owner; 40902 if the name is taken.

        The instance reads as ``principal`` (``client_config`` authenticates as it) and answers only to it.
        Revoking ``credential`` (what the caller authenticated with) deletes it."""
        node, r, owner_key = self.node, self.redis, _owner_key(key)
        if not r.set(owner_key, node, nx=True, ex=OWNER_TTL_SECONDS):
            current = _text(r.get(owner_key))
            if current is not None and (current == node or r.exists(_node_key(current))):
                raise RestError(CONSUMER_ALREADY_EXISTS, "Consumer with specified consumer ID already exists in "
                                                         "the specified consumer group.")
            r.set(owner_key, node, ex=OWNER_TTL_SECONDS)  # its owner is gone: the name is free again
        try:
            instance = ConsumerInstance(key, client_config, config, principal)
        except KafkaException as exc:
            r.delete(owner_key)
            raise RestError(INVALID_CONSUMER_CONFIG, f"Invalid consumer configuration: {exc}") from exc
        with self._lock:
            self._instances[key] = instance
        if credential is not None:
            def revoked(reason: str) -> None:  # on the revocation watcher's thread: hand the closing over
                self._closers.submit(self._revoke, instance)

            hold = watcher.hold(credential, revoked)
            with self._lock:
                if self._instances.get(key) is instance:
                    self._holds[instance] = hold
                else:  # already revoked (a revocation of a moment ago) or deleted
                    hold.release()
        self._start()
        self._heartbeat()

    def call(self, key: InstanceKey, op: str, args: dict[str, Any], principal: str) -> Any:
        """Run ``op`` on the instance, here or in the process that holds it; its result, or a RestError.

        Another principal's instance is a 40403, as if it did not exist: it reads with its creator's rights."""
        if self.node and key in self._instances:
            return _raise_or_return(self._run_here(key, op, args, principal, wait=True))
        r = self.redis
        owner = _text(r.get(_owner_key(key)))
        if owner is None or owner == self.node:
            raise _not_found()
        if not r.exists(_node_key(owner)):
            self._forget(key, owner)
            raise _not_found()
        reply_key = f"{PREFIX}reply:{uuid.uuid4().hex}"
        message = json.dumps({"cluster_id": key.cluster_id, "group": key.group, "name": key.name, "op": op,
                              "args": args, "reply": reply_key, "principal": principal})
        with r.pipeline() as pipe:
            pipe.rpush(_inbox_key(owner), message)
            pipe.expire(_inbox_key(owner), REPLY_TTL_SECONDS)
            pipe.execute()
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            answer = r.blpop([reply_key], timeout=POLL_SECONDS)
            if answer is not None:
                return _raise_or_return(json.loads(answer[1]))
            if not r.exists(_node_key(owner)):
                self._forget(key, owner)
                raise _not_found()
            if time.monotonic() > deadline:
                raise RestError(KAFKA_RETRIABLE, "The process holding the consumer instance did not answer in time.")

    def _forget(self, key: InstanceKey, owner: str) -> None:
        """Drop the registration of an instance whose owner is gone (unless someone took the name since)."""
        r = self.redis
        with r.pipeline() as pipe:
            try:
                pipe.watch(_owner_key(key))  # type: ignore[no-untyped-call]
                if pipe.get(_owner_key(key)) == owner:
                    pipe.multi()
                    pipe.delete(_owner_key(key))
                    pipe.execute()
            except redis.WatchError:
                pass

    # ------------------------------------------------------------------ the owner's side

    def _run_here(self, key: InstanceKey, op: str, args: dict[str, Any], principal: str, *, wait: bool,
                  reply_key: str | None = None) -> dict[str, Any]:
        with self._lock:
            instance = self._instances.get(key)
        if instance is None or instance.principal != principal:
            return {"error": [CONSUMER_INSTANCE_NOT_FOUND, "Consumer instance not found."]}
        if op == "delete":
            if not self._remove(instance):  # expired or revoked a moment ago
                return {"error": [CONSUMER_INSTANCE_NOT_FOUND, "Consumer instance not found."]}
            future: concurrent.futures.Future[Any] = self._closers.submit(instance.shutdown)
        else:
            future = instance.submit(op, args)
        if reply_key is not None:
            future.add_done_callback(lambda done: self._reply(reply_key, _outcome(done)))
            return {"ok": None}
        done, _ = concurrent.futures.wait([future], WAIT_SECONDS)
        if not done:
            return {"error": [KAFKA_RETRIABLE, "The consumer instance did not answer in time."]}
        return _outcome(future)

    def _reply(self, reply_key: str, outcome: dict[str, Any]) -> None:
        try:
            with self.redis.pipeline() as pipe:
                pipe.rpush(reply_key, json.dumps(outcome))
                pipe.expire(reply_key, REPLY_TTL_SECONDS)
                pipe.execute()
        except redis.RedisError:
            log.exception("could not answer a forwarded consumer request")

    def _revoke(self, instance: ConsumerInstance) -> None:
        """Delete an instance whose creator's credentials were revoked (a closer thread): later requests get
        40403, as for a deleted one."""
        log.info("consumer instance %s deleted: its credentials were revoked", instance.key)
        if self._remove(instance):
            instance.shutdown()

    def _remove(self, instance: ConsumerInstance) -> bool:
        """Forget the instance and its registration; False if it was already gone."""
        with self._lock:
            hold = self._holds.pop(instance, None)
            if self._instances.get(instance.key) is not instance:
                return False
            del self._instances[instance.key]
        if hold is not None:
            hold.release()
        try:
            r = self.redis
            if r.get(_owner_key(instance.key)) == self.node:
                r.delete(_owner_key(instance.key))
        except redis.RedisError:
            log.exception("could not unregister consumer instance %s", instance.key)
        return True

    def _start(self) -> None:
        with self._lock:
            if self._started:
                return
            self._started = True
        threading.Thread(target=self._serve_inbox, name="rest-consumer-inbox", daemon=True).start()
        threading.Thread(target=self._keep_time, name="rest-consumer-timer", daemon=True).start()
        atexit.register(self.close_all)

    def _serve_inbox(self) -> None:
        inbox = _inbox_key(self.node)
        while not self._stopping.is_set():
            try:
                item = self.redis.blpop([inbox], timeout=POLL_SECONDS)
                if item is None:
                    continue
                message = json.loads(item[1])
                key = InstanceKey(message["cluster_id"], message["group"], message["name"])
                outcome = self._run_here(key, message["op"], message["args"], str(message.get("principal", "")),
                                         wait=False, reply_key=message["reply"])
                if "error" in outcome:
                    self._reply(message["reply"], outcome)
            except redis.RedisError as exc:  # Redis restarting or gone: an operational state, not a bug
                log.warning("consumer inbox: Redis failed (%s); retrying", exc)
                self._stopping.wait(POLL_SECONDS)
            except Exception:
                log.exception("consumer inbox: a bad forwarded request")

    def _heartbeat(self) -> None:
        with self._lock:
            keys = list(self._instances)
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.set(_node_key(self.node), "1", ex=NODE_TTL_SECONDS)
            for key in keys:
                pipe.expire(_owner_key(key), OWNER_TTL_SECONDS)
            pipe.execute()

    def _keep_time(self) -> None:
        while not self._stopping.wait(HEARTBEAT_SECONDS):
            try:
                self._heartbeat()
            except redis.RedisError:
                log.exception("consumer instances: heartbeat failed")
            now = time.monotonic()
            with self._lock:
                expired = [i for i in self._instances.values() if i.expired(now)]
            for instance in expired:
                log.info("consumer instance %s expired after %d ms idle", instance.key,
                         instance.config.instance_timeout_ms)
                if self._remove(instance):
                    self._closers.submit(instance.shutdown)

    def close_all(self) -> None:
        """Close every instance (they leave their groups) and unregister this process: at exit."""
        self._stopping.set()
        with self._lock:
            instances = list(self._instances.values())
        removed = [instance for instance in instances if self._remove(instance)]
        for instance in removed:
            instance.shutdown()
        with contextlib.suppress(redis.RedisError):
            self.redis.delete(_node_key(self.node))


router = InstanceRouter()
