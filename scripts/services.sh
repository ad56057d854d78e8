#!/usr/bin/env bash
# Private PostgreSQL+PostGIS and Redis instances for development and tests.
#
#   scripts/services.sh start dev|test   start (or reuse) them and print env lines
#   scripts/services.sh stop  dev|test   stop the instances of that profile
#   scripts/services.sh env   dev|test   print the env lines only
#   scripts/services.sh install          install the missing packages (as root)
#
# The servers belong to this checkout and profile. Their data, pid files and
# ports live under .data/<profile>, and the script reuses or stops only a
# server it can prove it started there: a pid file in that folder whose
# process is alive, is the right program and works in that folder (both
# servers chdir into their data folder, /proc/PID/cwd shows it). Whatever
# else answers on a port is never reused and never stopped, so two
# checkouts, or `make run` (dev) beside `make test` (test), cannot stop or
# share each other's servers.
#
# Ports: the requested ones are GEOGATE_PG_PORT and GEOGATE_REDIS_PORT (dev,
# default 55432 and 56379) or GEOGATE_TEST_PG_PORT and GEOGATE_TEST_REDIS_PORT
# (test, 55433 and 56380). When something else holds one, start takes the
# next free port, says on stderr who held it, and remembers the choice in
# .data/<profile>/ports, so that env, stop and the next start agree (while
# the requested port stays held, a later start takes the same other port
# again, so clients configured with it keep working). The env lines
# (DATABASE_URL=..., REDIS_URL=...) always carry the ports in use.
#
# The test profile is wiped on every start: a test run never sees leftovers.
set -euo pipefail

cmd=${1:-}; profile=${2:-dev}
root=$(cd "$(dirname "$0")/.." && pwd)
pgbin=/usr/lib/postgresql/15/bin

case "$profile" in
  # The dev profile has a replica only when asked (make bench's replicas
  # case asks); a start that does not ask stops one left running.
  dev)  pgwant=${GEOGATE_PG_PORT:-55432}; rediswant=${GEOGATE_REDIS_PORT:-56379}
        replwant=""; [ "${GEOGATE_DEV_REPLICA:-}" = 1 ] && replwant=${GEOGATE_PG_REPLICA_PORT:-55435} ;;
  test) pgwant=${GEOGATE_TEST_PG_PORT:-55433}; rediswant=${GEOGATE_TEST_REDIS_PORT:-56380}
        replwant=${GEOGATE_TEST_PG_REPLICA_PORT:-55434} ;;
  *) echo "unknown profile: $profile (want dev or test)" >&2; exit 2 ;;
esac
case "$cmd" in start|stop|env|install) ;; *) echo "usage: $0 start|stop|env dev|test, or $0 install" >&2; exit 2 ;; esac

datadir="$root/.data/$profile"
redisdir="$datadir/redis"
portsfile="$datadir/ports"

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
# checkout sits under a private home, fall back to a folder under /tmp
# named after the checkout's path.
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
pgdata=$(pg_dir)

# --- whose process is it --------------------------------------------------

# works_in PID DIR: the process is alive and its working directory is DIR.
works_in() {
  [[ $1 =~ ^[0-9]+$ ]] && [ -d "$2" ] &&
    [ "$(readlink "/proc/$1/cwd" 2>/dev/null)" = "$(realpath "$2")" ]
}

# pg_pid prints the pid of this profile's PostgreSQL, or fails. The pid
# comes from postmaster.pid in our data folder; a stale file's pid may
# belong to any process by now, so it must also be a postgres working in
# that folder.
pg_pid() {
  local pid
  pid=$(head -n1 "$pgdata/postmaster.pid" 2>/dev/null) || return 1
  works_in "$pid" "$pgdata" && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = postgres ] || return 1
  echo "$pid"
}

# pg_running_port prints the port our PostgreSQL listens on (line 4 of
# postmaster.pid).
pg_running_port() { sed -n 4p "$pgdata/postmaster.pid"; }

# redis_pid [PORT] prints the pid of this profile's Redis, or fails: the
# pid in our pid file, alive, a redis-server working in our folder. Redis
# rewrites its command line to "redis-server 127.0.0.1:PORT"; given PORT,
# that must be the one.
redis_pid() {
  local pid title addr
  pid=$(cat "$redisdir/redis.pid" 2>/dev/null) || return 1
  works_in "$pid" "$redisdir" || return 1
  read -r title addr _ <<<"$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)"
  [ "${title##*/}" = redis-server ] || return 1
  if [ -n "${1:-}" ] && [ "${addr##*:}" != "$1" ]; then return 1; fi
  echo "$pid"
}

# redis_running_port PID prints the port of our Redis, from its command
# line, else from the ports file.
redis_running_port() {
  local title addr
  read -r title addr _ <<<"$(tr '\0' ' ' <"/proc/$1/cmdline")"
  if [[ $addr == *:* ]]; then echo "${addr##*:}"; else saved_port redis; fi
}

# --- ports ----------------------------------------------------------------

# holder PORT prints who listens on the TCP port ("redis-server (pid 4819)",
# "another process" when ss cannot tell or is missing) or fails when nobody
# does.
holder() {
  local line re='users:\(\("([^"]+)",pid=([0-9]+)'
  if command -v ss >/dev/null; then
    line=$(ss -Hltnp "sport = :$1" 2>/dev/null | head -n1)
    [ -n "$line" ] || return 1
    if [[ $line =~ $re ]]; then echo "${BASH_REMATCH[1]} (pid ${BASH_REMATCH[2]})"; else echo "another process"; fi
  else
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null || return 1
    echo "another process"
  fi
}

# The ports file holds one line per server: name, port in use, the port
# that was requested when it was chosen.
saved_port() { # name: the port an earlier start chose for the port requested now
  local want
  case "$1" in pg) want=$pgwant ;; redis) want=$rediswant ;; *) want=$replwant ;; esac
  awk -v n="$1" -v r="$want" '$1 == n && $3 == r { print $2 }' "$portsfile" 2>/dev/null || true
}

save_ports() {
  mkdir -p "$datadir"
  {
    echo "# written by scripts/services.sh start: server, port in use, port requested"
    echo "pg $pgport $pgwant"
    echo "redis $redisport $rediswant"
    [ -z "${replport:-}" ] || echo "replica $replport $replwant"
  } >"$portsfile"
}

# pick_port NAME KEY REQUESTED [SKIP...]: REQUESTED when it is free; else
# the port an earlier start chose instead when that one is free (so that a
# port stays put while the requested one is held); else the next free one
# above REQUESTED. Never one of SKIP (ports found taken meanwhile). It says
# on stderr who holds the requested port and which one it takes instead.
pick_port() {
  local name=$1 key=$2 want=$3; shift 3
  local skip=" $* " saved p who
  saved=$(saved_port "$key")
  for p in "$want" $saved $(seq $((want + 1)) $((want + 100))); do
    [[ $skip == *" $p "* ]] && continue
    skip+="$p "
    if who=$(holder "$p"); then
      [ "$p" = "$want" ] && log "$profile $name: port $p is held by $who, not by this checkout's $profile servers; leaving it alone"
      continue
    fi
    if [ "$p" = "$saved" ] && [ "$p" != "$want" ]; then
      log "$profile $name: using port $p, as the last start did (requested $want)"
    elif [ "$p" != "$want" ]; then
      log "$profile $name: using port $p (requested $want)"
    fi
    echo "$p"; return 0
  done
  log "$profile $name: no free port in $want-$((want + 100))"
  return 1
}

# --- PostgreSQL -----------------------------------------------------------

pg_init() {
  # (umask 022) so that the postgres user can reach a /tmp fallback folder.
  (umask 022; mkdir -p "$pgdata")
  if [ "$(id -u)" -eq 0 ]; then chown postgres: "$pgdata"; fi
  as_pg "$pgbin/initdb" -D "$pgdata" -U geogate --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
  # The port is not in postgresql.conf: it is chosen at each start and
  # given on the command line (see pg_start).
  cat >>"$pgdata/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
unix_socket_directories = '$pgdata'
max_connections = 200
shared_buffers = 256MB
jit = off
CONF
  if [ "$profile" = test ]; then
    printf 'fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n' >>"$pgdata/postgresql.conf"
  fi
}

pg_start() {
  if pg_pid >/dev/null; then
    pgport=$(pg_running_port)
    [ "$pgport" = "$pgwant" ] || log "$profile PostgreSQL already runs on port $pgport (requested $pgwant); stop it to move it"
    return 0
  fi
  [ -f "$pgdata/PG_VERSION" ] || pg_init
  local taken=() logf="$pgdata/server.log" size
  for _ in 1 2 3; do
    pgport=$(pick_port PostgreSQL pg "$pgwant" "${taken[@]}") || exit 1
    size=$(stat -c %s "$logf" 2>/dev/null || echo 0)
    # -p overrides a port in postgresql.conf (data folders made before the
    # port was chosen per start have one).
    if as_pg "$pgbin/pg_ctl" -D "$pgdata" -l "$logf" -w -t 30 -o "-p $pgport" start >/dev/null; then
      break
    fi
    # Someone took the port between the check and the bind: try the next.
    if tail -c +$((size + 1)) "$logf" | grep -q 'could not bind\|Address already in use'; then
      log "$profile PostgreSQL: port $pgport was taken meanwhile"
      taken+=("$pgport"); continue
    fi
    log "PostgreSQL did not start on port $pgport; the end of $logf:"
    tail -n 5 "$logf" >&2
    exit 1
  done
  pg_pid >/dev/null || { log "PostgreSQL did not start; see $logf"; exit 1; }
  # Through the socket in our data folder: certainly our server.
  as_pg "$pgbin/psql" -h "$pgdata" -p "$pgport" -U geogate -d postgres -tAc \
    "SELECT 1 FROM pg_database WHERE datname='geogate'" | grep -q 1 ||
    as_pg "$pgbin/createdb" -h "$pgdata" -p "$pgport" -U geogate geogate
}

pg_stop() {
  pg_pid >/dev/null || return 0
  # pg_ctl signals the pid in our postmaster.pid, the one pg_pid checked.
  as_pg "$pgbin/pg_ctl" -D "$pgdata" -m fast -w -t 30 stop >/dev/null
}

# --- the streaming replica (test profile; dev with GEOGATE_DEV_REPLICA=1) ---

# The test profile has a hot standby of its PostgreSQL: a base backup taken
# with pg_basebackup -R (which writes the standby's primary_conninfo),
# streaming from the primary on its own port, for the tests of reads from
# replicas. It serves every database of the primary, as they are created.
repldata="${pgdata%/pg}/pg-replica"
replslot="geogate_${profile}_replica"

replica_pid() {
  local pid
  pid=$(head -n1 "$repldata/postmaster.pid" 2>/dev/null) || return 1
  works_in "$pid" "$repldata" && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = postgres ] || return 1
  echo "$pid"
}

# drop_slot drops the slot of an earlier replica of this profile, which
# would otherwise hold WAL on the primary for a replica that is gone.
drop_slot() {
  as_pg "$pgbin/psql" -h "$pgdata" -p "$pgport" -U geogate -d postgres -qAt >/dev/null -c \
    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '$replslot' AND NOT active"
}

replica_start() {
  # Not asked for: a replica left running (make bench's replicas case)
  # stops, and its slot goes; the next one asked for is a fresh copy.
  if [ -z "$replwant" ]; then replica_stop; drop_slot; return 0; fi
  if replica_pid >/dev/null; then replport=$(sed -n 4p "$repldata/postmaster.pid"); return 0; fi
  rm -rf "$repldata"
  (umask 022; mkdir -p "$repldata")
  if [ "$(id -u)" -eq 0 ]; then chown postgres: "$repldata"; fi
  chmod 700 "$repldata"
  # A physical replication slot makes the primary keep every WAL segment
  # the replica has not received yet. Without it, a burst of writes (each
  # test database is a copy of a PostGIS template, all in the WAL) could
  # recycle a segment the replica still needed, and the replica would
  # never catch up again. max_slot_wal_keep_size bounds what a stopped
  # replica makes the primary keep.
  drop_slot
  as_pg "$pgbin/psql" -h "$pgdata" -p "$pgport" -U geogate -d postgres -qAt >/dev/null \
    -c "ALTER SYSTEM SET max_slot_wal_keep_size = '4GB'" -c "SELECT pg_reload_conf()"
  as_pg "$pgbin/pg_basebackup" -h 127.0.0.1 -p "$pgport" -U geogate -D "$repldata" -R -X stream -c fast -C -S "$replslot" \
    2> >(grep -v 'skipping special file' >&2) >/dev/null
  # The copied configuration names the primary's socket folder.
  printf "unix_socket_directories = '%s'\nhot_standby = on\n" "$repldata" >>"$repldata/postgresql.conf"
  replport=$(pick_port "PostgreSQL replica" replica "$replwant") || exit 1
  if ! as_pg "$pgbin/pg_ctl" -D "$repldata" -l "$repldata/server.log" -w -t 30 -o "-p $replport" start >/dev/null; then
    log "the PostgreSQL replica did not start on port $replport; the end of $repldata/server.log:"
    tail -n 5 "$repldata/server.log" >&2
    exit 1
  fi
}

replica_stop() {
  replica_pid >/dev/null || return 0
  as_pg "$pgbin/pg_ctl" -D "$repldata" -m fast -w -t 30 stop >/dev/null
}

# --- Redis ----------------------------------------------------------------

# redis_answers PID: the Redis on $redisport answers and is that process
# (INFO's process_id), not another one on the port.
redis_answers() {
  [ "$(redis-cli -p "$redisport" info server 2>/dev/null | tr -d '\r' | sed -n 's/^process_id://p')" = "$1" ]
}

redis_start() {
  mkdir -p "$redisdir"
  local pid
  if pid=$(redis_pid); then
    redisport=$(redis_running_port "$pid")
    [ "$redisport" = "$rediswant" ] || log "$profile Redis already runs on port $redisport (requested $rediswant); stop it to move it"
    return 0
  fi
  rm -f "$redisdir/redis.pid" # stale: its process is gone or is not ours
  local taken=() logf="$redisdir/redis.log" size
  for _ in 1 2 3; do
    redisport=$(pick_port Redis redis "$rediswant" "${taken[@]}") || exit 1
    size=$(stat -c %s "$logf" 2>/dev/null || echo 0)
    redis-server --port "$redisport" --bind 127.0.0.1 --dir "$redisdir" \
      --daemonize yes --pidfile "$redisdir/redis.pid" --logfile "$logf" \
      --save "" --appendonly no >/dev/null || true
    for _ in $(seq 1 50); do
      if pid=$(redis_pid "$redisport") && redis_answers "$pid"; then return 0; fi
      # A daemonized redis that cannot bind logs it and exits.
      if tail -c +$((size + 1)) "$logf" 2>/dev/null | grep -q 'Address already in use'; then break; fi
      sleep 0.1
    done
    if tail -c +$((size + 1)) "$logf" 2>/dev/null | grep -q 'Address already in use'; then
      log "$profile Redis: port $redisport was taken meanwhile"
      taken+=("$redisport"); continue
    fi
    break
  done
  log "redis on port $redisport did not start; see $logf"; exit 1
}

redis_stop() {
  local pid
  pid=$(redis_pid) || return 0
  # SIGTERM to the very process redis_pid checked; with --save "" it does
  # not write a dump on the way out.
  kill -TERM "$pid"
  for _ in $(seq 1 100); do
    [ -d "/proc/$pid" ] || return 0
    sleep 0.1
  done
  log "redis (pid $pid) did not stop on SIGTERM within 10 s; killing it"
  kill -KILL "$pid" 2>/dev/null || true
}

# --- commands -------------------------------------------------------------

# current_ports sets pgport and redisport for env: those of the running
# servers, else those an earlier start chose, else the requested ones.
current_ports() {
  local pid
  if pg_pid >/dev/null; then pgport=$(pg_running_port); else pgport=$(saved_port pg); fi
  if pid=$(redis_pid); then redisport=$(redis_running_port "$pid"); else redisport=$(saved_port redis); fi
  if [ -n "$replwant" ]; then
    if replica_pid >/dev/null; then replport=$(sed -n 4p "$repldata/postmaster.pid"); else replport=$(saved_port replica); fi
    : "${replport:=$replwant}"
  fi
  : "${pgport:=$pgwant}" "${redisport:=$rediswant}"
}

print_env() {
  echo "DATABASE_URL=postgres://geogate@127.0.0.1:$pgport/geogate?sslmode=disable"
  echo "REDIS_URL=redis://127.0.0.1:$redisport/0"
  [ -z "${replport:-}" ] || echo "DATABASE_REPLICA_URL=postgres://geogate@127.0.0.1:$replport/geogate?sslmode=disable"
}

case "$cmd" in
  start)
    ensure_packages
    if [ "$profile" = test ]; then
      # Fresh data on every start, but the ports file stays for
      # pick_port: the wipe must not move the ports.
      keep=$(cat "$portsfile" 2>/dev/null || true)
      replica_stop; pg_stop; redis_stop
      rm -rf "$datadir" "$pgdata" "$repldata"
      if [ -n "$keep" ]; then mkdir -p "$datadir"; echo "$keep" >"$portsfile"; fi
      pgdata=$(pg_dir)
      repldata="${pgdata%/pg}/pg-replica"
replslot="geogate_${profile}_replica"
    fi
    pg_start
    replica_start
    redis_start
    save_ports
    print_env
    ;;
  stop) replica_stop; pg_stop; redis_stop ;;
  env) current_ports; print_env ;;
  install) ensure_packages ;;
esac
