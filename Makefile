# Everything runs inside .venv, which `make install` creates from pyproject.toml.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
EXTRAS ?= dev,server,operator

.PHONY: install test lint crds check check-scaling quickstart bench clean test-kubernetes-store

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[$(EXTRAS)]"
	touch $(STAMP)

test: install
	$(BIN)/python -m pytest -q

lint: install
	$(BIN)/ruff check operator tests benchmarks
	$(BIN)/ruff format --check operator tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports

crds: install
	$(BIN)/python -m scalable_topics.crdgen crds

# Figures only (throughput, latency); benchmarks never fail on timing.
bench: install
	$(BIN)/python benchmarks/bench_segment_log.py
	$(BIN)/python benchmarks/bench_broker.py
	$(BIN)/python benchmarks/bench_scaling.py
	$(BIN)/python benchmarks/bench_client.py
	$(BIN)/python benchmarks/bench_control_plane.py --topics 1000 --topics 10000
	$(BIN)/python benchmarks/bench_kubeapi.py
	$(BIN)/python benchmarks/bench_kube_path.py
	$(BIN)/python benchmarks/bench_operator_path.py

# Splits, merges and SIGKILLs under load; ARGS=--long runs for minutes.
check-scaling: install
	$(BIN)/python tests/scaling/scaling_checker.py $(ARGS)

# README's first command: stctl standalone, a topic, produce, consume, a split while producing.
quickstart: install
	bash scripts/quickstart.sh

# What CI runs: lint, then the whole test suite.
check: lint test

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis

# The store contract suite against a real cluster, through the Kubernetes adapter: the cluster
# the KUBECONFIG variable names (its current context, or ST_STORE_CONTRACT_CONTEXT). Each test
# works in namespaces of its own, deleted after it; the StoreProbe CRD (tests/store) is applied
# once and left installed. Without KUBECONFIG there is no cluster to test: it says so, and passes.
test-kubernetes-store: install
	@if [ -z "$$KUBECONFIG" ]; then \
		echo "test-kubernetes-store: SKIPPED: KUBECONFIG is not set, so there is no cluster to run the store contract suite against"; \
	else \
		echo "test-kubernetes-store: the store contract suite on the cluster of $$KUBECONFIG"; \
		ST_STORE_CONTRACT_KUBECONFIG="$$KUBECONFIG" $(BIN)/python -m pytest -q -p no:cacheprovider \
			tests/store/test_store_contract.py tests/store/test_store_leases.py \
			tests/store/test_store_replay.py -k "cluster"; \
	fi
