#!/usr/bin/env bash
# The whole test suite: installs what is missing, starts every store the tests need on
# loopback ports of their own, runs all tests against them, and stops the stores.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
trap 'scripts/stores.sh stop >/dev/null 2>&1 || true' EXIT
scripts/stores.sh stop >/dev/null 2>&1 || true
scripts/stores.sh start
eval "$(scripts/stores.sh env)"

cargo test --workspace --all-features --no-fail-fast "$@"
