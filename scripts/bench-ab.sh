#!/usr/bin/env bash
# A before/after comparison of two commits on the overhead table: builds the
# `leasehold-bench` binary of each (bench-fast profile, one shared target dir), runs them
# alternately (A, B, A, B, ...) so that both see the same machine, and prints for each
# store and operation the median over the runs of the library's p50 gap over the floor
# (and of the p50 ratio). Each run's own comparison is interleaved; alternating the
# binaries keeps a drift of the machine from landing on one side.
#
#   scripts/bench-ab.sh REV_A [REV_B] [--stores sqlite] [--runs 10]
#
# REV_B defaults to the working tree (uncommitted changes included). Results (one JSON
# file per run) go to $LEASEHOLD_STORES_DIR/bench-ab/. Run it on an otherwise quiet
# machine: never during builds or torture runs. The first run builds each side from cold
# (several minutes each on two cores).
set -euo pipefail
cd "$(dirname "$0")/.."

[ $# -ge 1 ] || { sed -n '2,14p' "$0"; exit 64; }
rev_a=$1; shift
rev_b=
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then rev_b=$1; shift; fi
stores=sqlite runs=10
while [ $# -gt 0 ]; do
    case $1 in
        --stores) stores=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        *) echo "bench-ab: unknown argument $1" >&2; exit 64 ;;
    esac
done

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/leasehold-target}
work=$(mktemp -d /tmp/leasehold-bench-ab.XXXXXX)
# The stores the benchmark needs (SQLite and the memory store need none). As in
# scripts/bench.sh, stores that were already up stay up; the ones started here stop.
started=()
cleanup() {
    if [ ${#started[@]} -gt 0 ]; then scripts/stores.sh stop "${started[@]}" >/dev/null 2>&1 || true; fi
    for w in "$work"/tree-*; do [ -d "$w" ] && git worktree remove --force "$w"; done
    rm -rf "$work"
}
trap cleanup EXIT
needed=()
for store in ${stores//,/ }; do
    case $store in
        memory | sqlite) ;;
        mysql) needed+=(mariadb) ;;
        dynamo | s3) needed+=(moto) ;;
        *) needed+=("$store") ;;
    esac
done
for store in $(printf '%s\n' "${needed[@]}" | sort -u); do
    up=$(scripts/stores.sh start "$store" 2>&1) || { echo "$up" >&2; exit 1; }
    case "$up" in *"already up"*) ;; *) started+=("$store") ;; esac
done
eval "$(scripts/stores.sh env)"
out="$LEASEHOLD_STORES_DIR/bench-ab"
mkdir -p "$out"

# build SIDE REV: the binary of REV (empty: the working tree) as $work/SIDE
build() {
    local side=$1 rev=$2 dir=.
    if [ -n "$rev" ]; then
        dir="$work/tree-$side"
        git worktree add --quiet --detach "$dir" "$rev"
    fi
    # Each side in a target dir of its own (kept for the next run): cargo names a
    # workspace crate's build by its path relative to the workspace, so two checkouts
    # sharing one target dir can be handed each other's builds.
    local target="$CARGO_TARGET_DIR/bench-ab-$side"
    (cd "$dir" && CARGO_TARGET_DIR=$target cargo build --quiet --profile bench-fast -p leasehold-bench --bin leasehold-bench)
    cp "$target/bench-fast/leasehold-bench" "$work/$side"
}
build a "$rev_a"
build b "$rev_b"

for i in $(seq 1 "$runs"); do
    for side in a b; do
        "$work/$side" run --stores "$stores" --json "$out/$side-$i.json" > "$out/$side-$i.log" 2>&1 \
            || { echo "bench-ab: run $i of $side failed, see $out/$side-$i.log" >&2; exit 1; }
    done
    echo "bench-ab: run $i of $runs done" >&2
done

python3 - "$out" "$runs" "$rev_a" "${rev_b:-working tree}" <<'EOF'
import json, statistics, sys
out, runs, names = sys.argv[1], int(sys.argv[2]), {"a": sys.argv[3], "b": sys.argv[4]}
gaps = {}
for i in range(1, runs + 1):
    for side in "ab":
        for store in json.load(open(f"{out}/{side}-{i}.json"))["overhead"]:
            for op in store["ops"]:
                lib, flo = op["library"]["p50_us"], op["floor"]["p50_us"]
                gaps.setdefault((store["store"], op["op"]), {}).setdefault(side, []).append((lib - flo, lib / flo, lib, flo))
# The gap is what a change to the library moves; the library's and the floor's own p50
# show whether the machine (or the floor) moved too.
print(f"median over {runs} alternated runs of each: library p50 - floor p50 (p50 ratio) [library p50 / floor p50]")
print(f"{'store':10} {'operation':18} {'A: ' + names['a']:>40} {'B: ' + names['b']:>40}")
for (store, op), sides in gaps.items():
    cells = []
    for side in "ab":
        xs = sides.get(side, [])
        med = lambda k: statistics.median(x[k] for x in xs)
        cells.append(f"{med(0):+7.1f} us ({med(1):.3f}) [{med(2):.0f} / {med(3):.0f} us]" if xs else "-")
    print(f"{store:10} {op:18} {cells[0]:>40} {cells[1]:>40}")
EOF
