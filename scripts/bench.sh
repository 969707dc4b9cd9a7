#!/usr/bin/env bash
# The benchmarks: installs what is missing, starts the stores the benchmarks need the way
# scripts/test.sh does (each on a loopback port of its own), builds crates/lease-bench
# with release optimisations (profile bench-fast), runs it, and rewrites
# docs/PERFORMANCE.md with what it measured: the machine, the store versions and
# settings, this exact command, and every table. A few minutes on two cores, plus the
# first release build.
#
#   scripts/bench.sh                          # every store, every table
#   scripts/bench.sh --stores postgres,redis  # a subset (the report says what is missing)
#
# Stores that were already running are left running; the ones this script started are
# stopped when it ends.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh

started=()
cleanup() {
  if [ ${#started[@]} -gt 0 ]; then
    scripts/stores.sh stop "${started[@]}" >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT
for store in postgres redis etcd moto; do
  out=$(scripts/stores.sh start "$store" 2>&1) || { echo "$out" >&2; exit 1; }
  echo "$out" >&2
  case "$out" in *"already up"*) ;; *) started+=("$store") ;; esac
done
eval "$(scripts/stores.sh env)"

command="scripts/bench.sh${*:+ $*}"
cargo build --profile bench-fast -p leasehold-bench
cargo run --quiet --profile bench-fast -p leasehold-bench -- --out docs/PERFORMANCE.md --command "$command" "$@"
echo "bench: wrote docs/PERFORMANCE.md" >&2
