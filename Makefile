# Everything the project needs is installed by these targets into .venv.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install browser kafka demo check test test-full test-kafka-versions schema-drift golden golden-versions test-cluster bench dist clean

# setup.py and the C sources too: an existing .venv rebuilds the compiled kernels when they change.
$(STAMP): pyproject.toml setup.py $(shell find src -name '*.c')
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[spark,test,delta,streaming,connect,notebooks]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/offsets-audit demo

# The HTML report test drives a real headless Chromium (Debian package); install it when we can.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	  echo "note: chromium not installed (needs root); the report screenshot test will be skipped"

# Kafka's own jars (broker, tools, clients, coordinator) with the project's Java helpers compiled against them,
# and Spark's kafka source and Delta's Spark jars: resolved by the machine's Maven into .cache/ (git-ignored).
kafka: $(STAMP)
	$(BIN)/python tests/kafka_jars.py kafka
	$(BIN)/python tests/kafka_jars.py spark

# The static checks, before any test runs: lint, types of src/, the stage layers, cycles and private imports.
check: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python tools/check_imports.py src/offsets_audit

# The suite in TEST_WORKERS processes (pytest-xdist), each module whole on one of them, the longest modules first
# (tests/conftest.py); TEST_WORKERS=0 runs it in this process. docs/testing.md says how to run a part of it.
TEST_WORKERS ?= 2
PYTEST_SPLIT := -n $(TEST_WORKERS) --dist loadfile

test: $(STAMP) check browser kafka
	$(BIN)/python -m pytest $(PYTEST_SPLIT)

# The default suite plus its long runs (tests marked full, and every parity cut): several times longer.
test-full: $(STAMP) check browser kafka
	OFFSETS_AUDIT_FULL=1 OFFSETS_AUDIT_FULL_PARITY=1 $(BIN)/python -m pytest $(PYTEST_SPLIT)

# The real-Kafka tests (a KRaft broker, Kafka's clients and tools) on every Kafka version of the matrix
# (tests/kafka_jars.py KAFKA_VERSIONS); `make test` runs them on the newest only.
test-kafka-versions: $(STAMP)
	$(BIN)/python tests/kafka_jars.py kafka 3.9.1 4.0.2 4.2.1 4.4.0
	$(BIN)/python -m pytest tests/test_real_kafka.py --kafka-versions all

# schemas/ against the record schemas each Kafka release's jar defines (through the oracle): a record type, version,
# field or tag Kafka has and schemas/ lacks or dates wrongly is one line naming it.
schema-drift: $(STAMP)
	$(BIN)/python tests/kafka_jars.py kafka 4.0.2 4.2.1 4.4.0
	$(BIN)/python tests/schema_drift.py 4.0.2 4.2.1 4.4.0

# tests/golden's Kafka-judged parts remade by a Kafka release through the oracle (tests/golden_regen.py): assignor
# answers, record vectors read, written back and printed, segments read and dumped, histories' state loaded.
# `make golden` compares the stored data with GOLDEN_KAFKA's answers (one line per part, exit 1 on a difference);
# GOLDEN_FLAGS=--write stores them in tests/golden (review the diff). `make golden-versions` writes 4.0's, 4.2's and
# 4.4's into .cache/golden/<version>.
GOLDEN_KAFKA ?= 4.4.0
GOLDEN_FLAGS ?=
golden: $(STAMP)
	$(BIN)/python tests/kafka_jars.py kafka $(GOLDEN_KAFKA)
	$(BIN)/python tests/golden_regen.py --version $(GOLDEN_KAFKA) $(GOLDEN_FLAGS)

golden-versions: $(STAMP)
	$(BIN)/python tests/kafka_jars.py kafka 4.0.2 4.2.1 4.4.0
	for v in 4.0.2 4.2.1 4.4.0; do $(BIN)/python tests/golden_regen.py --version $$v --out .cache/golden/$$v || exit 1; done

# The job on a Spark standalone cluster (master + 2 workers) against local[2]: Parquet, Delta through Spark's own
# writer, and Spark's kafka source on a real broker (six spark-submit runs, so not in `make test`).
test-cluster: $(STAMP) kafka
	OFFSETS_AUDIT_CLUSTER=1 $(BIN)/python -m pytest tests/test_cluster.py

bench: $(STAMP)
	$(BIN)/python bench/decode.py

dist: $(STAMP)
	$(BIN)/python -m pip wheel --no-deps -w dist .
	cd src && $(abspath $(BIN))/python -m zipfile -c ../dist/offsets_audit.zip offsets_audit

clean:
	rm -rf $(VENV) dist build spark-warehouse .cache
