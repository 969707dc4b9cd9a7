#!/usr/bin/env bash
# What the library's Postgres statements cost the server, next to the bare lock's
# (docs/PERFORMANCE.md, section 1, Postgres): the server's CPU and the latency per
# acquire + release pair, measured with pgbench on the statements themselves.
#
#   scripts/pg-statement-cpu.sh [ROUNDS] [PAIRS]      (default: 3 rounds of 10,000 pairs)
#
# 1. `leasehold run` takes and releases one lease on the project's Postgres (started by
#    scripts/stores.sh) while the server logs statements: the claim and the release the
#    library sends, exactly as sent.
# 2. Each side gets a table of its own; pgbench runs each pair (claim, then release of
#    what it granted) on one connection, prepared, the sides alternating round by round.
#    synchronous_commit is off for these sessions, so no WAL flush waits: what is left is
#    the statements' own cost.
# 3. The server's CPU is read from a cpuacct cgroup (v1) holding the postmaster and its
#    children (the backends pgbench connects to are forked into it): every process of the
#    server is counted, the backends that exit with their run too.
#
# Prints one line per run and side; needs root (the cgroup) and the machine's pgbench.
# The server's processes stay in the cgroup until it restarts (harmless).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
PAIRS=${2:-10000}
die() { echo "pg-statement-cpu: $*" >&2; exit 1; }
command -v pgbench >/dev/null || die "pgbench is missing (Debian: postgresql-client)"
scripts/stores.sh start postgres >/dev/null
eval "$(scripts/stores.sh env)"
url=$LEASEHOLD_PG_URL
log=$LEASEHOLD_STORES_DIR/postgres/postgres.log
data=$LEASEHOLD_STORES_DIR/postgres/data
cg=/sys/fs/cgroup/cpuacct
[ -w "$cg/tasks" ] || die "no writable cpuacct cgroup (v1) at $cg"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cargo build -q -p leasehold-cli
bin=${CARGO_TARGET_DIR:-target}/debug/leasehold
"$bin" --store "$url" stores check --create >/dev/null
psql -qAt "$url" -c "ALTER SYSTEM SET log_statement = 'all'" -c "SELECT pg_reload_conf()" >/dev/null
from=$(wc -l <"$log")
"$bin" --store "$url" run --ttl 30s pg-statement-cpu/probe -- true
psql -qAt "$url" -c "ALTER SYSTEM RESET log_statement" -c "SELECT pg_reload_conf()" >/dev/null

# The statements as logged ("execute <name>: SQL"), turned into pgbench scripts.
cat >"$work/extract.py" <<'EOF'
import re, sys
work = sys.argv[1]
sql = [re.sub(r'^.*?execute [^:]*: ', '', l.rstrip('\n')) for l in sys.stdin if ' execute ' in l]
claim = next(s for s in sql if 'fence_token = l.fence_token + 1' in s)
release = next(s for s in sql if s.startswith(('WITH w AS (UPDATE', 'UPDATE')) and 'holder = NULL' in s)
table = re.search(r'INSERT INTO (\S+) AS l', claim).group(1)
def bind(s, names):
    s = s.replace(table, 'pgcpu_lib')
    for i in range(len(names), 0, -1):
        s = s.replace(f'${i}', f':{names[i - 1]}')
    assert not re.search(r'\$\d', s), s
    return s
with open(f'{work}/lib.sql', 'w') as f:
    f.write(bind(claim, ['name', 'holder', 'ttl', 'wall']) + ' \\gset c_\n')
    f.write(bind(release, ['name', 'holder', 'c_fence_token', 'c_version']) + ';\n')
with open(f'{work}/table', 'w') as f:
    f.write(table)
EOF
tail -n +"$((from + 1))" "$log" | python3 "$work/extract.py" "$work"
# The bare lock's statements (crates/lease-bench/src/backends/postgres.rs).
cat >"$work/floor.sql" <<'EOF'
INSERT INTO pgcpu_floor AS l (name, holder, token, expires_at) VALUES (:name, :holder, 1, now() + :ttl * interval '1 millisecond') ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, token = l.token + 1, expires_at = EXCLUDED.expires_at WHERE l.holder IS NULL OR l.expires_at <= now() RETURNING token \gset f_
UPDATE pgcpu_floor SET holder = NULL WHERE name = :name AND holder = :holder AND token = :f_token;
EOF
PGOPTIONS="-c client_min_messages=warning" psql -q "$url" -c "DROP TABLE IF EXISTS pgcpu_lib, pgcpu_floor" \
  -c "CREATE TABLE pgcpu_lib (LIKE $(cat "$work/table") INCLUDING ALL)" \
  -c "CREATE TABLE pgcpu_floor (name text PRIMARY KEY, holder text, token bigint NOT NULL, expires_at timestamptz NOT NULL)"

mkdir -p "$cg/leasehold-pg"
postmaster=$(head -1 "$data/postmaster.pid")
for p in "$postmaster" $(pgrep -P "$postmaster"); do echo "$p" >"$cg/leasehold-pg/tasks"; done
cpu() { cat "$cg/leasehold-pg/cpuacct.usage"; }
wall=$(( $(date +%s%3N) + 30000 ))
for round in $(seq "$ROUNDS"); do
  for side in lib floor; do
    c0=$(cpu)
    lat=$(PGOPTIONS='-c synchronous_commit=off' pgbench -n -M prepared -c 1 -t "$PAIRS" -f "$work/$side.sql" \
      -D name=pg-statement-cpu -D holder=pgbench-holder -D ttl=30000 -D wall="$wall" "$url" 2>&1 |
      awk '/latency average/ {print $4 * 1000}')
    c1=$(cpu)
    [ -n "$lat" ] || die "pgbench failed on $side.sql"
    echo "round $round $side: server CPU $(( (c1 - c0) / PAIRS / 1000 )) µs per pair, latency $lat µs per pair"
  done
done
psql -q "$url" -c "DROP TABLE pgcpu_lib, pgcpu_floor"
