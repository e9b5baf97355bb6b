# One command to run the service, one to run every test (see README.md).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test chaos lint typecheck schema bench bench-broker bench-groups bench-cluster bench-metadata bench-managed bench-rebalance bench-rest bench-spark clean-var

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

run: $(STAMP)
	$(BIN)/sluice up

# The Django mypy plugin imports settings, which need URLs (never used to connect).
MYPY_ENV := DATABASE_URL=postgresql://typecheck@127.0.0.1/typecheck REDIS_URL=redis://127.0.0.1/0 SECRET_KEY=typecheck

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(MYPY_ENV) $(BIN)/mypy dataplane controlplane sluice
	$(BIN)/python -m pytest -n 2 --dist loadgroup

# Long fault runs: every slow test, then the cluster fault scenarios for CHAOS_ROUNDS rounds with a random
# seed (CHAOS_SEED=N repeats a run). A failure names its history file: python -m tests.chaos.replay FILE
CHAOS_ROUNDS ?= 5
chaos: $(STAMP)
	$(BIN)/python -m pytest -m slow -n 2
	CHAOS_ROUNDS=$(CHAOS_ROUNDS) $(BIN)/python -m pytest tests/chaos/test_scenarios.py

# ruff, then the import contracts in pyproject.toml ([tool.importlinter]): the dataplane's layers, no Django.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(MYPY_ENV) $(BIN)/mypy dataplane controlplane sluice

schema: $(STAMP)
	$(BIN)/python manage.py spectacular --validate --fail-on-warn --format openapi --file api_schema/openapi.yaml

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

# Spark: count-by-key over 5M 100 B records through the sluice data source against a plain confluent-kafka consumer
# loop, on topics of 1, 4 and 8 partitions; Spark start-up reported apart. ~6 minutes (BENCH_ARGS=--quick: ~1).
bench-spark: $(STAMP)
	$(BIN)/python bench/spark.py $(BENCH_ARGS)

clean-var:
	rm -rf var
