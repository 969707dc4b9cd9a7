#!/usr/bin/env bash
# Packages every publishable crate of the workspace as `cargo publish` would (each
# tarball unpacked and built on its own against the others), without uploading.
# The unpublished ones (publish = false: benchmarks, examples, tests) are left out.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t crates < <(cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
for p in json.load(sys.stdin)["packages"]:
    if p.get("publish") != []:
        print(p["name"])')
[ ${#crates[@]} -gt 0 ] || { echo "package: no publishable crate found" >&2; exit 1; }
args=(); for c in "${crates[@]}"; do args+=(-p "$c"); done
# cargo verifies each tarball against the others through a local registry, and treats
# what it unpacked and built from there as immutable, like any registry crate: a later
# run of the same version would reuse that stale copy and its build. So the packages
# are built in a target dir of their own (kept, for the dependencies), from which our
# crates' unpacked sources and builds are removed first.
target=$(cargo metadata --no-deps --format-version 1 | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
export CARGO_TARGET_DIR="$target/package-verify"
rm -rf "$CARGO_TARGET_DIR/package" "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/leasehold-*
rm -rf "$CARGO_TARGET_DIR"/debug/.fingerprint/leasehold-* "$CARGO_TARGET_DIR"/debug/deps/*leasehold*
echo "package: ${crates[*]}"
CARGO_PROFILE_DEV_DEBUG=0 cargo package --quiet "${args[@]}" "$@"
