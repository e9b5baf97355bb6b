# One command to run the service, one to run every test (see README.md).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run objectstore console console-test chromium kcat test chaos lint typecheck schema bench bench-broker bench-groups bench-cluster bench-transactions bench-metadata bench-managed bench-rebalance bench-rest bench-registry bench-spark bench-spark-typed bench-reports bench-console bench-stop bench-tiered clean-var

# editable_mode=compat: a .pth path entry rather than setuptools' import-hook finder, which pkgutil.iter_modules()
# cannot see -- and that is how Spark discovers the `sluice` data source (pyspark_sluice). Makefile is a
# prerequisite so a change of this line reinstalls.
$(STAMP): Makefile pyproject.toml setup.py dataplane/protocol/_columns.pyx dataplane/protocol/_encode.pyx \
          controlplane/kafkarest/_split.pyx controlplane/kafkarest/_parse.pyx
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]' --config-settings editable_mode=compat
	@touch $(STAMP)

# The web console (frontend/, React + Vite): built into frontend/dist when its sources changed; the ASGI app
# serves it at "/". Needs Node 20+ and npm. Browsers are never downloaded (the e2e tests use Debian's chromium).
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD := 1
CONSOLE_SRC   := $(shell find frontend/src frontend/scripts -type f 2>/dev/null) frontend/index.html \
                 frontend/vite.config.ts frontend/tsconfig.json frontend/package.json
NODE_MODULES  := frontend/node_modules/.installed
CONSOLE_STAMP := frontend/dist/.built

$(NODE_MODULES): frontend/package-lock.json
	@command -v npm >/dev/null || { echo "The web console needs Node 20+ and npm (see README.md)." >&2; exit 1; }
	cd frontend && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

$(CONSOLE_STAMP): $(NODE_MODULES) $(CONSOLE_SRC) api_schema/openapi.yaml
	cd frontend && npm run --silent check:api && npm run --silent build
	@touch $@

console: $(CONSOLE_STAMP)

# The embedded S3-compatible object store (s3rver from npm, sluice/objectstore/): the remote tier of tiered storage
# when no SLUICE_REMOTE_STORAGE_ENDPOINT is configured, and the tests' object store.
OBJECTSTORE := sluice/objectstore/node_modules/.installed

$(OBJECTSTORE): sluice/objectstore/package-lock.json
	@command -v npm >/dev/null || { echo "The embedded object store needs Node 20+ and npm (see README.md)." >&2; exit 1; }
	cd sluice/objectstore && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

objectstore: $(OBJECTSTORE)

run: $(STAMP) $(CONSOLE_STAMP) $(OBJECTSTORE)
	$(BIN)/sluice up

# Debian's chromium for the console's browser tests, installed when missing (CI runs as root).
chromium:
	@test -x /usr/bin/chromium || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; }

# Debian's kcat (librdkafka's command-line client) for the tests that log in with it, installed when missing.
kcat:
	@test -x /usr/bin/kcat || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q kcat; }

# The console's own checks: a clean install from the lockfile, generated API types up to date, Vitest component
# tests, and the production build (which fails over the 300 KB gzipped first-page JavaScript budget).
console-test:
	cd frontend && npm ci --no-audit --no-fund --loglevel=error && touch node_modules/.installed
	cd frontend && npm run --silent check:api && npx vitest run && npm run --silent build
	@touch $(CONSOLE_STAMP)

# The Django mypy plugin imports settings, which need URLs (never used to connect).
MYPY_ENV := DATABASE_URL=postgresql://typecheck@127.0.0.1/typecheck REDIS_URL=redis://127.0.0.1/0 SECRET_KEY=typecheck

test: $(STAMP) chromium kcat console-test $(OBJECTSTORE)
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(MYPY_ENV) $(BIN)/mypy dataplane controlplane sluice
	$(BIN)/python -m pytest -n 2 --dist loadgroup --durations=25

# Long fault runs: every slow test, the whole multi-host suite (hosts are network namespaces, so root only; one
# test at a time, each runs a stack over several hosts), then the cluster fault scenarios (transactions included)
# for CHAOS_ROUNDS rounds with a random seed (CHAOS_SEED=N repeats a run). A failure names its history file:
# python -m tests.chaos.replay FILE
CHAOS_ROUNDS ?= 5
chaos: $(STAMP) $(OBJECTSTORE)
	$(BIN)/python -m pytest -m slow -n 2 --ignore=tests/multihost
	$(BIN)/python -m pytest tests/multihost -m "slow or not slow"
	CHAOS_ROUNDS=$(CHAOS_ROUNDS) $(BIN)/python -m pytest tests/chaos/test_scenarios.py tests/chaos/test_txn_scenarios.py \
		tests/chaos/test_tiered_scenarios.py

# ruff, then the import contracts in pyproject.toml ([tool.importlinter]): the dataplane's layers, no Django.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(MYPY_ENV) $(BIN)/mypy dataplane controlplane sluice

schema: $(STAMP)
	$(BIN)/python manage.py spectacular --validate --fail-on-warn --format openapi --file api_schema/openapi.yaml
	@if [ -x frontend/node_modules/.bin/openapi-typescript ]; then cd frontend && npm run --silent gen:api; \
	 else echo "frontend/node_modules missing: run 'make console' then 'cd frontend && npm run gen:api'"; fi

bench: $(STAMP)
	$(BIN)/python bench/storage.py

# The broker against Redis Streams (embedded Postgres and redis-server), and 100 B produce against
# bench/null_broker.py (a server that stores nothing: the ceiling), a few minutes.
bench-broker: $(STAMP)
	$(BIN)/python bench/broker.py

# Consumer groups: rebalance settle times (1/10/50 members) and commit throughput, a few minutes.
bench-groups: $(STAMP)
	$(BIN)/python bench/groups.py

bench-cluster: $(STAMP)
	$(BIN)/python bench/cluster.py

# Transactions: transactional produce (1,000 x 1 KiB per transaction) against the idempotent producer, and
# read_committed consume against read_uncommitted with 10% of transactions aborted; a few minutes
# (BENCH_ARGS=--quick: ~1).
bench-transactions: $(STAMP)
	$(BIN)/python bench/transactions.py $(BENCH_ARGS)

# Tiered storage: consume from the remote tier against local disk, produce with tiering on against off, uploads
# against a sustained produce; one broker and the embedded object store, a few minutes (BENCH_ARGS=--quick: ~1).
bench-tiered: $(STAMP) $(OBJECTSTORE)
	$(BIN)/python bench/tiered.py $(BENCH_ARGS)

# One-topic Metadata requests/s at 1,000 topics against ApiVersions on the same broker, ~1 minute.
bench-metadata: $(STAMP)
	$(BIN)/python bench/metadata.py

# Managed clusters (embedded Postgres/Redis, a Celery worker, two agents): create-to-Ready, broker SIGKILL to
# Ready, reconcile of 1,000 topics and a no-op resync, each against brokers started directly; ~6-7 minutes
# (BENCH_ARGS=--quick: 200 topics, ~1-2 minutes).
bench-managed: $(STAMP)
	$(BIN)/python bench/managed.py $(BENCH_ARGS)

# A managed cluster's rebalance of 100 partitions x 20 MB under a 50 MiB/s replication throttle, against the
# throttle's own time; ~4 minutes (BENCH_ARGS=--quick: ~2).
bench-rebalance: $(STAMP)
	$(BIN)/python bench/rebalance.py $(BENCH_ARGS)

# The REST proxy: Sluice's (v3 produce single/batch/streaming, v2 produce and consumer, WebSocket tail) against
# Aiven's Karapace and the direct confluent-kafka clients, on the demo broker of a `sluice up`; ~12 minutes
# (BENCH_ARGS=--quick: 100 B only, ~3 minutes). Karapace runs from var/bench/karapace-venv, which
# bench/karapace_venv.py builds from a git clone of Aiven-Open/karapace (BENCH_ARGS=--karapace-git DIR).
bench-rest: $(STAMP)
	$(BIN)/python bench/rest.py $(BENCH_ARGS)

# The Schema Registry: GET /schemas/ids/{id}, register-existing and lookup (req/s, p99 at 1,000 req/s) and REST v2
# Avro produce of 100 records/request, against Aiven's Karapace (registry + REST proxy) on the same broker; ~4 minutes
# (BENCH_ARGS=--quick: ~2-3). Prepare Karapace's venv once: KARAPACE_GIT=/path/to/karapace.git bench/karapace_setup.sh
bench-registry: $(STAMP)
	$(BIN)/python bench/registry.py $(BENCH_ARGS)

# Spark: count-by-key over 5M 100 B records through the sluice data source against a plain confluent-kafka consumer
# loop, on topics of 1, 4 and 8 partitions; Spark start-up reported apart. ~6 minutes (BENCH_ARGS=--quick: ~1).
# The web console in Chromium: topics page with 5,000 topics, live tail at 1,000 rec/s for 60 s (click latency, JS
# heap), first-page JavaScript; ~6-8 minutes (BENCH_ARGS=--quick: 500 topics, 15 s, ~2 minutes).
bench-console: $(STAMP) $(CONSOLE_STAMP) chromium
	$(BIN)/python bench/console.py $(BENCH_ARGS)

bench-reports: $(STAMP)
	$(BIN)/python bench/reports.py

bench-spark: $(STAMP)
	$(BIN)/python bench/spark.py $(BENCH_ARGS)

# Avro-typed reads (value.format=avro) against the binary read, same run (a stand-in registry, see the script).
bench-spark-typed: $(STAMP)
	$(BIN)/python bench/spark_typed.py $(BENCH_ARGS)

# How long `sluice up` takes to stop on Ctrl-C, with and without the report runner, against a bare Postgres+Redis.
bench-stop: $(STAMP)
	$(BIN)/python bench/stop.py $(BENCH_ARGS)

clean-var:
	rm -rf var
