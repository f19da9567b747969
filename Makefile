# One entry point for users and CI. `make test` and `make demo` do every set-up step
# themselves on a fresh machine with Python 3.11+ and a JDK 17+.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
# The jars are package data of `appliance` (git-ignored): found there by
# appliance.connector in a checkout, and packed into the wheel by `make dist`.
JARS   := appliance/jars
KAFKA_CLIENTS_JAR := $(JARS)/kafka-clients-3.9.1.jar
CONNECTOR_JAR     := $(JARS)/appliance-kafka-connector.jar
# The deploy's Ansible collections (community.crypto), extracted from the pinned `ansible`
# wheel (Galaxy is not reachable); git-ignored, on ansible/ansible.cfg's collections_path.
COLLECTIONS       := ansible/collections/ansible_collections/community/crypto/MANIFEST.json
CONNECTOR_SRC     := $(shell find connector/src/main -type f 2>/dev/null)
SPARK_JARS         = $(shell $(PY) -c 'import pyspark, os; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')

VERSION            = $(shell $(PY) -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
WHEEL              = dist/appliance-$(VERSION)-py3-none-any.whl

.PHONY: setup system-deps class-archive connector dist test test-fast test-deploy faults soak demo watch watch-quiet bench lint clean faults-overload dashboards docs testbed testbed-down

setup: $(VENV)/.installed $(KAFKA_CLIENTS_JAR) connector system-deps class-archive $(COLLECTIONS)

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[dev]'
	touch $@

$(KAFKA_CLIENTS_JAR): scripts/fetch_kafka_clients.py scripts/pinned_wheel.py | $(VENV)/.installed
	$(PY) scripts/fetch_kafka_clients.py $(JARS)

$(COLLECTIONS): scripts/fetch_collections.py scripts/pinned_wheel.py | $(VENV)/.installed
	$(PY) scripts/fetch_collections.py ansible/collections

# Plain javac/jar against the installed pyspark's jars and the pinned kafka-clients jar.
connector: $(CONNECTOR_JAR)

$(CONNECTOR_JAR): $(CONNECTOR_SRC) $(KAFKA_CLIENTS_JAR) | $(VENV)/.installed
	@if [ -z "$(CONNECTOR_SRC)" ]; then echo "connector: no sources yet"; exit 0; fi; \
	set -e; rm -rf build/connector-classes; mkdir -p build/connector-classes; \
	javac -nowarn -encoding UTF-8 --release 17 -Xlint:-options \
	  -cp "$(SPARK_JARS)/*:$(KAFKA_CLIENTS_JAR)" \
	  -d build/connector-classes $$(find connector/src/main/java -name '*.java'); \
	if [ -d connector/src/main/resources ]; then cp -R connector/src/main/resources/. build/connector-classes/; fi; \
	jar --create --file $@.tmp -C build/connector-classes .; \
	mv -f $@.tmp $@; \
	echo "connector: built $@"

# One wheel with the jars inside (package data). setuptools copies packages through
# build/lib, which it never prunes: start from an empty one so no deleted module ships.
dist: $(KAFKA_CLIENTS_JAR) connector
	rm -rf build/lib build/bdist.* dist/appliance-*.whl
	$(VENV)/bin/pip wheel --quiet --no-deps --wheel-dir dist .
	@$(PY) -c 'import sys, zipfile; names = zipfile.ZipFile(sys.argv[1]).namelist(); \
	  missing = [j for j in sys.argv[2:] if j not in names]; \
	  sys.exit(f"dist: {missing} not in {sys.argv[1]}" if missing else 0)' \
	  $(WHEEL) $(CONNECTOR_JAR) $(KAFKA_CLIENTS_JAR) appliance/py.typed
	@echo "dist: built $(WHEEL)"

# The driver JVM's class-data-sharing archive (docs/appliance.md, "Start-up: the class
# archive"): one recorded start, about a minute; later starts load Spark's classes from it.
class-archive: $(VENV)/.installed $(KAFKA_CLIENTS_JAR) connector
	$(VENV)/bin/appliance class-archive build --if-missing

# Debian packages the tests talk to as real, independent peers (kcat) or servers
# (prometheus). Installed only when missing and when we may (root); else we say so.
system-deps:
	@$(PY) scripts/system_deps.py

# The suite against a real broker, real Spark and real Kafka clients, in under 30 minutes on
# the project's 2-core machines (docs/testing.md). scripts/test_suite.py runs the parts in
# order: the parallel part on two pytest workers taking whole files (PYTEST_WORKERS=0: one
# process), then the `exclusive` tests alone; every part even after a failing one, and it
# ends with each part's time and the 30 slowest tests of the run. The Ansible deploy onto
# the multi-host test bed (root, ~25 min more) is `make test-deploy`; CI runs all three
# parts (.ci/run: TEST_PARTS="parallel exclusive deploy").
PYTEST_WORKERS ?= 2
TEST_PARTS ?= parallel exclusive
test: setup
	PYTEST_WORKERS=$(PYTEST_WORKERS) $(PY) scripts/test_suite.py $(TEST_PARTS)

# The inner loop: unit, contract and protocol tests; nothing that starts Spark or a Java
# client, runs real clients end to end, kills, restarts or deploys (the e2e mark,
# tests/conftest.py). A few minutes on two workers.
FAST := not spark and not java and not e2e and not cluster and not deploy and not exclusive
test-fast: setup
	$(PY) -m pytest -m "$(FAST)" -n $(PYTEST_WORKERS) --dist loadfile

# The end-to-end Ansible deploy onto the multi-host test bed (root; builds the bed): one
# deployed bed through its scenarios in a fixed order (tests/deploy/conftest.py).
test-deploy: setup
	$(PY) scripts/test_suite.py deploy

# The long fault variants: more kill -9 rounds, a ~30 s broker outage, higher rates, every
# trigger (tests/faults/conftest.py reads FAULTS_LONG), and the other triggers of the kill -9 and
# restart test elsewhere (the faults_long mark). Needs root for the tmpfs disk test.
faults: setup
	FAULTS_LONG=1 $(PY) -m pytest tests/faults -s -p no:cacheprovider
	FAULTS_LONG=1 $(PY) -m pytest -m faults_long tests --ignore=tests/faults -s -p no:cacheprovider

# Hours of `appliance run` at a steady rate against a durable broker (issue 46): the
# broker's memory, open files and the latencies must stay flat. SOAK_SECONDS sets the
# length (default 4 h; e.g. `make soak SOAK_SECONDS=300` to try it), SOAK_RATE the events/s.
# Samples: reports/soak/broker_soak.jsonl.
SOAK_SECONDS ?= 14400
SOAK_RATE ?= 1000
soak: setup
	SOAK_SECONDS=$(SOAK_SECONDS) SOAK_RATE=$(SOAK_RATE) $(PY) -m pytest tests/faults/test_soak.py -m soak -s -p no:cacheprovider

# The long overload variant (issue 12): 60 s at twice the sustainable rate; `make test` runs
# the same test for 10 s. Figures and plot: reports/overload/connector_overload_60s.{json,png}.
faults-overload: setup
	CONNECTOR_OVERLOAD_SECONDS=60 $(PY) -m pytest -s tests/connector/test_connector_overload.py

# DEMO_ARGS: `appliance demo` flags, e.g. DEMO_ARGS="--duration 60s --rate 2000".
DEMO_ARGS ?=
demo: setup
	$(VENV)/bin/appliance demo $(DEMO_ARGS)

# Prometheus and Alertmanager (Debian packages) on 127.0.0.1:9090 and :9093 with the
# project's scrape config and rules, against the running `appliance run`; data in
# var/watch/, Ctrl-C stops them. WATCH_ARGS: `appliance watch` flags.
WATCH_ARGS ?=
watch: setup
	$(VENV)/bin/appliance watch $(WATCH_ARGS)

# The quick start's watch held quiet (no alert pending or firing but the Watchdog) for
# 5 minutes beside the README's `appliance run` (issue 52); `make test` holds it for 60 s.
watch-quiet: setup
	WATCH_QUIET_S=300 $(PY) -m pytest -s -p no:cacheprovider tests/quickstart/test_readme_quickstart.py

bench: setup
	$(PY) -m bench

# The docs' pictures (docs/img/*.svg) drawn from their text (docs/img/*.dot) with
# Graphviz's dot; tests/docs/test_pictures.py fails while a drawing is older than its text.
docs: $(VENV)/.installed system-deps
	$(PY) scripts/draw_docs.py

lint: setup
	$(VENV)/bin/ruff check appliance loadgen tests bench scripts dashboards
	$(VENV)/bin/lint-imports
	cd ansible && ../$(VENV)/bin/ansible-lint --profile production --strict
	$(VENV)/bin/mypy

# The multi-host test bed for the Ansible deploy (scripts/testbed/bed.py says what it
# makes). Root only; idempotent; `testbed-down` removes all of it but the cached rootfs.
testbed: setup
	$(PY) scripts/testbed up

testbed-down:
	$(PYTHON) scripts/testbed down

# Regenerate dashboards/json from dashboards/build.py (commit the result).
dashboards: setup
	$(PY) -m dashboards.build

clean:
	rm -rf build dist reports var .pytest_cache $(JARS)
