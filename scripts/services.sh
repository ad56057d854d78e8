#!/usr/bin/env bash
# Private PostgreSQL+PostGIS and Redis instances for development and tests.
#
#   scripts/services.sh start dev|test   start (idempotent) and print env lines
#   scripts/services.sh stop  dev|test   stop the instances of that profile
#   scripts/services.sh env   dev|test   print the env lines only
#
# Each profile has its own ports and its own data under .data/<profile>, so
# it never collides with a system instance or with the other profile. The
# test profile is wiped on every start: a test run never sees leftovers.
set -euo pipefail

cmd=${1:-}; profile=${2:-dev}
root=$(cd "$(dirname "$0")/.." && pwd)
pgbin=/usr/lib/postgresql/15/bin

case "$profile" in
  dev)  pgport=${GEOGATE_PG_PORT:-55432}; redisport=${GEOGATE_REDIS_PORT:-56379} ;;
  test) pgport=${GEOGATE_TEST_PG_PORT:-55433}; redisport=${GEOGATE_TEST_REDIS_PORT:-56380} ;;
  *) echo "unknown profile: $profile (want dev or test)" >&2; exit 2 ;;
esac

datadir="$root/.data/$profile"

log() { echo "services: $*" >&2; }

ensure_packages() {
  local want=()
  [ -x "$pgbin/postgres" ] || want+=(postgresql-15)
  [ -f /usr/share/postgresql/15/extension/postgis.control ] || want+=(postgresql-15-postgis-3)
  command -v redis-server >/dev/null || want+=(redis-server)
  [ ${#want[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    log "missing ${want[*]}; install them (apt-get install ${want[*]}) or set DATABASE_URL/REDIS_URL"; exit 1
  fi
  log "installing ${want[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq "${want[@]}" >&2
}

# PostgreSQL refuses to run as root, so as root the cluster belongs to the
# postgres user. That user must be able to reach the data folder; when the
# checkout sits under a private home, fall back to a folder under /tmp.
as_pg() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

pg_dir() {
  local d="$datadir/pg"
  if [ "$(id -u)" -eq 0 ]; then
    mkdir -p "$datadir"
    if ! runuser -u postgres -- test -x "$datadir"; then
      d="/tmp/geogate-$(echo "$root" | cksum | cut -d' ' -f1)/$profile/pg"
    fi
  fi
  echo "$d"
}

pg_start() {
  local d; d=$(pg_dir)
  if [ -f "$d/postmaster.pid" ] && as_pg "$pgbin/pg_ctl" -D "$d" status >/dev/null 2>&1; then
    return 0
  fi
  if [ ! -f "$d/PG_VERSION" ]; then
    mkdir -p "$d"
    [ "$(id -u)" -eq 0 ] && chown -R postgres: "$(dirname "$d")"
    as_pg "$pgbin/initdb" -D "$d" -U geogate --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
    cat >>"$d/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $pgport
unix_socket_directories = '$d'
max_connections = 200
shared_buffers = 256MB
jit = off
CONF
    if [ "$profile" = test ]; then
      printf 'fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n' >>"$d/postgresql.conf"
    fi
  fi
  if ! as_pg "$pgbin/pg_ctl" -D "$d" -l "$d/server.log" -w -t 30 start >/dev/null; then
    log "PostgreSQL did not start on port $pgport; the end of $d/server.log:"
    tail -n 5 "$d/server.log" >&2
    exit 1
  fi
  as_pg "$pgbin/psql" -h 127.0.0.1 -p "$pgport" -U geogate -d postgres -tAc \
    "SELECT 1 FROM pg_database WHERE datname='geogate'" | grep -q 1 ||
    as_pg "$pgbin/createdb" -h 127.0.0.1 -p "$pgport" -U geogate geogate
}

pg_stop() {
  local d; d=$(pg_dir)
  [ -f "$d/postmaster.pid" ] && as_pg "$pgbin/pg_ctl" -D "$d" -m fast -w stop >/dev/null 2>&1 || true
}

redis_start() {
  mkdir -p "$datadir/redis"
  if redis-cli -p "$redisport" ping >/dev/null 2>&1; then return 0; fi
  redis-server --port "$redisport" --bind 127.0.0.1 --dir "$datadir/redis" \
    --daemonize yes --pidfile "$datadir/redis/redis.pid" --logfile "$datadir/redis/redis.log" \
    --save "" --appendonly no >/dev/null
  for _ in $(seq 1 50); do
    redis-cli -p "$redisport" ping >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  log "redis on port $redisport did not start; see $datadir/redis/redis.log"; exit 1
}

redis_stop() {
  redis-cli -p "$redisport" shutdown nosave >/dev/null 2>&1 || true
}

print_env() {
  echo "DATABASE_URL=postgres://geogate@127.0.0.1:$pgport/geogate?sslmode=disable"
  echo "REDIS_URL=redis://127.0.0.1:$redisport/0"
}

case "$cmd" in
  start)
    ensure_packages
    if [ "$profile" = test ]; then
      pg_stop; redis_stop
      rm -rf "$datadir" "$(pg_dir)"
    fi
    pg_start
    redis_start
    print_env
    ;;
  stop) pg_stop; redis_stop ;;
  env) print_env ;;
  *) echo "usage: $0 start|stop|env dev|test" >&2; exit 2 ;;
esac
