#!/usr/bin/env bash
# The long torture runs of docs/RELIABILITY.md: for each store, real worker processes,
# dedicated store instances, every fault, until >= 10,000 pause/kill takeover cycles,
# >= 500 store restarts and >= 500 proxy faults per store (or a time cap), then the
# independent checker over every history and the resource.
#
#   scripts/torture-long.sh [postgres mysql redis etcd zookeeper dynamo s3]     (default: all seven)
#
# The named stores run side by side; each store runs as K instances side by side (its
# own store instance, seed and histories each), which share its targets. Per store:
#
#   store     instances  TTL      (override: TORTURE_INSTANCES_<STORE>, TORTURE_TTL_MS_<STORE>)
#   postgres  3          300 ms
#   mysql     3          300 ms   (MariaDB)
#   redis     3          300 ms
#   etcd      10         1 s      (etcd clusters with 50 ms heartbeats, 500 ms elections:
#                                  etcd's shortest lease is 1.5 election timeouts, rounded up)
#   zookeeper 6          1 s      (three-server ensembles; sessions are whole seconds)
#   dynamo    6          400 ms
#   s3        6          400 ms
#
# Environment (all optional):
#   TORTURE_SEED=1            the first instance's seed (instance i: seed + i)
#   TORTURE_MAX_MINUTES=1440  time cap per store
#   TORTURE_CYCLES=10000 TORTURE_RESTARTS=500 TORTURE_PROXY_FAULTS=500   per-store targets
#   TORTURE_PROFILE=bench-fast   the cargo profile of the controller and workers (release
#                                code: the debug build spends the 2-core machine's CPU)
#   CARGO_TARGET_DIR          where cargo builds (default: target)
#
# Each store's reports (every instance, then the TOTAL) go to
# $LEASEHOLD_STORES_DIR/leasehold-tests/long-<store>.txt; the histories of instance i stay
# in $LEASEHOLD_STORES_DIR/leasehold-tests/long-<store>-<port>/. Exits non-zero if any
# run found a violation.
set -euo pipefail
cd "$(dirname "$0")/.."

stores=("$@")
[ ${#stores[@]} -gt 0 ] || stores=(postgres mysql redis etcd zookeeper dynamo s3)
SEED=${TORTURE_SEED:-1}
MAX=${TORTURE_MAX_MINUTES:-1440}
TARGET=${CARGO_TARGET_DIR:-target}
PROFILE=${TORTURE_PROFILE:-bench-fast}

declare -A INSTANCES=([postgres]=3 [mysql]=3 [redis]=3 [etcd]=10 [zookeeper]=6 [dynamo]=6 [s3]=6)
declare -A TTL_MS=([postgres]=300 [mysql]=300 [redis]=300 [etcd]=1000 [zookeeper]=1000 [dynamo]=400 [s3]=400)

cargo build --profile "$PROFILE" -p leasehold-tests --bins
# Run copies: a rebuild during a run must not swap the worker that replaces killed ones.
BIN=$(mktemp -d /tmp/leasehold-torture-bin.XXXXXX)
dir=$PROFILE; [ "$PROFILE" = dev ] && dir=debug
cp "$TARGET/$dir/torture" "$TARGET/$dir/torture-worker" "$BIN/"

# The resource lives on the shared Postgres; the stores under test are started by the
# runs themselves, on ports of their own.
scripts/stores.sh start postgres
eval "$(scripts/stores.sh env)"
export LEASEHOLD_ETCD_HEARTBEAT_MS=${LEASEHOLD_ETCD_HEARTBEAT_MS:-50}
export LEASEHOLD_ETCD_ELECTION_MS=${LEASEHOLD_ETCD_ELECTION_MS:-500}
OUT="$LEASEHOLD_STORES_DIR/leasehold-tests"
mkdir -p "$OUT"

pids=()
for store in "${stores[@]}"; do
  [ -n "${INSTANCES[$store]:-}" ] || { echo "torture-long: unknown store $store" >&2; exit 2; }
  up=${store^^}
  k=$(printenv "TORTURE_INSTANCES_$up" || echo "${INSTANCES[$store]}")
  ttl=$(printenv "TORTURE_TTL_MS_$up" || echo "${TTL_MS[$store]}")
  echo "== torture $store: $k instances, ttl $ttl ms, seed $SEED.., up to $MAX min" >&2
  "$BIN/torture" --store "$store" --seed "$SEED" --instances "$k" --ttl-ms "$ttl" --max-minutes "$MAX" \
    --cycles "${TORTURE_CYCLES:-10000}" --restarts "${TORTURE_RESTARTS:-500}" \
    --proxy-faults "${TORTURE_PROXY_FAULTS:-500}" >"$OUT/long-$store.txt" 2>"$OUT/long-$store.log" &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
for store in "${stores[@]}"; do cat "$OUT/long-$store.txt"; done
rm -rf "$BIN"
exit $status
