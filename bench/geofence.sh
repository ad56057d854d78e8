#!/usr/bin/env bash
# Proximity and containment benchmark: /within at 1 km and 20 km through the
# HTTP API of a real `api serve` next to the identical SQL through pgx at
# the same concurrency; points/s for batches of 1,000 points through
# POST /geofences/contains next to the naive ST_Intersects. Uses
# DATABASE_URL and REDIS_URL when set, else the private dev services.
#   GEOFENCE_CONC (4,16,32), GEOFENCE_DUR (5s), GEOFENCE_RADII (1000,20000) and
#   GEOFENCE_RUNS (1: runs per case, alternating sides, medians printed) tune it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${DATABASE_URL:-}" ] || [ -z "${REDIS_URL:-}" ]; then
  env_lines=$(scripts/services.sh start dev)
  DATABASE_URL=${DATABASE_URL:-$(echo "$env_lines" | sed -n 's/^DATABASE_URL=//p')}
  REDIS_URL=${REDIS_URL:-$(echo "$env_lines" | sed -n 's/^REDIS_URL=//p')}
fi
go build -o bin/api ./cmd/api
go run ./bench/geofence -db "$DATABASE_URL" -redis "$REDIS_URL" -api bin/api \
  -c "${GEOFENCE_CONC:-4,16,32}" -d "${GEOFENCE_DUR:-5s}" -r "${GEOFENCE_RADII:-1000,20000}" -runs "${GEOFENCE_RUNS:-1}"
