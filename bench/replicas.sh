#!/usr/bin/env bash
# Reads from a streaming replica: /within through `api serve` with
# DATABASE_REPLICA_URLS next to the same service reading the primary
# alone. Starts the private dev services with their replica
# (GEOGATE_DEV_REPLICA=1) unless DATABASE_URL, DATABASE_REPLICA_URL and
# REDIS_URL are all set.
#   REPLICAS_CONC (8,32), REPLICAS_DUR (5s), REPLICAS_RUNS (3) tune it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${DATABASE_URL:-}" ] || [ -z "${DATABASE_REPLICA_URL:-}" ] || [ -z "${REDIS_URL:-}" ]; then
  env_lines=$(GEOGATE_DEV_REPLICA=1 scripts/services.sh start dev)
  DATABASE_URL=$(echo "$env_lines" | sed -n 's/^DATABASE_URL=//p')
  DATABASE_REPLICA_URL=$(echo "$env_lines" | sed -n 's/^DATABASE_REPLICA_URL=//p')
  REDIS_URL=$(echo "$env_lines" | sed -n 's/^REDIS_URL=//p')
fi
go build -o bin/api ./cmd/api
go run ./bench/replicas -db "$DATABASE_URL" -replica "$DATABASE_REPLICA_URL" -redis "$REDIS_URL" -api bin/api \
  -c "${REPLICAS_CONC:-8,32}" -d "${REPLICAS_DUR:-5s}" -runs "${REPLICAS_RUNS:-3}"
