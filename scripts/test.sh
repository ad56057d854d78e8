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

# The client test of OGC tiles reads one with GDAL's ogrinfo (its MVT
# driver); install Debian's GDAL tools when they are missing.
if ! command -v ogrinfo >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "installing gdal-bin for the GDAL client test"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq gdal-bin >/dev/null
  else
    echo "ogrinfo is missing: apt-get install gdal-bin" >&2
  fi
fi

# The client tests drive QGIS headless and OWSLib from Python scripts
# (cmd/api/testdata), with Debian's own python3, for which these packages
# are built; install them when that python3 cannot import them.
for pkg in qgis:python3-qgis owslib:python3-owslib; do
  if ! /usr/bin/python3 -c "import ${pkg%%:*}" >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ]; then
      echo "installing ${pkg#*:} for the GIS client tests"
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq && apt-get install -y -qq "${pkg#*:}" >/dev/null
    else
      echo "${pkg#*:} is missing: apt-get install ${pkg#*:}" >&2
    fi
  fi
done

# The API description passes Redocly's recommended rules (redocly.yaml at
# the root, exceptions with reasons in .redocly.lint-ignore.yaml). npx
# fetches the pinned version into npm's cache once; later runs start it
# from there in about a second. It needs Node.js 20.19 or later.
redocly=@redocly/cli@2.77.0
if ! command -v npx >/dev/null 2>&1 ||
  ! node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)'; then
  echo "the OpenAPI lint ($redocly) needs Node.js 20.19 or later with npm and npx; found: $(node --version 2>&1 || true)" >&2
  exit 1
fi
echo "lint internal/openapi/openapi.yaml with $redocly"
REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true NO_UPDATE_NOTIFIER=1 \
  npx --yes "$redocly" lint --format=stylish

# services.sh reuses and stops only the servers it started: checked first,
# on ports of its own (10-15 s), since everything below relies on it.
scripts/services_test.sh

env_lines=$(scripts/services.sh start test)
TEST_DATABASE_URL=$(echo "$env_lines" | sed -n 's/^DATABASE_URL=//p')
TEST_REDIS_URL=$(echo "$env_lines" | sed -n 's/^REDIS_URL=//p')
TEST_DATABASE_REPLICA_URL=$(echo "$env_lines" | sed -n 's/^DATABASE_REPLICA_URL=//p')
export TEST_DATABASE_URL TEST_REDIS_URL TEST_DATABASE_REPLICA_URL
echo "test services: $TEST_DATABASE_URL $TEST_REDIS_URL"

go test -race -count=1 -timeout 30m "$@" ./...

# Fuzz targets run for a bounded time each; their seed corpora live in
# testdata/fuzz and already ran above as ordinary tests. FUZZTIME may also
# be a count of inputs (e.g. 5000x): that budget has no deadline, so the
# race below cannot happen, but a DB-bound target runs a few inputs a
# second where a parser runs thousands, so no one count keeps every target
# near 10 s.
fuzztime=${FUZZTIME:-10s}

# execs_of OUTPUT: how many inputs the fuzz engine ran, from its last
# "fuzz: elapsed: 10s, execs: N (...)" line; 0 without one (the time went
# on the corpus's baseline coverage, or the engine never started).
execs_of() {
  local n
  n=$(sed -n 's/^fuzz: elapsed: [^,]*, execs: \([0-9][0-9]*\) .*/\1/p' <<<"$1" | tail -n1)
  echo "${n:-0}"
}

# fuzz_one runs one target; it passes only when the engine ran at least one
# input and none failed. Go 1.26's fuzz coordinator can report its own
# -fuzztime deadline as a failure on a busy machine (golang/go#75804, fixed
# in Go 1.27): a bare "context deadline exceeded" with no failing input. A
# real finding always writes its input to testdata/fuzz and names it, so
# that bare report counts as the end of the budget, provided inputs ran.
# A run that ran none (either way) is repeated once, then fails.
fuzz_summary=()
fuzz_one() { # package target
  local out status execs attempt t0
  for attempt in 1 2; do
    t0=$(date +%s)
    status=0
    out=$(go test -run '^$' -fuzz "^$2\$" -fuzztime "$fuzztime" "$1" 2>&1) || status=$?
    echo "$out"
    execs=$(execs_of "$out")
    if [ "$status" -ne 0 ]; then
      if ! grep -q 'context deadline exceeded' <<<"$out" || grep -qE 'Failing input written|panic:|_test\.go:[0-9]+:' <<<"$out"; then
        return 1
      fi
      echo "fuzz $2: the fuzz engine's deadline race (golang/go#75804), no failing input (attempt $attempt)" >&2
    fi
    if [ "$execs" -gt 0 ]; then
      echo "fuzz $2: $execs execs in $(($(date +%s) - t0)) s, none failed"
      fuzz_summary+=("$(printf '%-24s %-48s %10s execs' "$2" "${1#github.com/geogate/geogate/}" "$execs")")
      return 0
    fi
    echo "fuzz $2: the engine ran no input within $fuzztime (attempt $attempt)" >&2
  done
  echo "fuzz $2: FAIL: no input fuzzed in two runs of $fuzztime; give it more (FUZZTIME=30s)" >&2
  return 1
}

fuzz_start=$(date +%s)
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //'); do
    echo "fuzz $pkg $target for $fuzztime"
    fuzz_one "$pkg" "$target"
  done
done
echo "fuzz: ${#fuzz_summary[@]} targets in $(($(date +%s) - fuzz_start)) s:"
printf '  %s\n' "${fuzz_summary[@]}"
