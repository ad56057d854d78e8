#!/usr/bin/env bash
# Authentication benchmark: verifications per second for an API key (cache
# hit and database lookup, against real PostGIS), for bearer tokens (HS256,
# RS256, ES256, EdDSA), a whole request through the middleware, and the
# spatial scope checks. Uses TEST_DATABASE_URL when set, else the private
# dev PostgreSQL (scripts/services.sh). AUTH_BENCHTIME (1s) tunes it.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${TEST_DATABASE_URL:-}" ]; then
  env_lines=$(scripts/services.sh start dev)
  TEST_DATABASE_URL=$(echo "$env_lines" | sed -n 's/^DATABASE_URL=//p')
  TEST_REDIS_URL=$(echo "$env_lines" | sed -n 's/^REDIS_URL=//p')
  export TEST_DATABASE_URL TEST_REDIS_URL
fi
echo "== auth: verifications/s (higher is better; -2 = GOMAXPROCS)"
go test -run '^$' -bench '^Benchmark(APIKey|Token|Spatial)$' -benchtime "${AUTH_BENCHTIME:-1s}" -count 1 ./internal/auth/ |
  grep -E '^(Benchmark|ok|FAIL|---)' || true
