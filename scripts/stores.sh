#!/usr/bin/env bash
# Starts and stops the real stores the tests and benchmarks use, each on a loopback
# port of its own with its data under $LEASEHOLD_STORES_DIR (so a store already running
# on a standard port never matters).
#
#   scripts/stores.sh start [postgres mariadb redis etcd etcd-cluster moto zookeeper zookeeper-ensemble ...]   (default: all)
#   scripts/stores.sh stop  [...]
#   scripts/stores.sh restart NAME
#   scripts/stores.sh env            # prints the LEASEHOLD_* variables tests read
#
# Every start waits until the store answers, with a deadline, and fails loudly.
set -euo pipefail

DIR="${LEASEHOLD_STORES_DIR:-/tmp/leasehold-stores}"
PG_PORT="${LEASEHOLD_PG_PORT:-55432}"
REDIS_PORT="${LEASEHOLD_REDIS_PORT:-56379}"
ETCD_PORT="${LEASEHOLD_ETCD_PORT:-52379}"
ETCD_PEER_PORT=$((ETCD_PORT + 1))
ETCD_CLUSTER_BASE="${LEASEHOLD_ETCD_CLUSTER_BASE:-52400}"   # clients 52400..2, peers 52410..2
MOTO_PORT="${LEASEHOLD_MOTO_PORT:-55000}"
MYSQL_PORT="${LEASEHOLD_MYSQL_PORT:-55306}"
ZK_PORT="${LEASEHOLD_ZK_PORT:-52181}"
ZK_ENSEMBLE_BASE="${LEASEHOLD_ZK_ENSEMBLE_BASE:-52281}"   # clients 52281..3, quorum 52291..3, election 52296..8
# ZooKeeper's tick: the shortest session timeout is 2 ticks (200 ms here), so the tests'
# leases of one second expire in about a second, not ZooKeeper's default 4 s.
ZK_TICK_MS="${LEASEHOLD_ZK_TICK_MS:-100}"
VENV="${LEASEHOLD_VENV:-$HOME/.cache/leasehold-venv}"
# The three-member cluster's Raft timing. etcd's shortest lease is ceil(1.5 election
# timeouts) seconds: 2 s with these defaults, 1 s with 50/500 (the long torture runs).
ETCD_HEARTBEAT_MS="${LEASEHOLD_ETCD_HEARTBEAT_MS:-100}"
ETCD_ELECTION_MS="${LEASEHOLD_ETCD_ELECTION_MS:-1000}"
ALL=(postgres mariadb redis etcd etcd-cluster moto zookeeper zookeeper-ensemble)

log() { echo "stores: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

wait_for() { # what seconds command...
  local what=$1 secs=$2; shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || die "$what not ready after ${secs}s"
    sleep 0.1
  done
}

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

stop_pidfile() { # pidfile
  local f=$1
  if pid_alive "$f"; then
    local pid; pid=$(cat "$f")
    kill -CONT "$pid" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }

start_postgres() {
  local bin; bin=$(pg_bin); [ -n "$bin" ] || die "postgres binaries not found (run scripts/install-deps.sh)"
  local d="$DIR/postgres"
  if "$bin/pg_isready" -h 127.0.0.1 -p "$PG_PORT" -q 2>/dev/null; then log "postgres already up on $PG_PORT"; return; fi
  mkdir -p "$d"; chmod 755 "$DIR"; chown postgres:postgres "$d" 2>/dev/null || true
  if [ ! -f "$d/data/PG_VERSION" ]; then
    rm -rf "$d/data"
    runuser -u postgres -- "$bin/initdb" -D "$d/data" -U postgres --auth=trust -E UTF8 >"$d/initdb.log" 2>&1 \
      || { cat "$d/initdb.log" >&2; die "initdb failed"; }
  fi
  # Durable settings on purpose: fsync and synchronous_commit stay on.
  runuser -u postgres -- "$bin/pg_ctl" -D "$d/data" -l "$d/postgres.log" -w -t 30 \
    -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $d -c fsync=on -c synchronous_commit=on -c max_connections=200" start >/dev/null \
    || { tail -20 "$d/postgres.log" >&2; die "postgres failed to start"; }
  wait_for postgres 30 "$bin/pg_isready" -h 127.0.0.1 -p "$PG_PORT" -q
  log "postgres up on 127.0.0.1:$PG_PORT"
}

stop_postgres() {
  local bin; bin=$(pg_bin)
  local d="$DIR/postgres"
  if [ -f "$d/data/postmaster.pid" ]; then
    runuser -u postgres -- "$bin/pg_ctl" -D "$d/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
}

mariadb_ready() { mariadb --no-defaults -h 127.0.0.1 -P "$MYSQL_PORT" -u root -e 'SELECT 1'; }

# A MariaDB of its own: --no-defaults everywhere, so /etc/mysql (and a server the machine
# may already run on 3306) never matters. Durable on purpose: InnoDB with
# innodb_flush_log_at_trx_commit=1 and the binary log off (one server, no replicas).
start_mariadb() {
  command -v mariadbd >/dev/null || die "mariadbd not found (run scripts/install-deps.sh)"
  local d="$DIR/mariadb"
  if pid_alive "$d/mariadb.pid" && mariadb_ready >/dev/null 2>&1; then log "mariadb already up on $MYSQL_PORT"; return; fi
  # A tmpdir of its own: a starting mariadbd deletes every `#sql*` file in its tmpdir,
  # so with the shared /tmp one instance's start broke another's bootstrap, whose
  # temporary tables live there ("Unknown table 'mysql.tmp_user_sys'").
  mkdir -p "$d/tmp"; chmod 755 "$DIR"; chown mysql:mysql "$d" "$d/tmp" 2>/dev/null || true
  if [ ! -d "$d/data/mysql" ]; then
    rm -rf "$d/data"
    mariadb-install-db --no-defaults --datadir="$d/data" --tmpdir="$d/tmp" --user=mysql \
      --auth-root-authentication-method=normal --skip-test-db >"$d/install.log" 2>&1 \
      || { cat "$d/install.log" >&2; die "mariadb-install-db failed"; }
  fi
  nohup runuser -u mysql -- mariadbd --no-defaults --datadir="$d/data" --tmpdir="$d/tmp" --port="$MYSQL_PORT" \
    --bind-address=127.0.0.1 --socket="$d/mariadb.sock" --pid-file="$d/mariadb.pid" --log-error="$d/mariadb.log" \
    --default-storage-engine=InnoDB --innodb-flush-log-at-trx-commit=1 --max-connections=300 >/dev/null 2>&1 &
  local deadline=$((SECONDS + 60))
  until mariadb_ready >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || { tail -20 "$d/mariadb.log" >&2; die "mariadb not ready after 60s"; }
    sleep 0.1
  done
  mariadb --no-defaults -h 127.0.0.1 -P "$MYSQL_PORT" -u root -e 'CREATE DATABASE IF NOT EXISTS leasehold' \
    || die "mariadb: cannot create database leasehold"
  log "mariadb up on 127.0.0.1:$MYSQL_PORT"
}

# A crash stop, as Postgres's `-m immediate`: SIGKILL, and InnoDB recovers from its redo
# log at the next start (every commit was flushed: innodb_flush_log_at_trx_commit=1).
stop_mariadb() {
  local f="$DIR/mariadb/mariadb.pid"
  if pid_alive "$f"; then
    local pid; pid=$(cat "$f")
    kill -9 "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  fi
  rm -f "$f"
}

start_redis() {
  local d="$DIR/redis"; mkdir -p "$d"
  if pid_alive "$d/redis.pid"; then log "redis already up on $REDIS_PORT"; return; fi
  redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --daemonize yes --dir "$d" --pidfile "$d/redis.pid" \
    --logfile "$d/redis.log" --save '' --appendonly no >/dev/null
  wait_for redis 20 redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping
  log "redis up on 127.0.0.1:$REDIS_PORT"
}

stop_redis() { stop_pidfile "$DIR/redis/redis.pid"; }

etcd_healthy() { ETCDCTL_API=3 etcdctl --endpoints="$1" --dial-timeout=1s endpoint health; }

start_etcd() {
  local d="$DIR/etcd"; mkdir -p "$d"
  if pid_alive "$d/etcd.pid"; then log "etcd already up on $ETCD_PORT"; return; fi
  nohup etcd --name s1 --data-dir "$d/data" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "s1=http://127.0.0.1:$ETCD_PEER_PORT" >"$d/etcd.log" 2>&1 &
  echo $! >"$d/etcd.pid"
  wait_for etcd 30 etcd_healthy "http://127.0.0.1:$ETCD_PORT"
  log "etcd up on 127.0.0.1:$ETCD_PORT"
}

stop_etcd() { stop_pidfile "$DIR/etcd/etcd.pid"; }

etcd_cluster_initial() {
  local s="" i
  for i in 0 1 2; do s+="m$i=http://127.0.0.1:$((ETCD_CLUSTER_BASE + 10 + i)),"; done
  echo "${s%,}"
}

# One member of the three-member cluster; also used to restart a killed member.
start_etcd_member() { # index
  local i=$1 d="$DIR/etcd-cluster/m$1"; mkdir -p "$d"
  if pid_alive "$d/etcd.pid"; then return; fi
  local c=$((ETCD_CLUSTER_BASE + i)) p=$((ETCD_CLUSTER_BASE + 10 + i)) state=new
  [ -d "$d/data/member" ] && state=existing
  nohup etcd --name "m$i" --data-dir "$d/data" \
    --listen-client-urls "http://127.0.0.1:$c" --advertise-client-urls "http://127.0.0.1:$c" \
    --listen-peer-urls "http://127.0.0.1:$p" --initial-advertise-peer-urls "http://127.0.0.1:$p" \
    --initial-cluster "$(etcd_cluster_initial)" --initial-cluster-state "$state" \
    --initial-cluster-token leasehold-test --heartbeat-interval "$ETCD_HEARTBEAT_MS" --election-timeout "$ETCD_ELECTION_MS" >>"$d/etcd.log" 2>&1 &
  echo $! >"$d/etcd.pid"
}

# The three members of the etcd cluster or the ZooKeeper ensemble: each started with
# start_KIND_member, then each waited for (at most SECONDS) until KIND_member_up says it
# serves.
start_members() { # kind name-of-a-member seconds
  local i
  for i in 0 1 2; do "start_$1_member" "$i"; done
  for i in 0 1 2; do wait_for "$2$i" "$3" "$1_member_up" "$i"; done
}

etcd_member_up() { etcd_healthy "http://127.0.0.1:$((ETCD_CLUSTER_BASE + $1))"; }

start_etcd-cluster() {
  start_members etcd "etcd member m" 30
  log "etcd cluster up on 127.0.0.1:$ETCD_CLUSTER_BASE-$((ETCD_CLUSTER_BASE + 2))"
}

stop_etcd-cluster() { local i; for i in 0 1 2; do stop_pidfile "$DIR/etcd-cluster/m$i/etcd.pid"; done; }

moto_ready() { curl -sf "http://127.0.0.1:$MOTO_PORT/moto-api/" -o /dev/null || python3 -c "import urllib.request;urllib.request.urlopen('http://127.0.0.1:$MOTO_PORT/moto-api/',timeout=1)"; }

start_moto() {
  local d="$DIR/moto"; mkdir -p "$d"
  if pid_alive "$d/moto.pid"; then log "moto already up on $MOTO_PORT"; return; fi
  [ -x "$VENV/bin/moto_server" ] || die "moto_server not found in $VENV (run scripts/install-deps.sh)"
  # One request at a time: moto's own server applies racing conditional writes
  # non-atomically (see moto_serial.py).
  nohup "$VENV/bin/python" "$(dirname "$0")/moto_serial.py" 127.0.0.1 "$MOTO_PORT" >"$d/moto.log" 2>&1 &
  echo $! >"$d/moto.pid"
  wait_for moto 60 moto_ready
  log "moto (S3 + DynamoDB) up on 127.0.0.1:$MOTO_PORT"
}

stop_moto() { stop_pidfile "$DIR/moto/moto.pid"; }

# ZooKeeper (Debian's `zookeeper` package, run by hand: no system service, no /etc).
zk_cp="/usr/share/java/*:/usr/share/zookeeper/*"
zk_word() { # port word: a four-letter word's answer
  local port=$1 word=$2
  exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
  printf '%s' "$word" >&3
  timeout 2 cat <&3
  exec 3<&-
}
zk_serving() { zk_word "$1" srvr | grep -Eq '^Mode: (standalone|leader|follower)'; }

zk_config() { # dir clientPort [server lines...]
  local d=$1 port=$2; shift 2
  mkdir -p "$d/data"
  {
    echo "tickTime=$ZK_TICK_MS"
    echo "initLimit=50"
    echo "syncLimit=20"
    echo "dataDir=$d/data"
    echo "clientPort=$port"
    echo "clientPortAddress=127.0.0.1"
    echo "maxSessionTimeout=120000"
    echo "admin.enableServer=false"
    echo "4lw.commands.whitelist=ruok,srvr,stat,mntr"
    echo "maxClientCnxns=0"
    for line in "$@"; do echo "$line"; done
  } >"$d/zoo.cfg"
}

zk_launch() { # dir
  local d=$1
  ZOO_LOG_DIR="$d" nohup java -Xmx256m -Dzookeeper.log.dir="$d" -Dzookeeper.root.logger=WARN,CONSOLE \
    -cp "$zk_cp" org.apache.zookeeper.server.quorum.QuorumPeerMain "$d/zoo.cfg" >>"$d/zookeeper.log" 2>&1 &
  echo $! >"$d/zookeeper.pid"
}

start_zookeeper() {
  local d="$DIR/zookeeper"
  if pid_alive "$d/zookeeper.pid"; then log "zookeeper already up on $ZK_PORT"; return; fi
  zk_config "$d" "$ZK_PORT"
  zk_launch "$d"
  wait_for zookeeper 60 zk_serving "$ZK_PORT"
  log "zookeeper up on 127.0.0.1:$ZK_PORT (tickTime $ZK_TICK_MS ms)"
}

stop_zookeeper() { stop_pidfile "$DIR/zookeeper/zookeeper.pid"; }

# One server of the three-server ensemble; also used to restart a killed one.
start_zookeeper_member() { # index 0..2
  local i=$1 d="$DIR/zookeeper-ensemble/s$1" j lines=()
  if pid_alive "$d/zookeeper.pid"; then return; fi
  for j in 0 1 2; do
    lines+=("server.$((j + 1))=127.0.0.1:$((ZK_ENSEMBLE_BASE + 10 + j)):$((ZK_ENSEMBLE_BASE + 15 + j))")
  done
  zk_config "$d" "$((ZK_ENSEMBLE_BASE + i))" "${lines[@]}"
  echo $((i + 1)) >"$d/data/myid"
  zk_launch "$d"
}

zookeeper_member_up() { zk_serving "$((ZK_ENSEMBLE_BASE + $1))"; }

start_zookeeper-ensemble() {
  start_members zookeeper "zookeeper server s" 90
  log "zookeeper ensemble up on 127.0.0.1:$ZK_ENSEMBLE_BASE-$((ZK_ENSEMBLE_BASE + 2))"
}

stop_zookeeper-ensemble() { local i; for i in 0 1 2; do stop_pidfile "$DIR/zookeeper-ensemble/s$i/zookeeper.pid"; done; }

print_env() {
  cat <<ENV
export LEASEHOLD_STORES_DIR=$DIR
export LEASEHOLD_STORES_SCRIPT=$(cd "$(dirname "$0")" && pwd)/stores.sh
export LEASEHOLD_PG_URL=postgres://postgres@127.0.0.1:$PG_PORT/postgres
export LEASEHOLD_REDIS_URL=redis://127.0.0.1:$REDIS_PORT/
export LEASEHOLD_ETCD_ENDPOINTS=http://127.0.0.1:$ETCD_PORT
export LEASEHOLD_ETCD_CLUSTER_ENDPOINTS=http://127.0.0.1:$ETCD_CLUSTER_BASE,http://127.0.0.1:$((ETCD_CLUSTER_BASE + 1)),http://127.0.0.1:$((ETCD_CLUSTER_BASE + 2))
export LEASEHOLD_MOTO_ENDPOINT=http://127.0.0.1:$MOTO_PORT
export LEASEHOLD_MYSQL_URL=mysql://root@127.0.0.1:$MYSQL_PORT/leasehold
export LEASEHOLD_ZK_ADDR=127.0.0.1:$ZK_PORT
export LEASEHOLD_ZK_TICK_MS=$ZK_TICK_MS
export LEASEHOLD_ZK_ENSEMBLE=127.0.0.1:$ZK_ENSEMBLE_BASE,127.0.0.1:$((ZK_ENSEMBLE_BASE + 1)),127.0.0.1:$((ZK_ENSEMBLE_BASE + 2))
ENV
}

# The ports above sit inside Linux's ephemeral range (32768-60999): a client's outgoing
# connection may take one as its source port and a store (or a test's own instance)
# then fails to bind. Reserve the project's ranges so the kernel never hands them out.
reserve_ports() {
  local f=/proc/sys/net/ipv4/ip_local_reserved_ports want="52181-52299,52379-52699,55000-55699,56379-56599"
  [ -w "$f" ] || { log "note: cannot reserve ports ($f not writable)"; return 0; }
  local cur; cur=$(cat "$f")
  case ",$cur," in *",$want,"*) return 0 ;; esac
  echo "${cur:+$cur,}$want" >"$f" 2>/dev/null || log "note: could not reserve ports"
}

cmd=${1:-}; shift || true
names=("$@"); [ ${#names[@]} -gt 0 ] || names=("${ALL[@]}")
mkdir -p "$DIR"
case "$cmd" in
  start) reserve_ports; for n in "${names[@]}"; do "start_$n"; done ;;
  stop) for n in "${names[@]}"; do "stop_$n"; done ;;
  restart) for n in "${names[@]}"; do "stop_$n"; "start_$n"; done ;;
  start-etcd-member) start_etcd_member "${names[0]}" ;;
  start-zookeeper-member) start_zookeeper_member "${names[0]}" ;;
  env) print_env ;;
  *) die "usage: $0 start|stop|restart|env [${ALL[*]}]" ;;
esac
