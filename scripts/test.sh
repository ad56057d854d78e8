#!/usr/bin/env bash
# Runs the whole test suite against private PostGIS and Redis instances
# started for this run (fresh data every time).
set -euo pipefail
cd "$(dirname "$0")/.."

# The browser tests drive Debian's Chromium; install it when it is missing.
if ! command -v chromium >/dev/null 2>&1 && [ -z "${CHROMIUM:-}" ]; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "installing chromium for the browser tests"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq chromium >/dev/null
  else
    echo "chromium is missing: apt-get install chromium, or set CHROMIUM to a Chromium binary" >&2
  fi
fi

env_lines=$(scripts/services.sh start test)
TEST_DATABASE_URL=$(echo "$env_lines" | sed -n 's/^DATABASE_URL=//p')
TEST_REDIS_URL=$(echo "$env_lines" | sed -n 's/^REDIS_URL=//p')
export TEST_DATABASE_URL TEST_REDIS_URL
echo "test services: $TEST_DATABASE_URL $TEST_REDIS_URL"

go test -race -count=1 -timeout 30m "$@" ./...

# Fuzz targets run for a bounded time each; their seed corpora live in
# testdata/fuzz and already ran above as ordinary tests.
fuzztime=${FUZZTIME:-10s}
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //'); do
    echo "fuzz $pkg $target for $fuzztime"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
  done
done
