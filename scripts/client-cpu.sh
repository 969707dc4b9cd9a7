#!/usr/bin/env bash
# What the lease client costs the caller's process in CPU, on top of the store crate's
# own calls (docs/PERFORMANCE.md, "The lease client's own cost"): rounds of acquire +
# release pairs through the library, alternated with rounds of the same writes sent by
# the store crate alone, and the process's CPU time per operation of each.
#
#   scripts/client-cpu.sh STORE [ROUNDS] [PAIRS] [--idle-us N]
#                          (default: 10 rounds of 1,000 pairs; with --idle-us, the thread
#                          sleeps N µs before each operation, not timed)
#
# STORE is one of memory, postgres, sqlite, mysql, etcd, zookeeper, dynamo, s3, redis.
# Starts the project's store for it (scripts/stores.sh) and runs `leasehold-bench
# client-cpu`. CPU time leaves out waiting for a time slice, but other work on the same
# cores still raises it (shared caches): run it on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  memory|sqlite) ;;
  postgres|redis|etcd|zookeeper) scripts/stores.sh start "$1" >/dev/null ;;
  mysql) scripts/stores.sh start mariadb >/dev/null ;;
  dynamo|s3) scripts/stores.sh start moto >/dev/null ;;
  *) echo "usage: scripts/client-cpu.sh STORE [ROUNDS] [PAIRS] [--idle-us N]" >&2; exit 2 ;;
esac
eval "$(scripts/stores.sh env)"
cargo run -q --profile bench-fast -p leasehold-bench -- client-cpu "$@"
