#!/usr/bin/env bash
# The long torture runs of docs/RELIABILITY.md: for each store, real worker processes,
# a dedicated store instance, every fault, until >= 10,000 pause/kill takeover cycles,
# >= 500 store restarts and >= 500 proxy faults (or a time cap), then the independent
# checker over every history and the resource.
#
#   scripts/torture-long.sh [postgres redis etcd dynamo s3]     (default: all five, in turn)
#
# Environment (all optional):
#   TORTURE_SEED=1            the controller's seed (the fault schedule replays from it)
#   TORTURE_MAX_MINUTES=1440  time cap per store
#   TORTURE_CYCLES=10000 TORTURE_RESTARTS=500 TORTURE_PROXY_FAULTS=500   the targets
#   CARGO_TARGET_DIR          where cargo builds (default: target)
#
# Each store's report goes to $LEASEHOLD_STORES_DIR/leasehold-tests/long-<store>.txt and
# stdout; its histories stay in $LEASEHOLD_STORES_DIR/leasehold-tests/long-<store>-<port>/.
# Exits non-zero if any run found a violation.
set -euo pipefail
cd "$(dirname "$0")/.."

stores=("$@")
[ ${#stores[@]} -gt 0 ] || stores=(postgres redis etcd dynamo s3)
SEED=${TORTURE_SEED:-1}
MAX=${TORTURE_MAX_MINUTES:-1440}
TARGET=${CARGO_TARGET_DIR:-target}

cargo build -p leasehold-tests --bins
# Run copies: a rebuild during a run must not swap the worker that replaces killed ones.
BIN=$(mktemp -d /tmp/leasehold-torture-bin.XXXXXX)
cp "$TARGET/debug/torture" "$TARGET/debug/torture-worker" "$BIN/"

# The resource lives on the shared Postgres; the stores under test are started by the
# runs themselves, on ports of their own.
scripts/stores.sh start postgres
eval "$(scripts/stores.sh env)"
OUT="$LEASEHOLD_STORES_DIR/leasehold-tests"
mkdir -p "$OUT"

status=0
for store in "${stores[@]}"; do
  echo "== torture $store, seed $SEED, up to $MAX min" >&2
  "$BIN/torture" --store "$store" --seed "$SEED" --max-minutes "$MAX" \
    --cycles "${TORTURE_CYCLES:-10000}" --restarts "${TORTURE_RESTARTS:-500}" \
    --proxy-faults "${TORTURE_PROXY_FAULTS:-500}" | tee "$OUT/long-$store.txt" || status=1
done
rm -rf "$BIN"
exit $status
