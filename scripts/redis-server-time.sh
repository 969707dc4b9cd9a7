#!/usr/bin/env bash
# What the library's Redis script costs the server, next to the one-key design the store
# did not take, the fenced floor's and the classic lock's (docs/PERFORMANCE.md, section 1,
# Redis): microseconds of server time per operation, by Redis's own accounting (INFO
# commandstats), free of the network and the client; beside it, the benchmark process's
# own CPU time per operation of each side (the client's half of the same calls).
#
#   scripts/redis-server-time.sh [ROUNDS] [PAIRS]     (default: 15 rounds of 2,000 pairs)
#
# Starts the project's Redis (scripts/stores.sh) and runs `leasehold-bench
# redis-server-time`, which resets the server's statistics before each round: run it
# when nothing else uses that Redis (not beside the tests or a benchmark).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/stores.sh start redis >/dev/null
eval "$(scripts/stores.sh env)"
cargo run -q --profile bench-fast -p leasehold-bench -- redis-server-time "$@"
