#!/usr/bin/env bash
# Installs what the stores and the build need, if missing: Debian packages (etcd,
# Redis, ZooKeeper, protoc for etcd-client, Postgres, MariaDB, SQLite, libfaketime for the SQLite clock-step
# test) and moto (S3 + DynamoDB emulator) in a venv under ~/.cache. Idempotent and
# quiet when everything is there.
set -euo pipefail

need_apt=()
command -v etcd >/dev/null || need_apt+=(etcd-server)
command -v etcdctl >/dev/null || need_apt+=(etcd-client)
command -v redis-server >/dev/null || need_apt+=(redis-server)
command -v protoc >/dev/null || need_apt+=(protobuf-compiler)
[ -f /usr/include/google/protobuf/descriptor.proto ] || need_apt+=(libprotobuf-dev)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt+=(postgresql)
command -v mariadbd >/dev/null || need_apt+=(mariadb-server)
# ZooKeeper 3.8 (run by scripts/stores.sh from its jars; zkCli.sh for the foreign-writer tests).
[ -x /usr/share/zookeeper/bin/zkCli.sh ] || need_apt+=(zookeeper)
command -v java >/dev/null || need_apt+=(default-jre-headless)
command -v python3 >/dev/null || need_apt+=(python3 python3-venv)
# The stores' own command-line clients, which the foreign-writer tests run.
command -v psql >/dev/null || need_apt+=(postgresql-client)
command -v sqlite3 >/dev/null || need_apt+=(sqlite3)
command -v mariadb >/dev/null || need_apt+=(mariadb-client)
command -v redis-cli >/dev/null || need_apt+=(redis-tools)
# libfaketime: the SQLite clock-step test runs a process with its wall clock stepped.
ls /usr/lib/*/faketime/libfaketimeMT.so.1 >/dev/null 2>&1 || need_apt+=(faketime)

if [ ${#need_apt[@]} -gt 0 ]; then
  echo "install-deps: apt-get install ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

VENV="${LEASEHOLD_VENV:-$HOME/.cache/leasehold-venv}"
if [ ! -x "$VENV/bin/moto_server" ]; then
  echo "install-deps: moto[server] into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q 'moto[server]>=5,<6'
fi
