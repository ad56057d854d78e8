#!/usr/bin/env bash
# Runs TestSoak (cmd/api) for GEOGATE_SOAK (default 5m; make test runs it for 60s) against fresh
# private PostGIS and Redis test instances, as make test does.
set -euo pipefail
cd "$(dirname "$0")/.."

env_lines=$(scripts/services.sh start test)
TEST_DATABASE_URL=$(echo "$env_lines" | sed -n 's/^DATABASE_URL=//p')
TEST_REDIS_URL=$(echo "$env_lines" | sed -n 's/^REDIS_URL=//p')
GEOGATE_SOAK=${GEOGATE_SOAK:-5m}
export TEST_DATABASE_URL TEST_REDIS_URL GEOGATE_SOAK
echo "soak for $GEOGATE_SOAK against $TEST_DATABASE_URL $TEST_REDIS_URL"

go test -race -count=1 -timeout 60m -run '^TestSoak$' -v "$@" ./cmd/api/
