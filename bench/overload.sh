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
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${DATABASE_URL:-}" ] || [ -z "${REDIS_URL:-}" ]; then
  env_lines=$(scripts/services.sh start dev)
  DATABASE_URL=${DATABASE_URL:-$(echo "$env_lines" | sed -n 's/^DATABASE_URL=//p')}
  REDIS_URL=${REDIS_URL:-$(echo "$env_lines" | sed -n 's/^REDIS_URL=//p')}
fi
go build -o bin/api ./cmd/api
go run ./bench/overload -db "$DATABASE_URL" -redis "$REDIS_URL" -api bin/api \
  -d "${OVERLOAD_DUR:-3s}" -runs "${OVERLOAD_RUNS:-3}" \
  -heavy "${OVERLOAD_HEAVY:-40}" -heavy-conc "${OVERLOAD_HEAVY_CONC:-80}" \
  -light "${OVERLOAD_LIGHT:-4}" -light-rate "${OVERLOAD_LIGHT_RATE:-20}"
