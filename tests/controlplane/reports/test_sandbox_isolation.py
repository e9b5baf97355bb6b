"""The reports sandbox itself, without Spark: a probe started exactly as the runner is (``bootstrap.sh``
through ``unshare``) reports what a tenant's code in it could see and do."""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path
from typing import Any

import pytest

from controlplane.reports.sandbox.launcher import _code_root, _Process

SECRET_ENV = ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "CELERY_BROKER_URL", "SLUICE_TLS_KEY")


def _probe(hidden: list[str], ask: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    for name in SECRET_ENV:  # as in a worker: the service's secrets are in the parent's environment
        monkeypatch.setenv(name, f"postgresql://sluice:leaked-{name}@127.0.0.1/x")
    scratch = Path(tempfile.mkdtemp(prefix="sandbox-probe-"))
    process = _Process(scratch, hidden, module="tests.controlplane.reports.sandbox_probe")
    try:
        process.channel._sock.settimeout(60)
        process.channel.send(ask)
        report = process.channel.receive()
        assert process.proc.wait(30) == 0, process.log_tail()
        return report
    finally:
        if process.proc.poll() is None:
            process.kill()
        process.channel.close()


def test_the_runner_sees_no_secrets_and_cannot_change_the_host(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    var = tmp_path / "var"
    (var / "clusters" / "c1").mkdir(parents=True)
    (var / "secret_key").write_text("the-service-secret-key")
    (var / "clusters" / "c1" / "broker.toml").write_text('inter.broker.sasl.password = "internal"')
    tls_key = tmp_path / "tls.key"
    tls_key.write_text("-----BEGIN PRIVATE KEY-----")
    code = Path(_code_root())
    sibling = Path(tempfile.mkdtemp(prefix="sandbox-neighbour-"))
    report = _probe([str(var), str(tls_key)], {
        "read": [str(var / "secret_key"), str(var / "clusters" / "c1" / "broker.toml"), str(tls_key),
                 "/proc/1/environ"],
        "list": [str(var), str(var / "clusters")],
        "write": [str(code / "controlplane" / "sandbox-probe.py"), str(sibling / "x"), "/etc/sandbox-probe"],
    }, monkeypatch)
    assert not set(SECRET_ENV) & set(report["env"]), report["env"]
    for path in (str(var / "secret_key"), str(var / "clusters" / "c1" / "broker.toml")):
        assert report["read"][path].startswith("refused"), (path, report["read"][path])
    assert report["read"][str(tls_key)] == "allowed: ", report["read"]  # a hidden file reads as /dev/null
    # PID 1 of its own namespace is the sandbox's first process: its environment has no secrets either.
    environ = report["read"]["/proc/1/environ"]
    assert all(f"leaked-{name}" not in environ for name in SECRET_ENV), environ
    assert report["list"][str(var)].startswith("refused"), report["list"]
    assert report["list"][str(var / "clusters")].startswith("refused"), report["list"]
    assert all(v.startswith("refused") for v in report["write"].values()), report["write"]
    assert report["scratch_write"].startswith("allowed"), report["scratch_write"]
    assert report["unmount"].startswith("refused"), report["unmount"]
    assert int(report["cap_eff"], 16) == 0 and report["no_new_privs"] == "1", report
    assert max(report["pids"]) < 10, report["pids"]  # its own PID namespace: no other process of the host
    assert not (code / "controlplane" / "sandbox-probe.py").exists()


def test_a_sandbox_that_cannot_start_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    from controlplane.reports.sandbox.launcher import Sandbox, SandboxUnavailable

    monkeypatch.setenv("PATH", "/nonexistent")  # no unshare, no setpriv: no sandbox, so no runner
    box = Sandbox([tempfile.mkdtemp()])
    try:
        with pytest.raises((SandboxUnavailable, FileNotFoundError)):
            box.start()
    finally:
        box.stop()


def test_channel_refuses_a_broken_peer() -> None:
    from controlplane.reports.sandbox.protocol import Channel, ChannelClosed

    a, b = socket.socketpair()
    channel = Channel(a)
    b.sendall(b"not json\n")
    with pytest.raises(ChannelClosed):
        channel.receive()
    b.close()
    with pytest.raises(ChannelClosed):
        channel.receive()
    channel.close()
    assert os.path.exists(_code_root())
