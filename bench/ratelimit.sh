#!/usr/bin/env bash
# Rate limiter benchmark against real Redis: decisions/s and p50/p99 through
# ratelimit.Limiter next to the bare Lua script through go-redis, round trips
# per decision, and MEMORY USAGE per key for the exact log and the counter.
# Uses REDIS_URL when set, else the private dev Redis (scripts/services.sh).
#   RL_CONC (50), RL_DUR (5s), RL_RUNS (3), RL_KEYS (1000), RL_PIPELINE (16: also measure pipelined decisions; 0 skips) tune it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${REDIS_URL:-}" ]; then
  REDIS_URL=$(scripts/services.sh start dev | sed -n 's/^REDIS_URL=//p')
fi
go run ./bench/ratelimit -redis "$REDIS_URL" -c "${RL_CONC:-50}" -d "${RL_DUR:-5s}" -runs "${RL_RUNS:-3}" -keys "${RL_KEYS:-1000}" -pipeline "${RL_PIPELINE:-16}"
