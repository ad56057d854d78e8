#!/usr/bin/env bash
# Tile benchmark: cold tiles/s and p99 through the tile handler (cache off)
# next to the identical SQL straight through pgx, and cached tiles/s and p99
# from Redis, for tile sets at z4, z8 and z12 of both layers. Uses
# DATABASE_URL and REDIS_URL when set, else the private dev services.
#   TILES_CONC (8), TILES_DUR (5s), TILES_SET (256), TILES_RUNS (1: runs of each
#   cold side, alternating, medians printed) tune it; TILES_CPUPROFILE=file
#   writes a CPU profile of the run (handler, pgx and Redis client in-process).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${DATABASE_URL:-}" ] || [ -z "${REDIS_URL:-}" ]; then
  env_lines=$(scripts/services.sh start dev)
  DATABASE_URL=${DATABASE_URL:-$(echo "$env_lines" | sed -n 's/^DATABASE_URL=//p')}
  REDIS_URL=${REDIS_URL:-$(echo "$env_lines" | sed -n 's/^REDIS_URL=//p')}
fi
go run ./bench/tiles -db "$DATABASE_URL" -redis "$REDIS_URL" -c "${TILES_CONC:-8}" -d "${TILES_DUR:-5s}" -n "${TILES_SET:-256}" -runs "${TILES_RUNS:-1}" \
  ${TILES_CPUPROFILE:+-cpuprofile "$TILES_CPUPROFILE"}
