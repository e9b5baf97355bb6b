"""Security benchmark: what SASL and ACLs cost the broker, against a PLAINTEXT broker without ACLs, in one run.

    python bench/security.py            # full run, a few minutes
    python bench/security.py --quick    # ~1 minute

Starts three brokers side by side (metadata in an embedded Postgres unless DATABASE_URL
is set): one PLAINTEXT with no authorizer (the baseline), one SASL_PLAINTEXT with the
authorizer on, the client ``alice`` allowed by ACLs and 10,000 other ACLs in the store,
and one SASL_SSL configured the same way with a throwaway CA's certificate (trustme).
Then, alternating between them, best of the rounds:

* produce (confluent-kafka, 1 KiB values, acks 1, linger 5 ms) and consume (assign from
  offset 0) throughput; the ratio secure / plain (goal >= 0.95 for SASL_PLAINTEXT; TLS's
  ratio is reported: it encrypts in user space and cannot use sendfile);
* new connections per second, each a TCP connect [plus a TLS handshake] plus ApiVersions, plus a SASL exchange
  (PLAIN, and SCRAM-SHA-256 with Kafka's 4096 iterations): the client caches its salted
  password per salt, so the figure is the broker's cost, not the client's PBKDF2;
* authorizer decisions per second with 10 and with 10,000 ACLs (in process, no cache).

Every process started here is killed by its pid on exit.
"""

from __future__ import annotations

import argparse
import functools
import socket
import ssl
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psycopg
import trustme
from common import ROOT, Broker, Procs, metadata_database, ok, ratio
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from dataplane.cluster.migrations import migrate
from dataplane.cluster.security_store import SecurityStore
from dataplane.cluster.store import MetadataStore
from dataplane.protocol.client import ClientCodec
from dataplane.security import scram
from dataplane.security.acl import AclOperation, AclPermission, PatternType, ResourceType
from dataplane.security.authorizer import AclBinding, Authorizer
from dataplane.security.sasl import plain_hash

VALUE = 1024
SECRET = "alice-secret"
QUIET = {"log_level": 0, "logger": lambda *args: None}
TARGET = 0.95

# The client's PBKDF2 once per salt (a real client would run it per connection; the broker never does).
scram.salted_password = functools.cache(scram.salted_password)  # type: ignore[assignment]


def acls(count: int) -> list[AclBinding]:
    """``count`` ACLs on other topics and principals, plus alice's own."""
    found = [AclBinding(ResourceType.TOPIC, f"topic-{i}", PatternType.LITERAL, f"User:u{i}", "*",
                        AclOperation.READ, AclPermission.ALLOW) for i in range(count - count // 10)]
    found += [AclBinding(ResourceType.TOPIC, f"pre{i % 97}-{i}-", PatternType.PREFIXED, f"User:u{i}", "*",
                         AclOperation.WRITE, AclPermission.ALLOW) for i in range(count // 10)]
    for op in (AclOperation.WRITE, AclOperation.READ, AclOperation.CREATE):
        found.append(AclBinding(ResourceType.TOPIC, "bench", PatternType.PREFIXED, "User:alice", "*", op,
                                AclPermission.ALLOW))
    found.append(AclBinding(ResourceType.GROUP, "*", PatternType.LITERAL, "User:alice", "*", AclOperation.READ,
                            AclPermission.ALLOW))
    return found


def seed(url: str, cluster_id: str, count: int) -> None:
    migrate(url, "sluice_meta")
    with psycopg.connect(url) as conn:
        store = MetadataStore(conn, cluster_id)
        store.ensure_cluster()
        security = SecurityStore(store)
        security.set_plain_credential("alice", plain_hash(SECRET))
        security.set_scram_credential("alice", "SCRAM-SHA-256", scram.derive("SCRAM-SHA-256", SECRET, 4096))
        security.create_acls(acls(count))


def sasl_config(mechanism: str = "SCRAM-SHA-256", ca: Path | None = None) -> dict[str, str]:
    tls = {} if ca is None else {"ssl.ca.location": str(ca)}
    return {"security.protocol": "SASL_PLAINTEXT" if ca is None else "SASL_SSL", **tls, "sasl.mechanism": mechanism,
            "sasl.username": "alice", "sasl.password": SECRET}


def certificates(directory: Path) -> tuple[Path, Path, Path]:
    """(CA, certificate, key) PEM files: a throwaway CA and a certificate for 127.0.0.1."""
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1")
    paths = directory / "ca.pem", directory / "broker.pem", directory / "broker.key"
    ca.cert_pem.write_to_path(str(paths[0]))
    server.cert_chain_pems[0].write_to_path(str(paths[1]))
    server.private_key_pem.write_to_path(str(paths[2]))
    return paths


def produce(bootstrap: str, topic: str, count: int, extra: dict[str, str]) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1, "batch.size": 1 << 20,
                         "queue.buffering.max.messages": 1_000_000, **extra, **QUIET})
    value = b"x" * VALUE
    producer.produce(topic, value)
    producer.flush(30)  # connected and the topic known before the clock starts
    started = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0
    return count / (time.perf_counter() - started)


def consume(bootstrap: str, topic: str, count: int, extra: dict[str, str]) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "fetch.max.bytes": 50 << 20, **extra, **QUIET})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    started = time.perf_counter()
    while got < count:
        for message in consumer.consume(10_000, 10):
            if message.error() is None:
                got += 1
    elapsed = time.perf_counter() - started
    consumer.close()
    return got / elapsed


def connect(port: int, mechanism: str | None, tls: ssl.SSLContext | None = None) -> None:
    """One new connection: ApiVersions, then (on the SASL broker) a whole SASL exchange."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=30)
    with raw if tls is None else tls.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
        codec = ClientCodec("bench")

        def call(request: object) -> object:
            sock.sendall(codec.send(request)[1])
            while True:
                found = codec.receive(sock.recv(65536))
                if found:
                    return found[0].body
        call(ApiVersionsRequest(client_software_name="bench", client_software_version="1"))
        if mechanism is None:
            return
        assert call(SaslHandshakeRequest(mechanism=mechanism)).error_code.value == 0  # type: ignore[attr-defined]

        def step(token: bytes) -> bytes:
            answer = call(SaslAuthenticateRequest(auth_bytes=token))
            assert answer.error_code.value == 0, answer  # type: ignore[attr-defined]
            return bytes(answer.auth_bytes)  # type: ignore[attr-defined]
        if mechanism == "PLAIN":
            step(f"\0alice\0{SECRET}".encode())
            return
        client = scram.ScramClient(mechanism, "alice", SECRET)
        client.verify(step(client.final(step(client.first()))))


def connections_per_second(port: int, mechanism: str | None, seconds: float, threads: int = 4,
                           tls: ssl.SSLContext | None = None) -> float:
    done = [0] * threads
    deadline = time.perf_counter() + seconds

    def run(index: int) -> None:
        while time.perf_counter() < deadline:
            connect(port, mechanism, tls)
            done[index] += 1
    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return sum(done) / (time.perf_counter() - started)


def decisions_per_second(count: int, seconds: float) -> float:
    authorizer = Authorizer(acls(count), super_users=["User:admin"])
    names = [f"bench-{i}" for i in range(50)] + [f"topic-{i}" for i in range(50)] + [f"pre{i}-x" for i in range(50)]
    done = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        for name in names:
            authorizer.authorize("User:alice", "127.0.0.1", AclOperation.WRITE, ResourceType.TOPIC, name)
        done += len(names)
    return done / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--acls", type=int, default=10_000)
    args = parser.parse_args()
    records = 100_000 if args.quick else 300_000
    rounds = 1 if args.quick else 3
    procs = Procs()
    with tempfile.TemporaryDirectory(prefix="sluice-bench-security-") as tmp, metadata_database(ROOT) as url:
        root = Path(tmp)
        try:
            plain = Broker(procs, root / "plain" / "data", url, f"bench-{uuid.uuid4().hex[:8]}", 1, [])
            secure_id = f"bench-{uuid.uuid4().hex[:8]}"
            seed(url, secure_id, args.acls)
            config = root / "secure.toml"
            config.write_text('listeners = "SASL_PLAINTEXT://127.0.0.1:0"\nauthorizer.enabled = true\n'
                              'super.users = "User:admin"\ninter.broker.sasl.username = "broker"\n'
                              'inter.broker.sasl.password = "broker-secret"\n')
            secure = Broker(procs, root / "secure" / "data", url, secure_id, 1, ["--config", str(config)])
            tls_id = f"bench-{uuid.uuid4().hex[:8]}"
            seed(url, tls_id, args.acls)
            ca, certificate, key = certificates(root)
            tls_config = root / "tls.toml"
            tls_config.write_text('listeners = "SASL_SSL://127.0.0.1:0"\nauthorizer.enabled = true\n'
                                  'super.users = "User:admin"\ninter.broker.sasl.username = "broker"\n'
                                  f'inter.broker.sasl.password = "broker-secret"\nssl.certificate = "{certificate}"\n'
                                  f'ssl.key = "{key}"\n')
            tls = Broker(procs, root / "tls" / "data", url, tls_id, 1, ["--config", str(tls_config)])
            for broker in (plain, secure, tls):
                failed = broker.start()
                if failed:
                    print(f"broker did not start:\n{failed}")
                    return 1
            for broker, extra in ((plain, {}), (secure, sasl_config()), (tls, sasl_config(ca=ca))):
                admin = AdminClient({"bootstrap.servers": broker.bootstrap, **extra, **QUIET})
                for future in admin.create_topics([NewTopic(f"bench-{r}", 1, 1) for r in range(rounds)]).values():
                    future.result(30)
            print(f"security bench: {records:,} records of {VALUE} B per round, best of {rounds}; "
                  f"the SASL brokers hold {args.acls:,} ACLs")
            best: dict[tuple[str, str], float] = {}
            for r in range(rounds):
                for name, broker, extra in (("plain", plain, {}), ("sasl+acls", secure, sasl_config()),
                                            ("sasl_ssl+acls", tls, sasl_config(ca=ca))):
                    topic = f"bench-{r}"
                    rate = produce(broker.bootstrap, topic, records, extra)
                    best[(name, "produce")] = max(best.get((name, "produce"), 0.0), rate)
                    rate = consume(broker.bootstrap, topic, records, extra)
                    best[(name, "consume")] = max(best.get((name, "consume"), 0.0), rate)
            print(f"\n{'':12}{'PLAINTEXT, no ACLs':>22}{'SASL + ACLs':>16}{'ratio':>8}"
                  f"{'SASL_SSL + ACLs':>20}{'ratio':>8}")
            for phase in ("produce", "consume"):
                base, secured = best[("plain", phase)], best[("sasl+acls", phase)]
                encrypted = best[("sasl_ssl+acls", phase)]
                share = ratio(secured, base)
                print(f"{phase:12}{base:>14,.0f} rec/s{secured:>10,.0f} rec/s{share:>8.2f}"
                      f"{encrypted:>14,.0f} rec/s{ratio(encrypted, base):>8.2f}  "
                      f"(SASL goal >= {TARGET}: {ok(share >= TARGET)})")
            seconds = 3 if args.quick else 8
            print("\nnew connections per second (4 client threads; connect + ApiVersions [+ SASL]):")
            base = connections_per_second(plain.port, None, seconds)
            print(f"  PLAINTEXT, no SASL   {base:>8,.0f}/s")
            for mechanism in ("PLAIN", "SCRAM-SHA-256"):
                rate = connections_per_second(secure.port, mechanism, seconds)
                print(f"  SASL {mechanism:<16}{rate:>8,.0f}/s  ({ratio(rate, base):.2f} of PLAINTEXT)")
            client_tls = ssl.create_default_context(cafile=str(ca))
            rate = connections_per_second(tls.port, "PLAIN", seconds, tls=client_tls)
            print(f"  SASL_SSL PLAIN        {rate:>8,.0f}/s  ({ratio(rate, base):.2f} of PLAINTEXT; TLS 1.3 handshake)")
            print("\nauthorizer decisions per second (one thread, no decision cache):")
            small = decisions_per_second(10, seconds)
            large = decisions_per_second(args.acls, seconds)
            print(f"  10 ACLs       {small:>12,.0f}/s")
            print(f"  {args.acls:,} ACLs {large:>12,.0f}/s  ({ratio(large, small):.2f} of the 10-ACL rate)")
        finally:
            procs.stop_all()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
