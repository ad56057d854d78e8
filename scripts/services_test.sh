#!/usr/bin/env bash
# Proves that scripts/services.sh reuses and stops only the servers it
# started itself (scripts/test.sh runs it; it takes a few seconds):
#   (a) a foreign Redis on the requested Redis port and a foreign listener
#       on the requested PostgreSQL port are neither reused nor stopped:
#       start takes other ports, prints them, and its servers answer there;
#   (b) a second checkout asking for the same ports gets ports of its own,
#       and its stop leaves the first checkout's servers running;
#   (c) stop stops only ours, even when our pid files name other processes;
#   (d) the replica streams through a slot: one that stops receiving
#       during a burst of WAL and a checkpoint still catches up;
# and once the requested ports are free, start takes them again.
# Both checkouts are copies of services.sh in a temporary folder, using the
# test profile on ports far below the real profiles' (31433 and 31380, or
# the next free block), so the test never meets a real server.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
t0=$(date +%s)

tmp=$(mktemp -d /tmp/geogate-services-test.XXXXXX)
chmod 755 "$tmp" # the postgres user must reach the copies' data folders
foreign=()       # pids of the foreign listeners this test started

fail() { echo "services_test: FAIL: $*" >&2; exit 1; }
ok() { echo "services_test: ok: $*"; }

# svc CHECKOUT ARGS...: the copy's services.sh with the test's ports; its
# stderr is kept in $tmp/CHECKOUT.err and shown indented.
svc() {
  local c=$1 rc=0; shift
  GEOGATE_TEST_PG_PORT=$pgwant GEOGATE_TEST_REDIS_PORT=$rediswant GEOGATE_TEST_PG_REPLICA_PORT=$((pgwant + 100)) \
    "$tmp/$c/scripts/services.sh" "$@" 2>"$tmp/$c.err" || rc=$?
  sed "s/^/  $c: /" "$tmp/$c.err" >&2
  return $rc
}

cleanup() {
  set +e
  for c in a b; do [ -x "$tmp/$c/scripts/services.sh" ] && svc "$c" stop test 2>/dev/null; done
  for pid in "${foreign[@]}"; do kill "$pid" 2>/dev/null; done
  wait 2>/dev/null
  # services.sh's fallback data folder when the postgres user cannot
  # reach a checkout (see pg_dir there); normally unused here.
  for c in a b; do rm -rf "/tmp/geogate-$(echo "$tmp/$c" | cksum | cut -d' ' -f1)"; done
  rm -rf "$tmp"
}
trap cleanup EXIT

# The test starts servers of its own (the foreign listeners) before any
# copy of services.sh would install them, so on a fresh machine it installs
# them first.
"$here/services.sh" install

for c in a b; do
  mkdir -p "$tmp/$c/scripts"
  cp "$here/services.sh" "$tmp/$c/scripts/"
done

# A block of eight free ports for each server.
taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
block_free() { local p; for p in $(seq "$1" $(($1 + 7))); do taken "$p" && return 1; done; return 0; }
pgwant=31433 rediswant=31380
until block_free "$pgwant" && block_free "$rediswant" && block_free $((pgwant + 100)); do
  pgwant=$((pgwant + 10)) rediswant=$((rediswant + 10))
  [ "$pgwant" -lt 32000 ] || fail "no free ports near 31433 and 31380"
done

# port_of URL-LINES NAME: the port in the DATABASE_URL or REDIS_URL line.
port_of() { sed -n "s/^$2=.*127\.0\.0\.1:\([0-9]*\)\/.*/\1/p" <<<"$1"; }
pg_answers() { /usr/lib/postgresql/15/bin/psql -h 127.0.0.1 -p "$1" -U geogate -d geogate -tAc 'SELECT 1' 2>/dev/null | grep -qx 1; }
redis_pid_on() { redis-cli -p "$1" info server 2>/dev/null | tr -d '\r' | sed -n 's/^process_id://p'; }
alive() { [ -d "/proc/$1" ]; }

# The foreign listeners: a throwaway redis-server holding a key on the
# Redis port (the old services.sh reused any Redis that answered ping),
# and another one on the PostgreSQL port.
for port in "$rediswant" "$pgwant"; do
  mkdir -p "$tmp/foreign-$port"
  redis-server --port "$port" --bind 127.0.0.1 --dir "$tmp/foreign-$port" --save "" --appendonly no >/dev/null &
  foreign+=($!)
done
for _ in $(seq 1 50); do
  [ -n "$(redis_pid_on "$rediswant")" ] && [ -n "$(redis_pid_on "$pgwant")" ] && break
  sleep 0.1
done
foreign_redis=${foreign[0]} foreign_pg=${foreign[1]}
[ "$(redis_pid_on "$rediswant")" = "$foreign_redis" ] || fail "the foreign redis-server on $rediswant did not start"
redis-cli -p "$rediswant" set foreign-key kept >/dev/null

foreign_intact() {
  alive "$foreign_redis" && alive "$foreign_pg" || fail "$1: a foreign listener is gone"
  [ "$(redis-cli -p "$rediswant" get foreign-key)" = kept ] || fail "$1: the foreign Redis lost its key"
  [ "$(redis_pid_on "$pgwant")" = "$foreign_pg" ] || fail "$1: port $pgwant is no longer the foreign listener's"
}

# (a) checkout a starts beside the foreign listeners.
a_env=$(svc a start test)
a_pg=$(port_of "$a_env" DATABASE_URL) a_redis=$(port_of "$a_env" REDIS_URL)
[ -n "$a_pg" ] && [ -n "$a_redis" ] || fail "start printed no ports: $a_env"
[ "$a_pg" != "$pgwant" ] && [ "$a_redis" != "$rediswant" ] || fail "a reused a foreign port: $a_env"
grep -q "port $rediswant is held by redis-server (pid $foreign_redis)" "$tmp/a.err" || fail "start did not name the Redis port's holder"
grep -q "using port $a_pg (requested $pgwant)" "$tmp/a.err" || fail "start did not print the PostgreSQL port it chose"
pg_answers "$a_pg" || fail "a's PostgreSQL does not answer on $a_pg"
a_redis_pid=$(cat "$tmp/a/.data/test/redis/redis.pid")
[ "$(redis_pid_on "$a_redis")" = "$a_redis_pid" ] || fail "the Redis on $a_redis is not a's"
a_pg_pid=$(head -n1 "$tmp/a/.data/test/pg/postmaster.pid")
foreign_intact "a's start"
[ "$(svc a env test)" = "$a_env" ] || fail "env disagrees with start: $(svc a env test)"
ok "foreign listeners on $pgwant and $rediswant left alone; a took $a_pg and $a_redis, env agrees"

# A later start keeps the chosen ports (the test profile restarts fresh).
again=$(svc a start test)
[ "$again" = "$a_env" ] || fail "a second start moved: $again, first $a_env"
a_pg_pid=$(head -n1 "$tmp/a/.data/test/pg/postmaster.pid")
a_redis_pid=$(cat "$tmp/a/.data/test/redis/redis.pid")
ok "a later start agrees on the ports"

# (d) a replica that stops receiving while the primary writes more WAL
# than it keeps for itself and checkpoints still catches up: its slot
# holds the WAL it has not received.
a_repl=$(sed -n 's/^DATABASE_REPLICA_URL=.*127\.0\.0\.1:\([0-9]*\)\/.*/\1/p' <<<"$a_env")
q() { /usr/lib/postgresql/15/bin/psql -h 127.0.0.1 -p "$1" -U geogate -d geogate -qtAc "$2"; }
receiver=$(q "$a_repl" "SELECT pid FROM pg_stat_wal_receiver WHERE status = 'streaming'")
[ -n "$receiver" ] || fail "a's replica is not streaming"
kill -STOP "$receiver"
q "$a_pg" "CREATE TABLE wal_burst AS SELECT g, repeat('x', 600) AS pad FROM generate_series(1, 200000) g" >/dev/null
q "$a_pg" "CHECKPOINT" >/dev/null
slot=$(q "$a_pg" "SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'geogate_test_replica'")
head_lsn=$(q "$a_pg" "SELECT pg_current_wal_lsn()")
kill -CONT "$receiver"
[ "$slot" = reserved ] || [ "$slot" = extended ] || fail "a's replica slot does not hold its WAL: '$slot'"
for _ in $(seq 1 600); do
  [ "$(q "$a_repl" "SELECT pg_last_wal_replay_lsn() >= '$head_lsn'")" = t ] && break
  sleep 0.1
done
[ "$(q "$a_repl" "SELECT count(*) FROM wal_burst")" = 200000 ] || fail "a's replica did not catch up past $head_lsn"
ok "a replica that stopped receiving during a burst of WAL and a checkpoint caught up"

# (b) checkout b asks for the same ports.
b_env=$(svc b start test)
b_pg=$(port_of "$b_env" DATABASE_URL) b_redis=$(port_of "$b_env" REDIS_URL)
for p in "$pgwant" "$rediswant" "$a_pg" "$a_redis"; do
  [ "$b_pg" != "$p" ] && [ "$b_redis" != "$p" ] || fail "b shares port $p: $b_env"
done
pg_answers "$b_pg" && [ -n "$(redis_pid_on "$b_redis")" ] || fail "b's servers do not answer"
svc b stop test
pg_answers "$b_pg" && fail "b's PostgreSQL still answers after b's stop"
[ -z "$(redis_pid_on "$b_redis")" ] || fail "b's Redis still answers after b's stop"
alive "$a_pg_pid" && alive "$a_redis_pid" || fail "b's stop stopped a's servers"
pg_answers "$a_pg" && [ "$(redis_pid_on "$a_redis")" = "$a_redis_pid" ] || fail "a's servers stopped answering"
foreign_intact "b's stop"
ok "b took $b_pg and $b_redis; its stop left a's servers and the foreign ones running"

# (c) a's stop stops a's servers and nothing else, also when a's pid files
# name other processes (a stale pid file whose pid was reused).
svc a stop test
alive "$a_pg_pid" && fail "a's PostgreSQL (pid $a_pg_pid) survived a's stop"
alive "$a_redis_pid" && fail "a's Redis (pid $a_redis_pid) survived a's stop"
foreign_intact "a's stop"
echo "$foreign_redis" >"$tmp/a/.data/test/redis/redis.pid"
printf '%s\n%s\n' "$foreign_pg" "$tmp/a/.data/test/pg" >"$tmp/a/.data/test/pg/postmaster.pid"
svc a stop test
[ "$(svc a env test)" = "$a_env" ] || fail "env after stop forgot the chosen ports"
foreign_intact "a's stop with pid files naming foreign processes"
rm -f "$tmp/a/.data/test/redis/redis.pid" "$tmp/a/.data/test/pg/postmaster.pid"
ok "stop stopped only a's servers, even with pid files naming foreign processes"

# Once the requested ports are free again, start takes them.
kill "${foreign[@]}"; wait
home=$(svc a start test)
[ "$(port_of "$home" DATABASE_URL)" = "$pgwant" ] && [ "$(port_of "$home" REDIS_URL)" = "$rediswant" ] ||
  fail "with $pgwant and $rediswant free again, start took: $home"
svc a stop test
ok "with the requested ports free again, start takes them"

echo "services_test: PASS ($(($(date +%s) - t0)) s)"
