# Everything runs inside .venv, which `make install` creates from pyproject.toml.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
EXTRAS ?= dev,server,operator,spark

.PHONY: install test lint crds check check-scaling fuzz quickstart bench clean test-kubernetes-store \
	kind-up image image-spark load deploy e2e kind-down

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

# Figures only (throughput, latency, memory, idle CPU); benchmarks never fail on timing.
bench: install
	$(BIN)/python benchmarks/bench_segment_log.py
	$(BIN)/python benchmarks/bench_broker.py
	$(BIN)/python benchmarks/bench_connections.py
	$(BIN)/python benchmarks/bench_namespace_watch.py
	$(BIN)/python benchmarks/bench_backlog_counts.py
	$(BIN)/python benchmarks/bench_memory.py
	$(BIN)/python benchmarks/bench_scaling.py
	$(BIN)/python benchmarks/bench_client.py
	$(BIN)/python benchmarks/bench_namespace_diff_latency.py
	$(BIN)/python benchmarks/bench_namespace_consumer.py
	$(BIN)/python benchmarks/bench_control_plane.py --topics 1000 --topics 10000
	$(BIN)/python benchmarks/bench_kubeapi.py
	$(BIN)/python benchmarks/bench_kube_path.py
	$(BIN)/python benchmarks/bench_operator_path.py
	$(BIN)/python benchmarks/bench_load_reporter.py
	$(BIN)/python benchmarks/bench_load_job.py
	$(BIN)/python benchmarks/bench_admin_put.py
	$(BIN)/python benchmarks/bench_idle.py

# Splits, merges and SIGKILLs under load; ARGS=--long runs for minutes.
check-scaling: install
	$(BIN)/python tests/scaling/scaling_checker.py $(ARGS)

# The wire fuzzer against a real broker: FRAMES frames (SEED=N repeats a run); figures and
# findings, exit 1 on any. CI runs 30,000 frames (tests/fuzz/test_wire_fuzz.py).
FRAMES ?= 1000000
fuzz: install
	$(BIN)/python tests/fuzz/run_fuzz.py --frames $(FRAMES) $(if $(SEED),--seed $(SEED))

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

# -- Images and a kind cluster ----------------------------------------------------------------
# These need Docker and kind (e2e also its suite, tests/e2e), which the CI machines do not
# have: none of these targets has been run there. What CI checks offline instead, in
# tests/packaging (part of `make check`): hadolint on both Dockerfiles, and the manifests as
# kustomize renders them, validated against the Kubernetes schemas.
# A full run: make kind-up image load deploy e2e kind-down
KIND_CLUSTER ?= scalable-topics
KUBE_CONTEXT := kind-$(KIND_CLUSTER)
# The image manifests/overlays/kind runs.
IMAGE := scalable-topics:dev
SPARK_IMAGE := scalable-topics-spark:dev
ROLLOUT_TIMEOUT ?= 300s

kind-up:
	kind create cluster --config manifests/kind/cluster.yaml --name $(KIND_CLUSTER)

image:
	docker build -t $(IMAGE) .

image-spark:
	docker build -f Dockerfile.spark -t $(SPARK_IMAGE) .

# kind nodes cannot pull a local image: copy it into them.
load:
	kind load docker-image $(IMAGE) --name $(KIND_CLUSTER)

# Always the kind cluster's context, never whatever kubectl points at.
deploy: install
	$(BIN)/kubectl --context $(KUBE_CONTEXT) apply -k manifests/overlays/kind
	$(BIN)/kubectl --context $(KUBE_CONTEXT) -n scalable-topics rollout status \
		deployment/scalable-topics-operator --timeout=$(ROLLOUT_TIMEOUT)
	$(BIN)/kubectl --context $(KUBE_CONTEXT) -n scalable-topics rollout status \
		statefulset/scalable-topics-broker --timeout=$(ROLLOUT_TIMEOUT)

e2e: install
	$(BIN)/python -m pytest -q tests/e2e --e2e-target=kind

kind-down:
	kind delete cluster --name $(KIND_CLUSTER)
