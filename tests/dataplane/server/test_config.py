"""`sluice broker --config`: Kafka's names in TOML, flags win, mistakes are one line and status 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dataplane.server.config import BrokerConfig, ConfigError, settings_from_table
from sluice.cli import broker_config, build_parser
from sluice.embedded import free_port
from tests.dataplane.server.test_metrics import scrape
from tests.support.broker import ROOT, BrokerProcess


def fields(table: dict[str, object]) -> dict[str, object]:
    return {field: value for field, (_, value) in settings_from_table(table).items()}


def test_dotted_keys_tables_and_quoted_keys_all_mean_kafka_names() -> None:
    assert fields({"node": {"id": 3}, "log": {"dirs": "/data"}, "auto.create.topics.enable": "false",
                   "listeners": "PLAINTEXT://0.0.0.0:9093", "advertised.listeners": "broker-1:19093",
                   "metrics": {"listen": "127.0.0.1:9644"}, "socket.request.max.bytes": 1024,
                   "fetch.transfer": "copy", "broker.rack": "r1", "num.partitions": 6,
                   "default.replication.factor": 1, "metadata.url": "postgresql://x/y", "cluster.id": "c1"}) == {
        "node_id": 3, "data_dir": Path("/data"), "auto_create_topics": False, "host": "0.0.0.0", "port": 9093,
        "advertised_host": "broker-1", "advertised_port": 19093, "metrics_listen": ("127.0.0.1", 9644),
        "max_request_bytes": 1024, "fetch_transfer": "copy", "rack": "r1", "num_partitions": 6,
        "default_replication_factor": 1, "metadata_url": "postgresql://x/y", "cluster_id": "c1",
        "security_protocol": "PLAINTEXT"}
    groups = settings_from_table({"offsets": {"topic": {"num": {"partitions": 3}}, "retention": {"minutes": 1.5}},
                                  "group.initial.rebalance.delay.ms": 0})
    assert {field: value for field, (_, value) in groups.items()} == {
        "offsets_topic_partitions": 3, "offsets_retention_minutes": 1.5, "group_initial_rebalance_delay_ms": 0}


@pytest.mark.parametrize(("table", "message"), [
    ({"foo": 1}, "unknown setting 'foo'"),
    ({"log": {"dirz": "/x"}}, "unknown setting 'log.dirz'"),
    ({"node.id": "three"}, "node.id: expected an integer, got 'three'"),
    ({"node.id": True}, "node.id: expected an integer, got True"),
    ({"auto.create.topics.enable": "yes"}, "auto.create.topics.enable: expected true or false, got 'yes'"),
    ({"listeners": "TLS://h:1"}, "protocol must be one of PLAINTEXT, SASL_PLAINTEXT, SSL, SASL_SSL"),
    ({"ssl.certificate": ""}, "ssl.certificate: must not be empty"),
    ({"ssl.key": 3}, "ssl.key: expected a string, got 3"),
    ({"listeners": "PLAINTEXT://a:1,PLAINTEXT://b:2"}, "only one listener is supported"),
    ({"log.dirs": "/a,/b"}, "only one log directory is supported"),
    ({"listen": "a:1", "listeners": "PLAINTEXT://a:1"}, "both set the same thing"),
    ({"broker.rack": 5}, "broker.rack: expected a string, got 5"),
    ({"offsets.retention.minutes": "soon"}, "offsets.retention.minutes: expected a number, got 'soon'"),
    ({"group.max.size": 1.5}, "group.max.size: expected an integer, got 1.5"),
    ({"replica.lag.time.max.ms": "fast"}, "replica.lag.time.max.ms: expected an integer, got 'fast'"),
    ({"broker.session.timeout.ms": 2.5}, "broker.session.timeout.ms: expected an integer, got 2.5"),
    ({"quota.window.size.seconds": "long"}, "quota.window.size.seconds: expected a number, got 'long'"),
    ({"max.connections.per.principal": "many"}, "max.connections.per.principal: expected an integer"),
    ({"sasl.server.max.receive.size": "512k"}, "sasl.server.max.receive.size: expected an integer"),
    ({"sasl.server.authn.timeout.ms": 1.5}, "sasl.server.authn.timeout.ms: expected an integer, got 1.5"),
])
def test_file_mistakes_name_the_setting(table: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        settings_from_table(table)


@pytest.mark.parametrize(("change", "message"), [
    ({"fetch_transfer": "mmap"}, "fetch.transfer must be one of sendfile, copy, not 'mmap'"),
    ({"num_partitions": 0}, "num.partitions must be at least 1, not 0"),
    ({"node_id": -1}, "node.id must be at least 0"),
    ({"port": 70000}, "listeners port must be between 0 and 65535"),
    ({"max_request_bytes": 2**31}, "socket.request.max.bytes must be at most"),
    ({"offsets_topic_partitions": 0}, "offsets.topic.num.partitions must be at least 1, not 0"),
    ({"offsets_retention_minutes": 0}, "offsets.retention.minutes must be positive"),
    ({"group_min_session_timeout_ms": 10, "group_max_session_timeout_ms": 5},
     "group.max.session.timeout.ms must be at least 10, not 5"),
    ({"group_initial_rebalance_delay_ms": -1}, "group.initial.rebalance.delay.ms must be at least 0"),
    ({"quota_window_num": 1}, "quota.window.num must be at least 2, not 1"),
    ({"quota_window_size_seconds": 0}, "quota.window.size.seconds must be between 0.01 and 3600, not 0"),
    ({"max_connections_per_principal": -1}, "max.connections.per.principal must be at least 0, not -1"),
    ({"sasl_server_max_receive_size": 0}, "sasl.server.max.receive.size must be at least 1, not 0"),
    ({"sasl_server_max_receive_size": 2**31}, "sasl.server.max.receive.size must be at most"),
    ({"max_unauthenticated_connections": 0}, "max.unauthenticated.connections must be at least 1, not 0"),
    ({"sasl_server_authn_timeout_ms": 0}, "sasl.server.authn.timeout.ms must be at least 1, not 0"),
    ({"max_connections_per_ip": -1}, "max.connections.per.ip must be at least 0, not -1"),
    ({"security_protocol": "SSL"}, "the SSL listener needs ssl.certificate"),
    ({"security_protocol": "SSL", "ssl_certificate": Path("/nonexistent.pem"), "ssl_key": Path("/nope")},
     "ssl.certificate: cannot read '/nonexistent.pem': no such file"),
    ({"security_protocol": "SSL", "ssl_certificate": Path("/"), "ssl_key": Path("/")},
     "ssl.certificate: cannot read '/': not a readable file"),
    ({"ssl_client_auth": "always"}, "ssl.client.auth must be one of none, requested, required"),
    ({"ssl_client_auth": "required"}, "ssl.client.auth needs ssl.ca"),
])
def test_broker_config_validates_itself(change: dict[str, object], message: str) -> None:
    base: dict[str, object] = {"node_id": 1, "host": "h", "port": 1, "data_dir": Path("d"), "metadata_url": ""}
    with pytest.raises(ConfigError, match=message):
        BrokerConfig(**{**base, **change})  # type: ignore[arg-type]


def test_flags_override_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://env/db")
    config_file = tmp_path / "broker.toml"
    config_file.write_text('node.id = 4\nlog.dirs = "/from-file"\nnum.partitions = 3\nlisten = "0.0.0.0:9000"\n')
    args = build_parser().parse_args(["broker", "--config", str(config_file), "--num-partitions", "5",
                                      "--listen", "127.0.0.1:9001"])
    config = broker_config(args)
    assert (config.node_id, config.data_dir, config.num_partitions, config.host, config.port) == (
        4, Path("/from-file"), 5, "127.0.0.1", 9001)
    assert config.metadata_url == "postgresql://env/db"
    assert config.auto_create_topics is False and config.metrics_listen is None
    dev = broker_config(build_parser().parse_args(["broker", "--config", str(config_file), "--dev"]))
    assert dev.auto_create_topics is True and dev.metrics_listen == ("127.0.0.1", 9644)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sluice", "broker", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize(("content", "flags", "line"), [
    ("foo = 1\n", [], "unknown setting 'foo'"),
    ('node.id = 1\nlog.dirs = "/x"\nfetch.transfer = "mmap"\n', [],
     "fetch.transfer must be one of sendfile, copy, not 'mmap'"),
    ("node.id = [\n", [], "not valid TOML"),
    ('log.dirs = "/x"\n', [], "--node-id is required (or node.id in --config)"),
    ("node.id = 1\n", [], "--data-dir is required (or log.dirs in --config)"),
    ('node.id = 1\nlog.dirs = "/x"\n', ["--num-partitions", "0"], "num.partitions must be at least 1, not 0"),
    ('node.id = 1\nlog.dirs = "/x"\ngroup.max.size = 0\n', [], "group.max.size must be at least 1, not 0"),
    ('node.id = 1\nlog.dirs = "/x"\n', ["--group-initial-rebalance-delay-ms", "-5"],
     "group.initial.rebalance.delay.ms must be at least 0, not -5"),
    ('node.id = 1\nlog.dirs = "/x"\nreplica.lag.time.max.ms = 0\n', [],
     "replica.lag.time.max.ms must be at least 1, not 0"),
    ('node.id = 1\nlog.dirs = "/x"\n', ["--broker-session-timeout-ms", "50"],
     "broker.session.timeout.ms must be between 100 and 3600000, not 50"),
    ('node.id = 1\nlog.dirs = "/x"\n', ["--follower-replication-throttled-rate", "-1"],
     "follower.replication.throttled.rate must be at least 0, not -1"),
])
def test_cli_exits_2_with_one_line(tmp_path: Path, content: str, flags: list[str], line: str) -> None:
    config_file = tmp_path / "broker.toml"
    config_file.write_text(content)
    result = run_cli("--config", str(config_file), *flags)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and line in result.stderr
    assert result.stderr.startswith("sluice: ")
    if "--" not in line and not flags:
        assert result.stderr.startswith(f"sluice: {config_file}: ")


class ConfiguredBroker(BrokerProcess):
    def command(self) -> list[str]:
        return [sys.executable, "-m", "sluice", "broker", "--config", str(self.data_dir.parent / "broker.toml")]


def test_a_broker_runs_from_the_file_alone(tmp_path: Path) -> None:
    port, metrics_port = free_port(), free_port()
    (tmp_path / "broker.toml").write_text(
        f'node.id = 7\nlisteners = "PLAINTEXT://127.0.0.1:{port}"\nlog.dirs = "{tmp_path / "data"}"\n'
        f'cluster.id = "cfg-{port}"\n[metrics]\nlisten = "127.0.0.1:{metrics_port}"\n')
    broker = ConfiguredBroker(tmp_path / "data", f"cfg-{port}", port=port, metrics_port=metrics_port)
    broker.start()
    try:
        assert "sluice broker 7 listening on" in broker.output()
        assert ("sluice_connections_open", ()) in scrape(metrics_port)
    finally:
        assert broker.stop() == 0


def test_remote_storage_settings_from_the_environment_flags_and_file(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent passes SLUICE_REMOTE_STORAGE_*: they beat the file, flags beat them."""
    config_file = tmp_path / "broker.toml"
    config_file.write_text('node.id = 1\nlog.dirs = "/d"\nremote.storage.bucket = "from-file"\n'
                           'remote.storage.prefix = "file-prefix"\n')
    monkeypatch.setenv("DATABASE_URL", "postgresql://env/db")
    monkeypatch.setenv("SLUICE_REMOTE_STORAGE_ENDPOINT", "http://127.0.0.1:9000")
    monkeypatch.setenv("SLUICE_REMOTE_STORAGE_BUCKET", "from-env")
    monkeypatch.setenv("SLUICE_REMOTE_STORAGE_SECRET_KEY", "s3cret")
    config = broker_config(build_parser().parse_args(["broker", "--config", str(config_file),
                                                      "--remote-storage-prefix", "flag-prefix"]))
    assert (config.remote_storage_endpoint, config.remote_storage_bucket, config.remote_storage_prefix) == (
        "http://127.0.0.1:9000", "from-env", "flag-prefix")
    assert config.remote_storage and config.remote_storage_secret_key == "s3cret"
