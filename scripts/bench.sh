#!/usr/bin/env bash
# Benchmarks, each next to its baseline in the same run. See README "Performance".
set -euo pipefail
cd "$(dirname "$0")/.."
bench/ratelimit.sh
bench/auth.sh
bench/geofence.sh
bench/tiles.sh
bench/import.sh
