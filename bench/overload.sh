#!/usr/bin/env bash
# Overload: light callers next to many heavy ones that are each within
# their rate limits but together saturate PostgreSQL, through `api serve`
# with DB_FAIR_SHARE on and off (alternating trials), and the light load
# alone for comparison. Uses DATABASE_URL and REDIS_URL when set, else the
# private dev services; the demo data in geogate_geofence_bench, loaded on
# first use. Creates the keys overload-heavy-NN and overload-light-NN there.
#   OVERLOAD_DUR (3s), OVERLOAD_RUNS (3), OVERLOAD_HEAVY (40 keys),
#   OVERLOAD_HEAVY_CONC (80 clients), OVERLOAD_LIGHT (4 keys) and
#   OVERLOAD_LIGHT_RATE (20 req/s per light key) tune it.
# Three cases, one after the other: overload (40 heavy keys of their own),
# overload-spread (the heavy load spread over 100 keys of one account,
# keys overload-spread-NN) and overload-neighbour (the first, beside a
# second application's OVERLOAD_NEIGHBOUR (2) connections running heavy
# statements straight on the database). OVERLOAD_CASES picks some;
# OVERLOAD_ON_ENV adds settings (DB_FAIR_SLOTS=4 ...) to the side with
# fair share on, to compare them. A fourth case, overload-machine, puts no
# heavy callers at all beside the light ones, only OVERLOAD_SPIN (3)
# processes that burn CPU and touch neither the database nor the service:
# what the machine's cores alone do to the light callers' tail.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${DATABASE_URL:-}" ] || [ -z "${REDIS_URL:-}" ]; then
  env_lines=$(scripts/services.sh start dev)
  DATABASE_URL=${DATABASE_URL:-$(echo "$env_lines" | sed -n 's/^DATABASE_URL=//p')}
  REDIS_URL=${REDIS_URL:-$(echo "$env_lines" | sed -n 's/^REDIS_URL=//p')}
fi
go build -o bin/api ./cmd/api
common=(-db "$DATABASE_URL" -redis "$REDIS_URL" -api bin/api
  -d "${OVERLOAD_DUR:-3s}" -runs "${OVERLOAD_RUNS:-3}"
  -heavy-conc "${OVERLOAD_HEAVY_CONC:-80}"
  -light "${OVERLOAD_LIGHT:-4}" -light-rate "${OVERLOAD_LIGHT_RATE:-20}")
go build -o bin/overload ./bench/overload
for c in ${OVERLOAD_CASES:-overload overload-spread overload-neighbour overload-machine}; do
  case $c in
    overload) bin/overload "${common[@]}" -name overload -heavy "${OVERLOAD_HEAVY:-40}" ;;
    overload-spread) bin/overload "${common[@]}" -name overload-spread -heavy 100 -account overload-spread ;;
    overload-neighbour) bin/overload "${common[@]}" -name overload-neighbour -heavy "${OVERLOAD_HEAVY:-40}" -neighbour "${OVERLOAD_NEIGHBOUR:-2}" ;;
    overload-machine) bin/overload "${common[@]}" -name overload-machine -heavy-conc 0 -spin "${OVERLOAD_SPIN:-3}" ;;
    *) echo "bench/overload.sh: unknown case $c" >&2; exit 2 ;;
  esac
  echo
done
