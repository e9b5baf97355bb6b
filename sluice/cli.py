"""``sluice``: the one command line for running and operating Sluice."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from sluice import runtime
from sluice.embedded import private_dir

if TYPE_CHECKING:
    from dataplane.server.config import BrokerConfig
    from sluice.objectstore import ObjectStoreServer
    from sluice.output import Console
    from sluice.supervisor import Supervisor

DEV_METRICS_LISTEN = ("127.0.0.1", 9644)
T = TypeVar("T")


def _wait_for_port(host: str, port: int, timeout: float, stopping: Callable[[], bool] = lambda: False) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not stopping():
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.1)
    return False


def _hold_lock(var: Path) -> int:
    """One `sluice up` per var/ directory (made 0700: it holds every secret of the service). flock dies with the
    process: never stale."""
    private_dir(var)
    fd = os.open(var / "sluice-up.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise SystemExit(f"sluice: another `sluice up` is already running on {var}") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def _check_listen(host: str, port: int) -> None:
    """Fail fast with one clear line instead of a web child that crash-loops."""
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        raise SystemExit(f"sluice: cannot listen on {host}:{port}: {exc.strerror}") from None


def _wait_for_cluster(ready: Any, cluster_id: Any, supervisor: Any, timeout: float) -> str | None:
    """Poll the demo cluster's status (written by the worker's reconcile) until Ready, or give up."""
    from django.db import connections

    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and not supervisor.stopping():
            bootstrap = ready(cluster_id)
            if bootstrap:
                return str(bootstrap)
            time.sleep(0.25)
        return None
    finally:
        connections.close_all()


def _own_logging(path: Path, verbose: bool, console: Console) -> None:
    """This process's log records: all of them into ``path``; on the terminal only errors (all with --verbose).
    Called again after ``django.setup()``, whose LOGGING replaces the root logger's handlers."""
    level = os.environ.get("LOG_LEVEL", "INFO")
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    to_file = logging.FileHandler(path)
    to_file.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    from sluice.output import ConsoleHandler

    to_terminal = ConsoleHandler(console)
    to_terminal.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s" if verbose
                                               else f"sluice: %(levelname)s %(message)s  (full log: {path})"))
    to_terminal.setLevel(level if verbose else logging.ERROR)
    root.addHandler(to_file)
    root.addHandler(to_terminal)
    root.setLevel(level)
    logging.captureWarnings(True)  # a library's warnings (platformdirs', say) are log records like the rest


def _child_log_level() -> str:
    """The children's logs are kept in full (INFO; DEBUG when asked): the terminal no longer shows them."""
    return "DEBUG" if os.environ.get("LOG_LEVEL", "").upper() == "DEBUG" else "INFO"


def _link_log(logs: Path, name: str, target: Path) -> None:
    """``var/log/<name>`` for a log a server writes elsewhere itself (Postgres runs as another user as root)."""
    link = logs / name
    with contextlib.suppress(FileNotFoundError):
        link.unlink()
    link.symlink_to(os.path.relpath(target, logs))


def _ensure_object_store(var: Path, logs: Path, console: Console) -> ObjectStoreServer | None:
    """Tiered storage's object store: the embedded one under var/objectstore unless the environment names one
    (SLUICE_REMOTE_STORAGE_ENDPOINT); its settings are exported for the control plane and the agent."""
    if os.environ.get("SLUICE_REMOTE_STORAGE_ENDPOINT"):
        return None
    from sluice.objectstore import ObjectStoreError, ObjectStoreServer

    server = ObjectStoreServer(var / "objectstore")
    try:
        with console.step("starting the object store"):
            server.start()
    except ObjectStoreError as exc:
        _fail(str(exc))
    _link_log(logs, "objectstore.log", server.log_path)
    os.environ.update(server.environment())
    return server


def cmd_up(args: argparse.Namespace) -> int:
    from sluice.clusterwatch import ClusterWatch
    from sluice.output import Console
    from sluice.supervisor import CELERY, Child, Supervisor

    low, high = args.broker_ports
    if low <= args.port <= high:
        _fail(f"--port {args.port} is inside --broker-ports {low}-{high}")
    _check_listen(args.host, args.port)
    var = runtime.var_dir()
    lock_fd = _hold_lock(var)
    logs = private_dir(var / "log")
    console = Console()
    _own_logging(logs / "sluice.log", args.verbose, console)
    console.line(f"sluice: data under {var}, logs in {logs}")
    services = runtime.ensure_environment(step=console.step)
    if services is not None:
        if services.postgres is not None:
            _link_log(logs, "postgres.log", services.postgres.log_path)
        if services.redis is not None:
            _link_log(logs, "redis.log", services.redis.log_path)
    object_store = _ensure_object_store(var, logs, console)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

    import django
    from django.core.management import call_command

    django.setup()
    _own_logging(logs / "sluice.log", args.verbose, console)
    with console.step("migrating the database"):
        call_command("migrate", interactive=False, verbosity=0)
    from controlplane.tenancy.bootstrap import demo_bootstrap

    demo = demo_bootstrap(var)
    from controlplane.agent.processes import STOP_TIMEOUT as BROKER_STOP_TIMEOUT
    from controlplane.resources.bootstrap import demo_cluster

    demo_row = demo_cluster(demo.tenant_slug)
    demo_cluster_id, demo_kafka_id = demo_row.pk, demo_row.kafka_cluster_id
    from django.db import connections

    connections.close_all()

    python = sys.executable
    env = {**os.environ, "LOG_LEVEL": _child_log_level(), "PYTHONUNBUFFERED": "1"}
    level = env["LOG_LEVEL"]

    def child(name: str, argv: list[str], ready: str, **kwargs: Any) -> Child:
        return Child(name, argv, kwargs.pop("env", env), log_path=logs / f"{name}.log", ready_marker=ready, **kwargs)

    supervisor = Supervisor([
        child("web", [python, "-m", "uvicorn", "controlplane.asgi:application", "--host", args.host,
                      "--port", str(args.port), "--no-access-log" if args.quiet else "--access-log"],
              "Application startup complete", env={"DB_POOL_SIZE": "10", **env}),
        child("worker", [python, "-m", "celery", "-A", "controlplane.celery_app", "worker", "--loglevel", level,
                         "--concurrency", str(args.workers), "--hostname", f"worker-{os.getpid()}@%h"], "ready.",
              stop_signals=CELERY),
        # Spark reports on their own queue: one process, one Spark session (a JVM) shared by its threads.
        child("reports-worker", [python, "-m", "celery", "-A", "controlplane.celery_app", "worker", "--loglevel",
                                 level, "--pool", "threads", "--concurrency", "2", "--queues",
                                 os.environ.get("SLUICE_REPORTS_QUEUE", "reports"), "--hostname",
                                 f"reports-{os.getpid()}@%h"], "ready.", stop_signals=CELERY),
        # Beat's SIGTERM shutdown saves its schedule to the database, which died with the supervisor if the
        # supervisor was SIGKILLed: it would wait forever, an orphan. It keeps no state worth that wait.
        child("beat", [python, "-m", "celery", "-A", "controlplane.celery_app", "beat", "--loglevel", level,
                       "--pidfile=", "--scheduler", "django_celery_beat.schedulers:DatabaseScheduler"],
              "beat: Starting", parent_death_signal=signal.SIGKILL),
        # This machine as the one dataplane host; stopping the service stops its brokers.
        # It stops them itself (SIGTERM, then SIGKILL after STOP_TIMEOUT): it gets longer than that to do it, or
        # a broker slow to stop would outlive an agent killed halfway through stopping it.
        child("agent", [python, "-m", "sluice", "agent", "--host", args.agent_host, "--ports",
                        f"{low}-{high}", "--stop-brokers-on-exit"], "ready.",
              stop_signals=((signal.SIGTERM, BROKER_STOP_TIMEOUT + 15),)),
    ], console=console, verbose=args.verbose)
    watch = ClusterWatch(console.line)
    supervisor.install_signal_handlers()
    try:
        watch.start()
        supervisor.start()
        if not supervisor.stopping():
            _banner(args, var, logs, demo, demo_cluster_id, demo_kafka_id, supervisor, console)
        code = supervisor.run()
    finally:
        # Stop order: what reports to the database and queues first, then the data services they use.
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the stop short
        watch.stop()
        supervisor.stop()
        _stop_leftover_brokers(args.agent_host, console)
        if object_store is not None:
            with console.step("stopping the object store"):
                object_store.stop()
        if services is not None:
            if services.redis is not None:
                with console.step("stopping redis"):
                    services.redis.stop()
            if services.postgres is not None:
                with console.step("stopping postgres"):
                    services.postgres.stop()
        os.close(lock_fd)
    console.line("sluice: stopped")
    return code


def _banner(args: argparse.Namespace, var: Path, logs: Path, demo: Any, demo_cluster_id: Any, demo_kafka_id: str,
            supervisor: Supervisor, console: Console) -> None:
    """Wait for the web port and the demo cluster, then print where everything is."""
    from controlplane.resources.bootstrap import (
        demo_client_config,
        demo_shell_env,
        ready_bootstrap,
        write_demo_client_config,
        write_demo_env,
    )

    base = f"http://{args.host}:{args.port}"
    if not _wait_for_port(args.host, args.port, 30, supervisor.stopping):
        return
    bootstrap = _wait_for_cluster(ready_bootstrap, demo_cluster_id, supervisor, timeout=120)
    kafka_lines = ["  Kafka       the demo cluster is not Ready yet: see its status in the API"]
    if bootstrap:
        client = demo_client_config(bootstrap, demo.key_id, demo.secret)
        properties = var / "demo-client.properties"
        write_demo_client_config(properties, client)
        write_demo_env(var / "demo.env", demo_shell_env(
            url=base, bootstrap=bootstrap, key_id=demo.key_id, secret=demo.secret,
            tenant_slug=demo.tenant_slug, kafka_cluster_id=demo_kafka_id, cluster_id=demo_cluster_id,
            client_config=properties))
        kafka_lines = [
            f"  Kafka       {bootstrap}   (demo cluster, topic 'demo'; {client['security.protocol']}, "
            "API key = user/password)",
            f"  Client config (also in {properties}; local development only):",
            *(f"      {k}={v}" for k, v in client.items()),
            f"  Try Kafka   kcat -F {properties} -t demo -P   (then: -C to consume)",
            f"  Shell       . {var / 'demo.env'}   (SLUICE_URL, SLUICE_API_KEY, SLUICE_BOOTSTRAP, …: the "
            "README's tour)",
        ]
    console.line("\n".join([
        "",
        "Sluice is up.",
        f"  Console     {base}/   (sign in as '{demo.username}', password '{demo.password}')" if _console_built()
        else "  Console     not built: `make console` (Node 20+), then reload",
        f"  API         {base}/api/v1/",
        f"  API docs    {base}/api/docs/",
        f"  Health      {base}/healthz",
        f"  Admin       {base}/admin/   (user '{demo.username}', password '{demo.password}')",
        f"  Demo tenant '{demo.tenant_slug}', API key {demo.key_id} (credentials in {demo.credentials_path})",
        *kafka_lines,
        f"  REST Proxy  {base}/kafka/v3/clusters/{demo_kafka_id}   (Confluent's v3; v2 under /kafka/v2/)",
        f"  Live tail   ws://{args.host}:{args.port}/ws/clusters/{demo_kafka_id}/topics/demo/tail",
        f"  Try         curl -H 'Authorization: Bearer {demo.key_id}:{demo.secret}' "
        f"{base}/api/v1/tenants/{demo.tenant_slug}/clusters",
        f"  Logs        {logs}/: web, worker, reports-worker, beat, agent, postgres, redis, objectstore, sluice (this "
        "command);"
        f" brokers in {var}/clusters/<cluster>/<node>/broker.log"
        + ("" if args.verbose else "  (sluice up --verbose: everything here too)"),
        "Press Ctrl-C to stop.",
        "",
    ]))


def _stop_leftover_brokers(host: str, console: Console) -> None:
    """Brokers still running after the agent exited, stopped as the agent would (SIGTERM, then SIGKILL).

    The agent stops its brokers as it exits, but they are detached (an agent restart adopts them): one it could
    not stop -- killed halfway through, or started by it as it was told to stop -- would outlive `sluice up`.
    They are found as the next agent would find them: each node's pid file and the command line behind it."""
    from controlplane.agent.processes import BrokerProcesses

    leftovers = BrokerProcesses(runtime.var_dir() / "clusters", host)
    leftovers.adopt()
    if any(state.pid is not None for state in leftovers.states().values()):
        with console.step("stopping brokers the agent left"):
            leftovers.stop_all()


def _env_default(parse: Callable[[str], T], var: str) -> Callable[[str], T]:
    """``parse`` for an option whose default comes from ``$var``: a bad value there is blamed on the variable."""
    def parse_from(text: str) -> T:
        try:
            return parse(text)
        except argparse.ArgumentTypeError as exc:
            if os.environ.get(var) == text:
                raise argparse.ArgumentTypeError(f"{exc} (from ${var})") from None
            raise
    parse_from.__name__ = parse.__name__  # argparse names the type in some messages
    return parse_from


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"expected a port between 1 and 65535, got {text!r}")
    return port


def _port_pool(text: str) -> tuple[int, int]:
    low, sep, high = text.partition("-")
    try:
        first, last = int(low), int(high if sep else low)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected FIRST-LAST ports, got {text!r}") from None
    if not 0 < first <= last < 65536:
        raise argparse.ArgumentTypeError(f"expected 1 <= FIRST <= LAST <= 65535, got {text!r}")
    return first, last


def _console_built() -> bool:
    """Whether the web console's build is there to serve (``make run`` builds it; a bare ``sluice up`` does not)."""
    from django.conf import settings

    return (Path(settings.CONSOLE_DIR) / "index.html").is_file()


def cmd_agent(args: argparse.Namespace) -> int:
    """One dataplane host's agent: runs the brokers the control plane places here."""
    if not (os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL")):
        _fail("agent: set DATABASE_URL and REDIS_URL to the control plane's Postgres and Redis")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    import django

    django.setup()
    from controlplane.agent.runtime import AgentOptions
    from controlplane.clusters.agents import run_agent

    listen = args.listen_host
    advertised = args.advertise_host or (socket.gethostname() if listen in ("0.0.0.0", "::") else listen)
    return run_agent(AgentOptions(host=args.host, rack=args.rack, listen_host=listen, advertised_host=advertised,
                                  port_min=args.ports[0], port_max=args.ports[1],
                                  root=Path(args.root) if args.root else runtime.var_dir() / "clusters",
                                  concurrency=args.concurrency, stop_brokers_on_exit=args.stop_brokers_on_exit))


def cmd_manage(args: argparse.Namespace) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    runtime.ensure_environment()
    from django.core.management import execute_from_command_line

    execute_from_command_line(["sluice manage", *args.rest])
    return 0


def _host_port(text: str) -> tuple[str, int]:
    from dataplane.server.config import parse_host_port

    try:
        return parse_host_port(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _listener(text: str) -> tuple[str | None, str, int]:
    """(security protocol if named, host, port): a bare HOST:PORT keeps the config file's protocol."""
    from dataplane.server.config import parse_listener

    try:
        protocol, host, port = parse_listener(text)
        return (protocol if "://" in text else None), host, port
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _optional_host_port(text: str) -> tuple[str, int] | None:
    return None if text in ("", "off") else _host_port(text)


def _fail(message: str) -> NoReturn:
    """Configuration mistakes: one readable line and status 2, like argparse's own usage errors."""
    print(f"sluice: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


# Group coordinator flags: BrokerConfig field -> (type, Kafka's setting name).
GROUP_FLAGS: dict[str, tuple[type, str]] = {
    "offsets_topic_partitions": (int, "offsets.topic.num.partitions (default 50)"),
    "offsets_topic_replication_factor": (int, "offsets.topic.replication.factor (default 3, capped at live brokers)"),
    "offsets_retention_minutes": (float, "offsets.retention.minutes (default 10080)"),
    "offsets_retention_check_interval_ms": (int, "offsets.retention.check.interval.ms (default 600000)"),
    "offset_metadata_max_bytes": (int, "offset.metadata.max.bytes (default 4096)"),
    "group_min_session_timeout_ms": (int, "group.min.session.timeout.ms (default 6000)"),
    "group_max_session_timeout_ms": (int, "group.max.session.timeout.ms (default 1800000)"),
    "group_initial_rebalance_delay_ms": (int, "group.initial.rebalance.delay.ms (default 3000)"),
    "group_max_size": (int, "group.max.size (default unlimited)"),
    "transaction_state_partitions": (int, "transaction.state.log.num.partitions (default 50)"),
    "transaction_state_replication_factor": (int, "transaction.state.log.replication.factor (default 3, capped at "
                                                  "live brokers)"),
    "transaction_max_timeout_ms": (int, "transaction.max.timeout.ms (default 900000)"),
    "transaction_abort_timed_out_interval_ms": (int, "transaction.abort.timed.out.transaction.cleanup.interval.ms "
                                                     "(default 10000)"),
    "transactional_id_expiration_ms": (int, "transactional.id.expiration.ms: an id with no transaction open, idle "
                                            "this long, is forgotten (default 604800000, 7 days)"),
}


# Cluster and replication flags, the same way.
CLUSTER_FLAGS: dict[str, tuple[type, str]] = {
    "replica_lag_time_max_ms": (int, "replica.lag.time.max.ms (default 30000)"),
    "replica_fetch_wait_max_ms": (int, "replica.fetch.wait.max.ms (default 500)"),
    "offsets_commit_timeout_ms": (int, "offsets.commit.timeout.ms (default 5000)"),
    "follower_replication_throttled_rate": (int, "follower.replication.throttled.rate: bytes/s for a "
                                                 "reassignment's new replicas (default 0, unlimited)"),
    "quota_window_num": (int, "quota.window.num: samples client quota rates are measured over (default 11)"),
    "quota_window_size_seconds": (float, "quota.window.size.seconds: the length of one sample (default 1)"),
    "max_connections_per_principal": (int, "max.connections.per.principal: open connections one principal may "
                                           "hold (default 0, unlimited; the max_connections quota overrides)"),
    "remote_log_manager_interval_ms": (int, "remote.log.manager.task.interval.ms: how often tiered partitions "
                                            "upload and apply remote retention (default 30000)"),
    "remote_log_reader_read_ahead_bytes": (int, "remote.log.reader.read.ahead.bytes: fetched ahead of a "
                                                "consumer reading the remote tier (default 4194304)"),
}

# The remote tier: flags, else these variables (what the agent passes), else the config file.
REMOTE_STORAGE_FLAGS: dict[str, str] = {
    "remote_storage_endpoint": "ENDPOINT", "remote_storage_bucket": "BUCKET", "remote_storage_prefix": "PREFIX",
    "remote_storage_region": "REGION", "remote_storage_access_key": "ACCESS_KEY",
    "remote_storage_secret_key": "SECRET_KEY",
}
REMOTE_STORAGE_ENV = "SLUICE_REMOTE_STORAGE_"


def _flag_fields(args: argparse.Namespace) -> dict[str, Any]:
    """BrokerConfig fields given on the command line (flags default to None so the file can set them)."""
    fields: dict[str, Any] = {}
    if args.listen is not None:
        protocol, fields["host"], fields["port"] = args.listen
        if protocol is not None:
            fields["security_protocol"] = protocol
    if args.advertise is not None:
        fields["advertised_host"], fields["advertised_port"] = args.advertise
    if args.data_dir is not None:
        fields["data_dir"] = Path(args.data_dir)
    if args.metrics_listen is not None:
        try:
            fields["metrics_listen"] = _optional_host_port(args.metrics_listen)
        except argparse.ArgumentTypeError as exc:
            _fail(f"--metrics-listen: {exc}")
    for flag, field in (("node_id", "node_id"), ("metadata_url", "metadata_url"), ("cluster_id", "cluster_id"),
                        ("num_partitions", "num_partitions"), ("auto_create_topics", "auto_create_topics"),
                        ("default_replication_factor", "default_replication_factor"), ("rack", "rack"),
                        ("fetch_transfer", "fetch_transfer"), ("socket_request_max_bytes", "max_request_bytes"),
                        *((name, name) for name in (*GROUP_FLAGS, *CLUSTER_FLAGS))):
        if getattr(args, flag) is not None:
            fields[field] = getattr(args, flag)
    if args.broker_session_timeout_ms is not None:
        fields["lease_seconds"] = args.broker_session_timeout_ms / 1000
    for flag in REMOTE_STORAGE_FLAGS:
        if getattr(args, flag) is not None:
            fields[flag] = getattr(args, flag)
    return fields


def _remote_storage_env() -> dict[str, Any]:
    """``SLUICE_REMOTE_STORAGE_*`` (set by the agent for managed clusters): defaults below flags, above the file."""
    found: dict[str, Any] = {}
    for field, suffix in REMOTE_STORAGE_FLAGS.items():
        value = os.environ.get(REMOTE_STORAGE_ENV + suffix)
        if value:
            found[field] = value
    return found


def broker_config(args: argparse.Namespace) -> BrokerConfig:
    """Defaults < config file < flags; --dev fills in what a laptop needs. The metadata URL may be ''."""
    from dataplane.server.config import BrokerConfig, ConfigError, settings_from_file

    placeholders: dict[str, Any] = {"node_id": 0, "host": "127.0.0.1", "port": 9092, "data_dir": Path("."),
                                    "metadata_url": ""}
    from_file: dict[str, Any] = {}
    if args.config is not None:
        try:
            from_file = {field: value for field, (_, value) in settings_from_file(Path(args.config)).items()}
            BrokerConfig(**{**placeholders, **_remote_storage_env(), **from_file})  # a bad value is blamed on the file
        except ConfigError as exc:
            _fail(f"{args.config}: {exc}")
    fields: dict[str, Any] = {"host": "127.0.0.1", "port": 9092, **from_file, **_remote_storage_env(),
                              **_flag_fields(args)}
    for required, flag, setting in (("node_id", "--node-id", "node.id"), ("data_dir", "--data-dir", "log.dirs")):
        if required not in fields:
            _fail(f"broker: {flag} is required (or {setting} in --config)")
    fields.setdefault("metadata_url", os.environ.get("DATABASE_URL", ""))
    fields.setdefault("auto_create_topics", bool(args.dev))
    if args.dev:
        fields.setdefault("metrics_listen", DEV_METRICS_LISTEN)
    try:
        return BrokerConfig(**fields)
    except ConfigError as exc:
        _fail(str(exc))


def cmd_broker(args: argparse.Namespace) -> int:
    from dataplane.server.app import main as broker_main

    config = broker_config(args)
    postgres = None
    if not config.metadata_url:
        if not args.dev:
            _fail("no metadata database: pass --metadata-url, set metadata.url or DATABASE_URL, or use --dev")
        from sluice.embedded import EmbeddedPostgres

        postgres = EmbeddedPostgres(runtime.var_dir() / "postgres")
        config = dataclasses.replace(config, metadata_url=postgres.start())
    try:
        return broker_main(config)
    finally:
        if postgres is not None:
            postgres.stop()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sluice", description="Sluice event streaming.")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="run the control plane: web, worker and beat (embedded Postgres/Redis "
                                   "unless DATABASE_URL/REDIS_URL are set)",
                        description="Run Sluice on this machine: embedded Postgres and Redis (unless DATABASE_URL/"
                                    "REDIS_URL are set), the web app, Celery workers and beat, and this machine's "
                                    "agent with a demo cluster. The terminal shows progress, the banner, errors "
                                    "and cluster state changes; every process logs in full under var/log/.")
    up.add_argument("--host", default=os.environ.get("SLUICE_HOST", "127.0.0.1"),
                    help="the address the web app (console, API, REST Proxy) listens on (default: $SLUICE_HOST or "
                         "127.0.0.1)")
    up.add_argument("--port", type=_env_default(_port, "SLUICE_PORT"), default=os.environ.get("SLUICE_PORT", "8000"),
                    help="the web app's port (default: $SLUICE_PORT or 8000)")
    up.add_argument("--broker-ports", type=_env_default(_port_pool, "SLUICE_BROKER_PORTS"),
                    default=os.environ.get("SLUICE_BROKER_PORTS", "19092-19191"),
                    metavar="FIRST-LAST", help="the ports this machine's Kafka brokers may listen on, the demo "
                                               "cluster's included (default: $SLUICE_BROKER_PORTS or 19092-19191)")
    up.add_argument("--workers", type=int, default=2, help="Celery worker concurrency")
    up.add_argument("--quiet", action="store_true", help="no HTTP access log (in var/log/web.log)")
    up.add_argument("-v", "--verbose", action="store_true",
                    help="every process's full log on the terminal too (still kept in var/log/)")
    up.add_argument("--agent-host", default=os.environ.get("SLUICE_AGENT_HOST", "local"),
                    help="this machine's name as a dataplane host (default 'local')")
    up.set_defaults(func=cmd_up)
    broker = sub.add_parser("broker", help="run a Kafka-protocol broker")
    broker.add_argument("--config", default=None, metavar="FILE",
                        help="TOML file of settings with Kafka's names (node.id, log.dirs, ...); flags override it")
    broker.add_argument("--node-id", type=int, default=None, help="node.id (required here or in --config)")
    broker.add_argument("--listen", type=_listener, default=None,
                        help="[PLAINTEXT|SASL_PLAINTEXT|SSL|SASL_SSL://]HOST:PORT (default PLAINTEXT://127.0.0.1:9092)")
    broker.add_argument("--advertise", type=_host_port, default=None, help="HOST:PORT clients should use")
    broker.add_argument("--data-dir", default=None, help="log.dirs (required here or in --config)")
    broker.add_argument("--metadata-url", default=None, help="Postgres URL (default: DATABASE_URL)")
    broker.add_argument("--cluster-id", default=None, help="cluster.id (default sluice-dev)")
    broker.add_argument("--num-partitions", type=int, default=None, help="partitions of auto-created topics")
    broker.add_argument("--default-replication-factor", type=int, default=None)
    broker.add_argument("--auto-create-topics", action=argparse.BooleanOptionalAction, default=None,
                        help="auto.create.topics.enable (default: on with --dev, else off)")
    broker.add_argument("--socket-request-max-bytes", type=int, default=None, help="largest request accepted")
    broker.add_argument("--rack", default=None, help="broker.rack")
    broker.add_argument("--metrics-listen", default=None, metavar="HOST:PORT",
                        help=f"serve Prometheus /metrics here ('off' to disable; {DEV_METRICS_LISTEN[0]}:"
                             f"{DEV_METRICS_LISTEN[1]} with --dev)")
    broker.add_argument("--fetch-transfer", choices=("sendfile", "copy"), default=None,
                        help="how Fetch sends record data")
    for name, (kind, setting) in (*GROUP_FLAGS.items(), *CLUSTER_FLAGS.items()):
        broker.add_argument(f"--{name.replace('_', '-')}", type=kind, default=None, help=setting)
    for name, suffix in REMOTE_STORAGE_FLAGS.items():
        broker.add_argument(f"--{name.replace('_', '-')}", default=None,
                            help=f"{name.replace('_', '.')} (default: ${REMOTE_STORAGE_ENV}{suffix})")
    broker.add_argument("--broker-session-timeout-ms", type=int, default=None,
                        help="broker.session.timeout.ms: the registration lease (default 10000)")
    broker.add_argument("--dev", action="store_true",
                        help="embedded Postgres under var/ when no metadata URL is given; auto-create topics; "
                             "metrics on")
    broker.set_defaults(func=cmd_broker)
    agent = sub.add_parser("agent", help="run a dataplane host's agent: starts and supervises the brokers the "
                                         "control plane places on this host (a Celery worker on agent.<host>)")
    agent.add_argument("--host", default=os.environ.get("SLUICE_AGENT_HOST", socket.gethostname()),
                       help="this host's name (its queue is agent.<host>; default: the machine's host name)")
    agent.add_argument("--rack", default=os.environ.get("SLUICE_AGENT_RACK", ""), help="broker.rack of its brokers")
    agent.add_argument("--ports", type=_port_pool, default=os.environ.get("SLUICE_BROKER_PORTS", "19092-19191"),
                       metavar="FIRST-LAST", help="the port pool brokers listen on (default 19092-19191)")
    agent.add_argument("--listen-host", default=os.environ.get("SLUICE_AGENT_LISTEN_HOST", "127.0.0.1"),
                       help="the address brokers bind (default 127.0.0.1)")
    agent.add_argument("--advertise-host", default=os.environ.get("SLUICE_AGENT_ADVERTISE_HOST", ""),
                       help="the address Kafka clients use (default: the listen host, or the host name for 0.0.0.0)")
    agent.add_argument("--root", default=None, help="where broker directories live (default var/clusters)")
    agent.add_argument("--concurrency", type=int, default=4, help="task threads")
    agent.add_argument("--stop-brokers-on-exit", action="store_true",
                       help="stop this host's brokers when the agent stops (else a restarted agent adopts them)")
    agent.set_defaults(func=cmd_agent)
    manage = sub.add_parser("manage", help="Django management commands (migrate, createsuperuser, ...)")
    manage.add_argument("rest", nargs=argparse.REMAINDER)
    manage.set_defaults(func=cmd_manage)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "INFO"),
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
