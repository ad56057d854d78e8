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

# services.sh reuses and stops only the servers it started: checked first,
# on ports of its own (about 10 s), since everything below relies on it.
scripts/services_test.sh

env_lines=$(scripts/services.sh start test)
TEST_DATABASE_URL=$(echo "$env_lines" | sed -n 's/^DATABASE_URL=//p')
TEST_REDIS_URL=$(echo "$env_lines" | sed -n 's/^REDIS_URL=//p')
export TEST_DATABASE_URL TEST_REDIS_URL
echo "test services: $TEST_DATABASE_URL $TEST_REDIS_URL"

go test -race -count=1 -timeout 30m "$@" ./...

# Fuzz targets run for a bounded time each; their seed corpora live in
# testdata/fuzz and already ran above as ordinary tests.
fuzztime=${FUZZTIME:-10s}

# fuzz_one runs one target. Go 1.26's fuzz coordinator can report its own
# -fuzztime deadline as a failure on a busy machine (golang/go#75804, fixed
# in Go 1.27): a bare "context deadline exceeded" with no failing input.
# A real finding always writes its input to testdata/fuzz and names it, so
# only that bare report is run again, once, and then let pass.
fuzz_one() { # package target
  local out attempt
  for attempt in 1 2; do
    if out=$(go test -run '^$' -fuzz "^$2\$" -fuzztime "$fuzztime" "$1" 2>&1); then
      echo "$out"
      return 0
    fi
    echo "$out"
    if ! grep -q 'context deadline exceeded' <<<"$out" || grep -qE 'Failing input written|panic:|_test\.go:[0-9]+:' <<<"$out"; then
      return 1
    fi
    echo "fuzz $2: the fuzz engine's deadline race (golang/go#75804), no failing input (attempt $attempt)" >&2
  done
}

for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //'); do
    echo "fuzz $pkg $target for $fuzztime"
    fuzz_one "$pkg" "$target"
  done
done
