"""One real Sluice service for the REST Proxy and WebSocket tests: ``sluice up`` on its own database.

Started once per xdist worker that runs these tests (mark modules ``xdist_group("kafkarest")`` so one
worker does), on free ports, with its own Postgres database (on the session's server), Celery queue and
agent host name, and stopped by its process group at the end. Tests talk to it only as clients do --
HTTP, WebSocket and Kafka -- so pytest-django's per-test flushes of the test database cannot touch it.
"""

from __future__ import annotations

import base64
import http.cookiejar
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import psycopg
import pytest

from sluice.embedded import free_port, free_port_range
from tests.support.process_output import drain_to, read_until
from tests.support.stack import ROOT, database_url, kill_tree

UP_TIMEOUT = 180.0


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class RestStack:
    """The running service and the demo tenant's owner credentials."""

    base: str
    port: int
    var: Path
    env: dict[str, str]
    tenant: str
    username: str
    password: str
    key: str
    cluster_id: str = ""  # the demo cluster's Kafka cluster id (skc-...)
    cluster_pk: str = ""
    bootstrap: str = ""
    proc: subprocess.Popen[str] | None = None
    extra: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def kafka(self) -> dict[str, str]:
        """librdkafka settings for the demo cluster as the demo tenant's owner (its API key over SASL/PLAIN)."""
        key_id, _, secret = self.key.partition(":")
        return {"bootstrap.servers": self.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": key_id, "sasl.password": secret}

    @property
    def kafka_python(self) -> dict[str, str]:
        """The same for kafka-python (and aiokafka) keyword arguments."""
        key_id, _, secret = self.key.partition(":")
        return {"bootstrap_servers": self.bootstrap, "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "PLAIN", "sasl_plain_username": key_id, "sasl_plain_password": secret}

    @staticmethod
    def basic(key: str) -> str:
        return "Basic " + base64.b64encode(key.encode()).decode()

    def request(self, method: str, path: str, body: Any = None, *, key: str | None = "owner",
                headers: dict[str, str] | None = None, raw: bytes | None = None, base: str | None = None,
                timeout: float = 60) -> Answer:
        """One HTTP request; ``body`` is sent as JSON, ``raw`` as is; ``key=None`` sends no credentials."""
        sent = {"Content-Type": "application/json"} if body is not None or raw is not None else {}
        if key is not None:
            sent["Authorization"] = self.basic(self.key if key == "owner" else key)
        sent.update(headers or {})
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        request = urllib.request.Request((base or self.base) + path, data=data, method=method, headers=sent)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return Answer(response.status, dict(response.headers), response.read())
        except urllib.error.HTTPError as exc:
            return Answer(exc.code, dict(exc.headers), exc.read())

    def api(self, method: str, path: str, body: Any = None, *, key: str | None = "owner") -> Any:
        """A management-API call under the demo tenant that must succeed; returns its JSON."""
        answer = self.request(method, f"/api/v1/tenants/{self.tenant}{path}", body, key=key)
        assert answer.status < 300, (answer.status, answer.body[:500])
        return answer.json() if answer.body else None

    def add_member(self, username: str, password: str, email: str, role: str) -> Any:
        """Make an existing account a member of the demo tenant as people join: the owner invites its address,
        and the account, signed in, accepts. Returns the membership's JSON."""
        invitation = self.api("POST", "/invitations", {"email": email, "role": role})
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        json_headers = {"Content-Type": "application/json"}
        opener.open(urllib.request.Request(f"{self.base}/api/v1/auth/login", method="POST", headers=json_headers,
                                           data=json.dumps({"username": username, "password": password}).encode()),
                    timeout=60).close()
        csrf = next(c.value for c in jar if c.name == "csrftoken")
        opener.open(urllib.request.Request(f"{self.base}/api/v1/invitations/{invitation['id']}/accept", method="POST",
                                           headers={"X-CSRFToken": csrf}), timeout=60).close()
        members = self.api("GET", "/members?" + urllib.parse.urlencode({"email": email}))["results"]
        return next(m for m in members if m["email"] == email)

    def new_key(self, role: str = "member") -> str:
        """A service account with ``role`` in the demo tenant, and a key for it."""
        account = self.api("POST", "/service-accounts", {"name": f"sa-{uuid.uuid4().hex[:8]}", "role": role})
        made = self.api("POST", "/api-keys", {"service_account": account["id"]})
        return f"{made['key_id']}:{made['secret']}"

    def principal_of(self, key: str) -> str:
        """The Kafka principal an API key acts as (REST and WebSocket reach the cluster as it)."""
        key_id = key.split(":", 1)[0]
        return str(self.api("GET", f"/api-keys/{key_id}")["principal"])

    def grant(self, key: str, resource_type: str, name: str, *operations: str, pattern: str = "LITERAL") -> None:
        """ACLs for ``key``'s principal through the v3 API (the control plane's bindings; the cluster gets them
        from reconcile, so callers poll for the effect)."""
        principal = self.principal_of(key)
        for operation in operations:
            answer = self.request("POST", f"/kafka/v3/clusters/{self.cluster_id}/acls", {
                "resource_type": resource_type, "resource_name": name, "pattern_type": pattern,
                "principal": principal, "host": "*", "operation": operation, "permission": "ALLOW"})
            assert answer.status == 201, (answer.status, answer.body[:300])

    def create_topic(self, name: str, partitions: int = 3, configs: dict[str, str] | None = None) -> None:
        """A topic made through the v3 API, ready for clients when this returns."""
        answer = self.request("POST", f"/kafka/v3/clusters/{self.cluster_id}/topics",
                              {"topic_name": name, "partitions_count": partitions,
                               "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]})
        assert answer.status == 201, (answer.status, answer.body[:500])
        self.wait_for_leaders(name, partitions)

    def wait_for_leaders(self, name: str, partitions: int) -> None:
        """Until the topic has ``partitions`` partitions, each with a leader (clients can use it)."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(self.kafka)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            described = admin.list_topics(name, timeout=5).topics.get(name)
            if described is not None and described.error is None and len(described.partitions) == partitions \
                    and all(p.leader >= 0 for p in described.partitions.values()):
                return
            time.sleep(0.05)  # polling a condition, within the deadline
        raise AssertionError(f"topic {name} never got leaders")


@pytest.fixture(scope="session")
def rest_stack() -> Iterator[RestStack]:
    name = f"sluice_rest_{uuid.uuid4().hex[:10]}"
    admin_url = database_url("postgres")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    root = Path(tempfile.mkdtemp(prefix="sluice-rest-"))
    var = root / "var"
    port, (first, last) = free_port(), free_port_range(10)
    suffix = uuid.uuid4().hex[:8]
    env = {**os.environ, "DATABASE_URL": database_url(name), "SLUICE_VAR_DIR": str(var),
           "CELERY_DEFAULT_QUEUE": f"rest-{suffix}", "PYTHONUNBUFFERED": "1", "LOG_LEVEL": "WARNING",
           # Its own reports queue too: another stack's reports worker (another database) must not take its runs.
           "SLUICE_REPORTS_QUEUE": f"reports-{suffix}",
           # The report runner (a JVM) starts with the console's first report, not with the stack.
           "SLUICE_REPORTS_PRESTART": "false",
           # Tiering brokers look for segments to upload every 200 ms rather than Kafka's 30 s.
           "SLUICE_REMOTE_LOG_MANAGER_INTERVAL_MS": "200"}
    proc = subprocess.Popen([sys.executable, "-m", "sluice", "up", "--port", str(port), "--quiet", "--workers", "2",
                             "--broker-ports", f"{first}-{last}", "--agent-host", f"rest-{suffix}"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    stack: RestStack | None = None
    try:
        read_until(proc, "Press Ctrl-C to stop.", UP_TIMEOUT, "sluice up")
        drain_to(proc, root / "sluice-up.log")
        creds = json.loads((var / "demo-credentials.json").read_text())
        stack = RestStack(f"http://127.0.0.1:{port}", port, var, env, creds["tenant_slug"], creds["username"],
                          creds["password"], f"{creds['key_id']}:{creds['secret']}", proc=proc)
        demo = next(c for c in stack.api("GET", "/clusters")["results"] if c["name"] == "demo")
        stack.cluster_id, stack.cluster_pk = demo["kafka_cluster_id"], demo["id"]
        stack.bootstrap = demo["status"]["bootstrap_servers"]
        yield stack
    finally:
        for extra in stack.extra if stack else []:
            kill_tree(extra.pid)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                kill_tree(proc.pid)
        for candidate in psutil.process_iter(["pid", "cmdline"]):
            if any(str(var) in part for part in candidate.info.get("cmdline") or []):
                kill_tree(candidate.info["pid"])
        shutil.rmtree(root, ignore_errors=True)
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
