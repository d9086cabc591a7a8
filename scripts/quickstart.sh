#!/usr/bin/env bash
# The README's quickstart, step by step: run everything on this machine with
# `stctl standalone`, create a topic, produce and consume, split a segment while producing,
# and look at the topic, with stctl and with kubectl (standalone serves the Kubernetes API and
# writes a kubeconfig). Run it with `make quickstart`; each step is a command you can paste.
set -euo pipefail

PATH="$(pwd)/.venv/bin:$PATH"
PORT="${PORT:-6650}"
DATA_DIR="$(mktemp -d -t scalable-topics-quickstart-XXXXXX)"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

echo "Starting stctl standalone (data in ${DATA_DIR})..."
stctl standalone --data-dir "${DATA_DIR}" --port "${PORT}" > "${DATA_DIR}/standalone.out" 2>&1 &
STANDALONE=$!
trap 'kill ${STANDALONE} 2>/dev/null; wait ${STANDALONE} 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do
    grep -q "serving" "${DATA_DIR}/standalone.out" 2>/dev/null && break
    if ! kill -0 "${STANDALONE}" 2>/dev/null; then cat "${DATA_DIR}/standalone.out"; exit 1; fi
    sleep 0.1
done
head -n 3 "${DATA_DIR}/standalone.out"
# Every request needs a token: stctl reads the service URL and the admin token from the
# client configuration standalone wrote.
export STCTL_CONFIG="${DATA_DIR}/stctl-config"

step stctl topics create orders --segments 2 --subscription billing:Stream --subscription audit
step stctl produce orders --key-separator=: \
    -m customer-1:order-1 -m customer-2:order-2 -m customer-1:order-3 -m customer-3:order-4
step stctl consume orders -s billing -c 4

# Keep producing (500 msg/s, 20 keys) while segment 0 is split into two children.
for i in $(seq 1 3000); do echo "customer-$((i % 20)):order-${i}"; done > "${DATA_DIR}/orders.txt"
stctl produce orders --key-separator=: -f "${DATA_DIR}/orders.txt" --rate 500 &
PRODUCING=$!
sleep 2
step stctl topics split orders 0
wait "${PRODUCING}"
step stctl consume orders -s audit --type key-shared --quiet --timeout 3
step stctl topics describe orders
export KUBECONFIG="${DATA_DIR}/kubeconfig"
step kubectl get scalabletopics
step kubectl get segments -l scalabletopics.dev/topic=orders
echo
echo "Done. stctl standalone keeps its data in ${DATA_DIR}; start it yourself with:"
echo "  .venv/bin/stctl standalone --data-dir ${DATA_DIR} --port ${PORT}"
echo "and point stctl at it with: export STCTL_CONFIG=${DATA_DIR}/stctl-config"
