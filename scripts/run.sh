#!/usr/bin/env bash
# Starts geogate with demo data on :8000 (or $PORT). Uses DATABASE_URL and
# REDIS_URL when set; otherwise starts private instances under .data/dev.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${DATABASE_URL:-}" ] || [ -z "${REDIS_URL:-}" ]; then
  env_lines=$(scripts/services.sh start dev)
  : "${DATABASE_URL:=$(echo "$env_lines" | sed -n 's/^DATABASE_URL=//p')}"
  : "${REDIS_URL:=$(echo "$env_lines" | sed -n 's/^REDIS_URL=//p')}"
fi
export DATABASE_URL REDIS_URL
# The demo's sites table is open for writing, unless a layer file is set.
export LAYERS_CONFIG="${LAYERS_CONFIG:-configs/demo-layers.yaml}"

mkdir -p bin
go build -o bin/api ./cmd/api
bin/api migrate
bin/api import --layer places --if-empty data/cities.json.gz
bin/api import --layer geofences --if-empty data/countries-land-10km.geo.json.gz
[ -x scripts/dev-setup.sh ] && scripts/dev-setup.sh

echo
echo "geogate: http://localhost:${PORT:-8000}  (stop the private databases with: make stop)"
echo
exec bin/api serve --no-migrate
