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
echo "package: ${crates[*]}"
CARGO_PROFILE_DEV_DEBUG=0 cargo package --quiet "${args[@]}" "$@"
