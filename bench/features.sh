#!/usr/bin/env bash
# OGC API – Features benchmark: pages of 1,000 places through the items
# route of a real `api serve` next to the identical SQL through pgx at the
# same concurrency, the same over a CQL2 spatial filter, and a whole-layer
# copy of places with ogr2ogr through geogate's OAPIF next to ogr2ogr
# straight from PostgreSQL. Uses DATABASE_URL and REDIS_URL when set, else
# the private dev services.
#   FEATURES_CONC (8), FEATURES_DUR (5s), FEATURES_RUNS (1: runs per case,
#   alternating sides, medians printed), FEATURES_LIMIT (1000: features per
#   page) and FEATURES_OGR_TRIALS (3: trials of each copy, 0 skips them)
#   tune it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${DATABASE_URL:-}" ] || [ -z "${REDIS_URL:-}" ]; then
  env_lines=$(scripts/services.sh start dev)
  DATABASE_URL=${DATABASE_URL:-$(echo "$env_lines" | sed -n 's/^DATABASE_URL=//p')}
  REDIS_URL=${REDIS_URL:-$(echo "$env_lines" | sed -n 's/^REDIS_URL=//p')}
fi
go build -o bin/api ./cmd/api
go run ./bench/features -db "$DATABASE_URL" -redis "$REDIS_URL" -api bin/api \
  -c "${FEATURES_CONC:-8}" -d "${FEATURES_DUR:-5s}" -runs "${FEATURES_RUNS:-1}" -limit "${FEATURES_LIMIT:-1000}" -ogr-trials "${FEATURES_OGR_TRIALS:-3}"
