#!/usr/bin/env bash
# The benchmarks: installs what is missing, starts the stores the benchmarks need the way
# scripts/test.sh does (each on a loopback port of its own), builds crates/lease-bench
# with release optimisations (profile bench-fast), runs it, writes what it measured to
# docs/performance.json (the machine, the store versions and settings, this exact
# command, every figure as a number) and renders that into docs/PERFORMANCE.md (only the
# regions between its `bench:` markers change, the prose around them is written by hand)
# and its charts, docs/charts/*.svg.
# A few minutes on two cores, plus the first release build.
#
#   scripts/bench.sh                                  # every store, every table
#   scripts/bench.sh --stores postgres,redis          # a subset (the other tables say "Not measured")
#   scripts/bench.sh --stores postgres,redis --merge  # re-measure a subset, keep the other stores' rows
#                                                     # (the re-measured rows are marked and footnoted)
#   scripts/bench.sh --smoke                          # tiny counts: shows it works, the figures mean nothing
#
# To render the tables again from docs/performance.json without measuring (after editing
# the prose, say): cargo run -p leasehold-bench -- render docs/performance.json docs/PERFORMANCE.md
#
# Stores that were already running are left running; the ones this script started are
# stopped when it ends.
set -euo pipefail
cd "$(dirname "$0")/.."

json=docs/performance.json
doc=docs/PERFORMANCE.md
for arg in "$@"; do
  case "$arg" in
    --json|--out)
      echo "bench: scripts/bench.sh writes $json and $doc; for other paths run the leasehold-bench binary itself (run --json FILE, then render FILE DOC)" >&2
      exit 2
      ;;
  esac
done

scripts/install-deps.sh

started=()
cleanup() {
  if [ ${#started[@]} -gt 0 ]; then
    scripts/stores.sh stop "${started[@]}" >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT
for store in postgres mariadb redis etcd zookeeper moto; do
  out=$(scripts/stores.sh start "$store" 2>&1) || { echo "$out" >&2; exit 1; }
  echo "$out" >&2
  case "$out" in *"already up"*) ;; *) started+=("$store") ;; esac
done
eval "$(scripts/stores.sh env)"

command="scripts/bench.sh${*:+ $*}"
cargo build --profile bench-fast -p leasehold-bench
bench() { cargo run --quiet --profile bench-fast -p leasehold-bench -- "$@"; }
bench run --json "$json" --command "$command" "$@"
bench render "$json" "$doc"
echo "bench: wrote $json and rendered it into $doc" >&2
