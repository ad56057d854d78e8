#!/usr/bin/env bash
# Geofence events: positions per second through POST /positions (batches of
# 100, against 50,000 small polygon fences beside the demo countries, every
# transition committed), next to the same batches handed straight to
# events.Service.Report over pgx and to the fences layer's point-in-polygon
# statement alone (the floor under a report), and the time from a position
# sent to its event received by a local webhook. Uses DATABASE_URL and REDIS_URL when
# set, else the private dev services; the demo data and the fences in
# geogate_events_bench, made on first use.
#   EVENTS_DUR (4s), EVENTS_RUNS (3), EVENTS_CONC (4) tune it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${DATABASE_URL:-}" ] || [ -z "${REDIS_URL:-}" ]; then
  env_lines=$(scripts/services.sh start dev)
  DATABASE_URL=${DATABASE_URL:-$(echo "$env_lines" | sed -n 's/^DATABASE_URL=//p')}
  REDIS_URL=${REDIS_URL:-$(echo "$env_lines" | sed -n 's/^REDIS_URL=//p')}
fi
go build -o bin/api ./cmd/api
go run ./bench/events -db "$DATABASE_URL" -redis "$REDIS_URL" \
  -d "${EVENTS_DUR:-4s}" -runs "${EVENTS_RUNS:-3}" -c "${EVENTS_CONC:-4}"
