#!/usr/bin/env bash
# A layer that runs as its caller (as_caller in the layer file) next to the
# same layer served as the login role: the same table, the same requests,
# two `api serve` processes on one database and Redis, trials alternating.
# The table is caller_places, a copy of the demo places with a tenant
# column, a spatial index and a row-level security policy on the tenant
# claim that lets the bench's key see every row, so that both sides answer
# the same features. Cases, each at CALLER_CONC (32) for CALLER_DUR (5s),
# CALLER_TRIALS (5) times, the two sides back to back in each trial:
#   within: /within at 1 km around 64 city centres;
#   items: items pages of 100 in 64 boxes of 0.5 degree around them.
# Prints "RESULT caller ..." lines for scripts/bench.sh: medians of each
# side, and the median of the trials' ratios; the goal is a ratio of at
# least 0.9.
set -euo pipefail
cd "$(dirname "$0")/.."

conc=${CALLER_CONC:-32}
dur=${CALLER_DUR:-5s}
trials=${CALLER_TRIALS:-5}
dbname=${CALLER_DBNAME:-geogate_geofence_bench}
if [ -z "${DATABASE_URL:-}" ] || [ -z "${REDIS_URL:-}" ]; then
  env_lines=$(scripts/services.sh start dev)
  DATABASE_URL=${DATABASE_URL:-$(echo "$env_lines" | sed -n 's/^DATABASE_URL=//p')}
  REDIS_URL=${REDIS_URL:-$(echo "$env_lines" | sed -n 's/^REDIS_URL=//p')}
fi
command -v jq >/dev/null || { echo "bench/caller: jq is missing (apt-get install jq)" >&2; exit 1; }
base=${DATABASE_URL%%\?*}
query=""; [ "$base" != "$DATABASE_URL" ] && query="?${DATABASE_URL#*\?}"
server=${base%/*}
db_url="$server/$dbname$query"

go build -o bin/api ./cmd/api
go build -o bin/load ./bench/load
if [ "$(psql -tA "$server/postgres$query" -c "SELECT count(*) FROM pg_database WHERE datname = '$dbname'")" != 1 ]; then
  echo "bench/caller: creating $dbname with the demo data" >&2
  psql -q "$server/postgres$query" -c "CREATE DATABASE $dbname"
  DATABASE_URL=$db_url bin/api migrate >/dev/null
  DATABASE_URL=$db_url bin/api import --layer places data/cities.json.gz >/dev/null
fi
psql -q "$db_url" <<'SQL'
DO $$ BEGIN CREATE ROLE gg_bench_tenant NOLOGIN; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$;
GRANT gg_bench_tenant TO CURRENT_USER;
DO $$ BEGIN
  IF to_regclass('public.caller_places') IS NULL THEN
    CREATE TABLE public.caller_places AS SELECT id, name, properties, 'a'::text AS tenant, geom FROM places;
    ALTER TABLE public.caller_places ADD PRIMARY KEY (id);
    CREATE INDEX ON public.caller_places USING gist (geom);
    ALTER TABLE public.caller_places ENABLE ROW LEVEL SECURITY;
    CREATE POLICY own_tenant ON public.caller_places FOR SELECT TO gg_bench_tenant
      USING (tenant = (SELECT current_setting('request.jwt.claims', true)::json->>'tenant'));
    GRANT SELECT ON public.caller_places TO gg_bench_tenant;
    ANALYZE public.caller_places;
  END IF;
END $$;
-- Under row-level security PostgreSQL uses an index only through
-- operators marked LEAKPROOF; PostGIS's && is not, out of the box (see
-- docs/operations/publishing.md). A superuser marks it.
ALTER FUNCTION geometry_overlaps(geometry, geometry) LEAKPROOF;
ALTER FUNCTION geography_overlaps(geography, geography) LEAKPROOF;
SQL
DATABASE_URL=$db_url bin/api migrate >/dev/null
key=bench-caller-key-000000000000000000
DATABASE_URL=$db_url bin/api keys create --name bench-caller --scopes all --secret "$key" \
  --db-role gg_bench_tenant --claims '{"tenant":"a"}' --if-missing >/tmp/caller-key.log 2>&1 || { cat /tmp/caller-key.log >&2; exit 1; }

layers=$(mktemp)
cat >"$layers" <<'YAML'
layers:
  caller_places:
    as_caller: true
    cache_by: claim:tenant
YAML
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
as_port=$(free_port)
login_port=$(free_port)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -f "$layers"; }
trap cleanup EXIT
common=(DATABASE_URL=$db_url REDIS_URL=$REDIS_URL RATELIMIT_GEOFENCE=100000/1s RATELIMIT_FEATURES=1000000000ms/1s
  RATELIMIT_DATABASE=1000000000ms/1s LOG_LEVEL=warn DB_MAX_CONNS=8 DB_MIN_CONNS=8)
env "${common[@]}" LAYERS_CONFIG="$layers" DB_CALLER_ROLES=gg_bench_tenant bin/api serve --port "$as_port" >/dev/null 2>/tmp/caller-as.log &
pids+=($!)
env "${common[@]}" bin/api serve --port "$login_port" >/dev/null 2>/tmp/caller-login.log &
pids+=($!)
wait_up() {
  for _ in $(seq 1 150); do curl -fsS -o /dev/null "$1" 2>/dev/null && return 0; sleep 0.2; done # polls a starting server
  echo "bench/caller: $1 did not answer" >&2; exit 1
}
wait_up "http://127.0.0.1:$as_port/healthz"
wait_up "http://127.0.0.1:$login_port/healthz"

mapfile -t centres < <(psql -tA -F, "$db_url" -c "SELECT ST_X(geom), ST_Y(geom) FROM places ORDER BY md5(id::text) LIMIT 64")
urls() { # base case
  for c in "${centres[@]}"; do
    x=${c%,*} y=${c#*,}
    case $2 in
      within) echo "$1/within?layer=caller_places&lng=$x&lat=$y&radius=1000" ;;
      items) awk -v x="$x" -v y="$y" -v b="$1" 'BEGIN { printf "%s/collections/caller_places/items?limit=100&bbox=%.4f,%.4f,%.4f,%.4f\n", b, x-0.25, y-0.25, x+0.25, y+0.25 }' ;;
    esac
  done
}
# Both sides answer the same features.
for case in within items; do
  a=$(curl -fsS -H "x-api-key: $key" "$(urls "http://127.0.0.1:$as_port" $case | head -1)" | jq -c '[.features[].id]')
  b=$(curl -fsS -H "x-api-key: $key" "$(urls "http://127.0.0.1:$login_port" $case | head -1)" | jq -c '[.features[].id]')
  [ "$a" = "$b" ] || { echo "bench/caller: $case answers differ: as caller $a, as login $b" >&2; exit 1; }
done
run_load() { bin/load -json -c "$conc" -d "$dur" -H "x-api-key: $key" "$@"; }
# CPU ticks (1/100 s) spent so far by the database's server processes,
# and by one process: only one side runs at a time, so the difference
# over a side's run is that side's.
pg_ticks() {
  local t=0 p
  for p in $(pgrep -f "^postgres: .* $dbname "); do
    t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
  done
  echo "$t"
}
proc_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# measure PID URL...: runs the load on URL... and prints its JSON with
# the database's and PID's CPU per request, in microseconds.
measure() {
  local pid=$1 pg0 api0 out; shift
  pg0=$(pg_ticks); api0=$(proc_ticks "$pid")
  out=$(run_load "$@")
  jq -c --argjson pg $(( $(pg_ticks) - pg0 )) --argjson api $(( $(proc_ticks "$pid") - api0 )) \
    '. + {pg_us: ($pg * 10000 / .requests), api_us: ($api * 10000 / .requests)}' <<<"$out"
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
for case in within items; do
  mapfile -t aurls < <(urls "http://127.0.0.1:$as_port" $case)
  mapfile -t lurls < <(urls "http://127.0.0.1:$login_port" $case)
  bin/load -c "$conc" -d 2s -H "x-api-key: $key" "${aurls[@]}" >/dev/null # fills the pools, prepares the statements
  bin/load -c "$conc" -d 2s -H "x-api-key: $key" "${lurls[@]}" >/dev/null
  a_rps=(); l_rps=(); a_p99=(); l_p99=(); ratios=(); a_pg=(); l_pg=(); a_api=(); l_api=(); bad=0
  for i in $(seq 1 "$trials"); do
    a=$(measure "${pids[0]}" "${aurls[@]}"); l=$(measure "${pids[1]}" "${lurls[@]}")
    a_pg+=("$(jq .pg_us <<<"$a")"); l_pg+=("$(jq .pg_us <<<"$l")")
    a_api+=("$(jq .api_us <<<"$a")"); l_api+=("$(jq .api_us <<<"$l")")
    a_rps+=("$(jq .rps <<<"$a")"); a_p99+=("$(jq .p99_ms <<<"$a")")
    l_rps+=("$(jq .rps <<<"$l")"); l_p99+=("$(jq .p99_ms <<<"$l")")
    bad=$((bad + $(jq '.errors + ([.statuses | to_entries[] | select(.key != "200") | .value] | add // 0)' <<<"$a") \
      + $(jq '.errors + ([.statuses | to_entries[] | select(.key != "200") | .value] | add // 0)' <<<"$l")))
    ratios+=("$(awk "BEGIN { print ${a_rps[-1]} / ${l_rps[-1]} }")")
    printf '%s trial %d: as the caller %.0f req/s p99 %.2f ms, CPU per request %.0f us database %.0f us api | as the login role %.0f req/s p99 %.2f ms, %.0f us database %.0f us api | %.2fx\n' \
      "$case" "$i" "${a_rps[-1]}" "${a_p99[-1]}" "${a_pg[-1]}" "${a_api[-1]}" "${l_rps[-1]}" "${l_p99[-1]}" "${l_pg[-1]}" "${l_api[-1]}" "${ratios[-1]}"
  done
  # The ratio is the median of each trial's pair, run back to back: the
  # machine's drift between trials moves both sides of a pair alike.
  printf 'RESULT caller case=%s caller_rps=%.0f caller_p99=%s login_rps=%.0f login_p99=%s ratio=%.2f bad=%d caller_pg_us=%.0f login_pg_us=%.0f caller_api_us=%.0f login_api_us=%.0f\n' \
    "$case" "$(median "${a_rps[@]}")" "$(median "${a_p99[@]}")" "$(median "${l_rps[@]}")" "$(median "${l_p99[@]}")" "$(median "${ratios[@]}")" "$bad" \
    "$(median "${a_pg[@]}")" "$(median "${l_pg[@]}")" "$(median "${a_api[@]}")" "$(median "${l_api[@]}")"
done
