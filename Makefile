# One entry point for users and CI. `make test` and `make demo` do every set-up step
# themselves on a fresh machine with Python 3.11+ and a JDK 17+.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
JARS   := build/jars
KAFKA_CLIENTS_JAR := $(JARS)/kafka-clients-3.9.1.jar
CONNECTOR_JAR     := $(JARS)/appliance-kafka-connector.jar
CONNECTOR_SRC     := $(shell find connector/src/main -type f 2>/dev/null)
SPARK_JARS         = $(shell $(PY) -c 'import pyspark, os; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')

.PHONY: setup system-deps connector test test-fast demo bench lint clean faults-overload

setup: $(VENV)/.installed $(KAFKA_CLIENTS_JAR) connector system-deps

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[dev]'
	touch $@

$(KAFKA_CLIENTS_JAR): scripts/fetch_kafka_clients.py | $(VENV)/.installed
	$(PY) scripts/fetch_kafka_clients.py $(JARS)

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

# Debian packages the tests talk to as real, independent peers (kcat) or servers
# (prometheus). Installed only when missing and when we may (root); else we say so.
system-deps:
	@$(PY) scripts/system_deps.py

test: setup
	$(PY) -m pytest

# The long overload variant (issue 12): 60 s at twice the sustainable rate; `make test` runs
# the same test for 10 s. Figures and plot: reports/overload/connector_overload_60s.{json,png}.
faults-overload: setup
	CONNECTOR_OVERLOAD_SECONDS=60 $(PY) -m pytest -s tests/connector/test_connector_overload.py

demo: setup
	$(VENV)/bin/appliance demo

bench: setup
	$(PY) -m bench

lint: setup
	$(VENV)/bin/ruff check appliance loadgen tests bench scripts
	$(VENV)/bin/lint-imports

clean:
	rm -rf build reports var .pytest_cache
