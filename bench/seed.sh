#!/usr/bin/env bash
# geogate next to the seed's design written as a FastAPI service
# (bench/seedapp, uvicorn with one worker), both against the same PostGIS
# database holding the demo data and the same Redis, under the same load
# (bench/load: fixed concurrency and duration, the same URLs), trials
# alternating between the two. Cases:
#   limiter only: the seed's /limited next to geogate's /within with a 1 m
#     radius in the empty Atlantic (lng -30, lat 0): geogate has no cheaper
#     rate-limited route answering 200, so its figure also holds one empty
#     index probe in PostgreSQL;
#   limiter, no database: geogate's /conformance, a rate-limited document
#     that reads no table (the features policy, raised out of the way), next
#     to the same /limited: the nearest thing to a bare limited route
#     geogate has (a malformed /within is refused before it is charged);
#   /within at 1 km and 20 km around the same 64 city centres, with a
#     third side, the floor: the seed's design (one limiter script, then
#     the statement geogate runs) in plain Go, net/http and pgx
#     (bench/geofence's lean process, /limited/raw/within), none of
#     geogate's request path. No service of that design serves more on
#     this machine, so its ratio to the seed bounds geogate's.
# Limits are raised out of the way on both sides (geogate
# RATELIMIT_GEOFENCE=100000/1s, the exact log's largest window; the seed
# SEED_LIMIT=1000000000); every caller is anonymous (identity ip:127.0.0.1).
# Prints a Markdown table, writes it to bench/results/seed.md and prints one
# "RESULT seed ..." line per case for scripts/bench.sh.
#   SEED_PYTHON (/usr/bin/python3), SEED_CONC (32), SEED_DUR (5s), SEED_TRIALS (3), SEED_DBNAME
#   (geogate_geofence_bench, created with the demo data when missing) tune it;
#   SEED_RESULTS (bench/results) is where the table, logs and profiles go;
#   SEED_POOL (8) is the PostgreSQL pool of both services (DB_MAX_CONNS and
#   the seed's asyncpg max_size), sized for 2 cores.
# BENCH_PROFILE=1 adds two untimed geogate trials per case, each writing
# profiles of api serve under that load to $SEED_RESULTS:
#   - perf call graphs (Go and kernel side): api-<case>.perf.prof, top
#     symbols in api-<case>.top.txt (when perf is installed);
#   - Go's own profiles through PPROF_ADDR (a loopback port): the CPU
#     profile of the trial, api-<case>.cpu.prof, and what it allocated
#     (the allocs profile after the trial minus the one before it),
#     api-<case>.allocs.prof; `go tool pprof -top` of each in
#     api-<case>.cpu.top.txt and api-<case>.allocs.top.txt (alloc_space).
set -euo pipefail
cd "$(dirname "$0")/.."

conc=${SEED_CONC:-32}
res=${SEED_RESULTS:-bench/results}
dur=${SEED_DUR:-5s}
trials=${SEED_TRIALS:-3}
dbname=${SEED_DBNAME:-geogate_geofence_bench}
if [ -z "${DATABASE_URL:-}" ] || [ -z "${REDIS_URL:-}" ]; then
  env_lines=$(scripts/services.sh start dev)
  DATABASE_URL=${DATABASE_URL:-$(echo "$env_lines" | sed -n 's/^DATABASE_URL=//p')}
  REDIS_URL=${REDIS_URL:-$(echo "$env_lines" | sed -n 's/^REDIS_URL=//p')}
fi
# Debian's packages live under the system interpreter, not a pyenv shim.
py=${SEED_PYTHON:-/usr/bin/python3}
"$py" -c 'import fastapi, uvicorn, redis, asyncpg' 2>/dev/null || {
  if [ "$(id -u)" -ne 0 ]; then
    echo "bench/seed: apt-get install python3-fastapi python3-uvicorn python3-redis python3-asyncpg" >&2; exit 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-fastapi python3-uvicorn python3-redis python3-asyncpg >&2
}
command -v jq >/dev/null || { echo "bench/seed: jq is missing (apt-get install jq)" >&2; exit 1; }

base=${DATABASE_URL%%\?*}
query=""; [ "$base" != "$DATABASE_URL" ] && query="?${DATABASE_URL#*\?}"
server=${base%/*}
db_url="$server/$dbname$query"

[ -x bin/api ] || go build -o bin/api ./cmd/api
go build -o bin/load ./bench/load
go build -o bin/bench-floor ./bench/geofence

if [ "$(psql -tA "$server/postgres$query" -c "SELECT count(*) FROM pg_database WHERE datname = '$dbname'")" != 1 ]; then
  echo "bench/seed: creating $dbname with the demo data" >&2
  psql -q "$server/postgres$query" -c "CREATE DATABASE $dbname"
  DATABASE_URL=$db_url bin/api migrate >/dev/null
  DATABASE_URL=$db_url bin/api import --layer places data/cities.json.gz >/dev/null
  DATABASE_URL=$db_url bin/api import --layer geofences data/countries-land-10km.geo.json.gz >/dev/null
fi

# The seed's statement filters with ST_DWithin on geom::geography, which
# only an index on that expression serves; its setup would create one, as
# geogate's migrations create the indexes geogate's statements use. The
# seed reads a copy of places with that index (seed_places), so that
# neither service's index changes the other's plans: on places itself,
# the expression index draws geogate's /within to a slower plan.
psql -q "$db_url" <<'SQL'
DO $$ BEGIN
  IF to_regclass('seed_places') IS NULL THEN
    CREATE TABLE seed_places AS SELECT * FROM places;
  END IF;
END $$;
CREATE INDEX IF NOT EXISTS seed_places_geog_idx ON seed_places USING gist ((geom::geography));
ANALYZE seed_places;
SQL

free_port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
api_port=$(free_port)
seed_port=$(free_port)
floor_port=$(free_port)
pprof_addr=""
[ "${BENCH_PROFILE:-}" = 1 ] && pprof_addr=127.0.0.1:$(free_port)
mkdir -p "$res"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

# Both sides get the same PostgreSQL pool, sized for the machine's cores.
pool=${SEED_POOL:-8}
DATABASE_URL=$db_url REDIS_URL=$REDIS_URL RATELIMIT_GEOFENCE=100000/1s RATELIMIT_FEATURES=100000/1s RATELIMIT_DATABASE=1000000000ms/1s LOG_LEVEL=warn DB_MAX_CONNS=$pool DB_MIN_CONNS=$pool \
  PPROF_ADDR=$pprof_addr bin/api serve --port "$api_port" >/dev/null 2>"$res/seed-api.log" &
pids+=($!)
DATABASE_URL=$db_url REDIS_URL=$REDIS_URL SEED_TABLE=seed_places SEED_LIMIT=1000000000 SEED_WINDOW_MS=1000 SEED_POOL=$pool \
  "$py" -m uvicorn app:app --app-dir bench/seedapp --host 127.0.0.1 --port "$seed_port" \
  --workers 1 --log-level warning --no-access-log >/dev/null 2>"$res/seed-uvicorn.log" &
pids+=($!)
# The floor: the seed's design (one limiter script, then the statement)
# in plain Go, net/http and pgx with the same pool, none of geogate's
# request path. What it serves bounds what any service of that design
# can on this machine.
bin/bench-floor -serve-lean "127.0.0.1:$floor_port" -db "$db_url" -redis "$REDIS_URL" >/dev/null 2>"$res/seed-floor.log" &
pids+=($!)

wait_up() { # url
  for _ in $(seq 1 150); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    sleep 0.2
  done
  echo "bench/seed: $1 did not answer" >&2; exit 1
}
wait_up "http://127.0.0.1:$api_port/healthz"
wait_up "http://127.0.0.1:$seed_port/limited"
wait_up "http://127.0.0.1:$floor_port/healthz"

# The same 64 city centres for both sides, drawn reproducibly.
mapfile -t centres < <(psql -tA -F, "$db_url" -c \
  "SELECT ST_X(geom), ST_Y(geom) FROM places ORDER BY md5(id::text) LIMIT 64")
urls() { # base radius
  for c in "${centres[@]}"; do echo "$1/within?lng=${c%,*}&lat=${c#*,}&radius=$2"; done
}

# Both sides answer the same centres with the same number of features.
c0=${centres[0]}
n_api=$(curl -fsS "http://127.0.0.1:$api_port/within?lng=${c0%,*}&lat=${c0#*,}&radius=20000" | jq '.features | length')
n_seed=$(curl -fsS "http://127.0.0.1:$seed_port/within?lng=${c0%,*}&lat=${c0#*,}&radius=20000" | jq '.features | length')
echo "check: features at 20 km around $c0: geogate $n_api, seed $n_seed" >&2

run_load() { bin/load -json -c "$conc" -d "$dur" "$@"; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
minmax() { printf '%s\n' "$@" | sort -g | awk 'NR==1{lo=$1} {hi=$1} END {printf "%.0f-%.0f", lo, hi}'; }

out=$res/seed.md
{
  echo "## geogate vs the seed's FastAPI service (concurrency $conc, $dur per trial, median of $trials alternating trials, min-max in brackets)"
  echo
  echo "| case | geogate req/s | p99 ms | seed req/s | p99 ms | throughput ratio | floor req/s | floor / seed | non-2xx (geogate / seed) |"
  echo "|---|---|---|---|---|---|---|---|---|"
} >"$out"

# Three untimed seconds on each side first: connection pools fill (geogate's
# pgx pool opens its connections on demand; the first burst waits on them).
bin/load -c "$conc" -d 3s "http://127.0.0.1:$api_port/within?lng=-30&lat=0&radius=1" "$(urls "http://127.0.0.1:$api_port" 1000 | head -1)" >/dev/null
bin/load -c "$conc" -d 3s "http://127.0.0.1:$seed_port/limited" "$(urls "http://127.0.0.1:$seed_port" 1000 | head -1)" >/dev/null
bin/load -c "$conc" -d 3s "$(urls "http://127.0.0.1:$floor_port/limited/raw" 1000 | head -1)" >/dev/null

profile() { # case: under BENCH_PROFILE=1, perf and then Go profiles of api serve, each during one more geogate trial
  [ "${BENCH_PROFILE:-}" = 1 ] || return 0
  perf_profile "$1"
  go_profile "$1"
}

perf_profile() { # case: perf call graphs, kernel side included
  command -v perf >/dev/null || return 0
  local r=$res/api-$1
  perf record -q -F 999 -g -p "${pids[0]}" -o "$r.perf.prof" -- sleep "$(secs "$dur")" 2>/dev/null &
  local pp=$!
  run_load "${gurls[@]}" >/dev/null
  wait "$pp" || true
  perf report -q --stdio --no-children -i "$r.perf.prof" --percent-limit 1.5 -g none --sort dso,sym \
    >"$r.top.txt" 2>/dev/null || true
  echo "profile: $r.perf.prof, top symbols in $r.top.txt" >&2
}

go_profile() { # case: Go CPU profile of the trial, and what the trial allocated (allocs after minus before)
  local r=$res/api-$1 pp=http://127.0.0.1:${pprof_addr##*:}/debug/pprof
  local before=$res/.api-$1.allocs-before.prof after=$res/.api-$1.allocs-after.prof
  curl -fsS -o "$before" "$pp/allocs" || { echo "bench/seed: no allocs profile from PPROF_ADDR=$pprof_addr" >&2; return 0; }
  curl -fsS -o "$r.cpu.prof" "$pp/profile?seconds=$(secs "$dur")" &
  local cp=$!
  run_load "${gurls[@]}" >/dev/null
  wait "$cp" || echo "bench/seed: the CPU profile from PPROF_ADDR=$pprof_addr failed" >&2
  curl -fsS -o "$after" "$pp/allocs" || true
  go tool pprof -proto -base "$before" "$after" >"$r.allocs.prof" 2>/dev/null || true
  rm -f "$before" "$after"
  go tool pprof -top -nodecount=25 bin/api "$r.cpu.prof" >"$r.cpu.top.txt" 2>/dev/null || true
  go tool pprof -top -nodecount=25 -sample_index=alloc_space bin/api "$r.allocs.prof" >"$r.allocs.top.txt" 2>/dev/null || true
  echo "profile: $r.cpu.prof and $r.allocs.prof (go tool pprof), top in $r.cpu.top.txt and $r.allocs.top.txt" >&2
}

secs() { # duration such as 5s, 1500ms or 1m: whole seconds, at least 1
  awk -v d="$1" 'BEGIN { n = d + 0; if (d ~ /ms$/) n /= 1000; else if (d ~ /m$/) n *= 60; n = int(n + 0.999); print (n < 1) ? 1 : n }'
}

for case in limiter refused within1k within20k; do
  ok='"200"'
  case $case in
    limiter)   name="limiter only"; gurls=("http://127.0.0.1:$api_port/within?lng=-30&lat=0&radius=1"); surls=("http://127.0.0.1:$seed_port/limited") ;;
    refused)   name="limiter, no database (geogate /conformance)"; gurls=("http://127.0.0.1:$api_port/conformance"); surls=("http://127.0.0.1:$seed_port/limited") ;;
    within1k)  name="/within 1 km"; mapfile -t gurls < <(urls "http://127.0.0.1:$api_port" 1000); mapfile -t surls < <(urls "http://127.0.0.1:$seed_port" 1000); mapfile -t furls < <(urls "http://127.0.0.1:$floor_port/limited/raw" 1000) ;;
    within20k) name="/within 20 km"; mapfile -t gurls < <(urls "http://127.0.0.1:$api_port" 20000); mapfile -t surls < <(urls "http://127.0.0.1:$seed_port" 20000); mapfile -t furls < <(urls "http://127.0.0.1:$floor_port/limited/raw" 20000) ;;
  esac
  [ "$case" = within1k ] || [ "$case" = within20k ] || furls=()
  g_rps=(); g_p99=(); s_rps=(); s_p99=(); f_rps=(); g_bad=0; s_bad=0
  for i in $(seq 1 "$trials"); do
    g=$(run_load "${gurls[@]}"); s=$(run_load "${surls[@]}")
    if [ ${#furls[@]} -gt 0 ]; then
      f=$(run_load "${furls[@]}"); f_rps+=("$(jq .rps <<<"$f")")
      [ "$(jq '.errors + ([.statuses | to_entries[] | select(.key != "200") | .value] | add // 0)' <<<"$f")" = 0 ] || { echo "bench/seed: the floor answered other than 200: $f" >&2; exit 1; }
    fi
    g_rps+=("$(jq .rps <<<"$g")"); g_p99+=("$(jq .p99_ms <<<"$g")")
    s_rps+=("$(jq .rps <<<"$s")"); s_p99+=("$(jq .p99_ms <<<"$s")")
    g_bad=$((g_bad + $(jq --argjson ok "[$ok]" '[.statuses | to_entries[] | select([.key] | inside($ok) | not) | .value] | add // 0' <<<"$g") + $(jq .errors <<<"$g")))
    s_bad=$((s_bad + $(jq --argjson ok "[$ok]" '[.statuses | to_entries[] | select([.key] | inside($ok) | not) | .value] | add // 0' <<<"$s") + $(jq .errors <<<"$s")))
    printf '%s trial %d: geogate %.0f req/s p99 %.2f ms | seed %.0f req/s p99 %.2f ms | floor %s req/s\n' "$name" "$i" \
      "${g_rps[-1]}" "${g_p99[-1]}" "${s_rps[-1]}" "${s_p99[-1]}" "$( [ ${#f_rps[@]} -gt 0 ] && printf %.0f "${f_rps[-1]}" || echo -)" >&2
  done
  profile "$case"
  gm=$(median "${g_rps[@]}"); gp=$(median "${g_p99[@]}"); sm=$(median "${s_rps[@]}"); sp=$(median "${s_p99[@]}")
  ratio=$(awk "BEGIN { printf \"%.1f\", $gm / $sm }")
  fm=-; fr=-
  if [ ${#f_rps[@]} -gt 0 ]; then
    fm=$(median "${f_rps[@]}"); fr=$(awk "BEGIN { printf \"%.1fx\", $fm / $sm }")
    fm=$(printf '%.0f' "$fm")
  fi
  printf '| %s | %.0f (%s) | %.2f | %.0f (%s) | %.2f | %sx | %s | %s | %d / %d |\n' "$name" "$gm" "$(minmax "${g_rps[@]}")" "$gp" \
    "$sm" "$(minmax "${s_rps[@]}")" "$sp" "$ratio" "$fm" "$fr" "$g_bad" "$s_bad" >>"$out"
  printf 'RESULT seed case=%s geogate_rps=%.0f geogate_range=%s geogate_p99=%.2f seed_rps=%.0f seed_range=%s seed_p99=%.2f ratio=%s floor_rps=%s floor_ratio=%s bad=%d/%d\n' \
    "$case" "$gm" "$(minmax "${g_rps[@]}")" "$gp" "$sm" "$(minmax "${s_rps[@]}")" "$sp" "$ratio" "$fm" "$fr" "$g_bad" "$s_bad"
done
echo >>"$out"
cat "$out"
