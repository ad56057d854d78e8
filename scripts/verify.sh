#!/usr/bin/env bash
# Checks a deployed geogate the way a user would, with curl:
#
#   scripts/verify.sh [BASE_URL] [API_KEY]      (defaults: http://localhost:8000 demo)
#
# Set REDIS_URL (redis://host:port/db) to also inspect the rate limiter's
# sorted set with redis-cli. Prints PASS/FAIL per check and a summary;
# exits non-zero when any check fails. Needs curl; redis-cli only for the
# Redis sub-check.
set -uo pipefail

BASE=${1:-http://localhost:8000}
BASE=${BASE%/}
KEY=${2:-demo}
WITHIN="$BASE/within?lng=13.4&lat=52.5&radius=500"

pass=0
fail=0
skip=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ok()   { pass=$((pass + 1)); printf 'PASS  %s\n' "$1"; }
bad()  { fail=$((fail + 1)); printf 'FAIL  %s\n' "$1"; [ -n "${2:-}" ] && printf '      %s\n' "$2"; return 0; }
note() { skip=$((skip + 1)); printf 'SKIP  %s\n' "$1"; }

# fetch URL [curl args...]: sets $code, $body and the headers file $tmp/h.
fetch() {
  local url=$1
  shift
  code=$(curl -sS --max-time 10 -o "$tmp/b" -D "$tmp/h" -w '%{http_code}' "$@" "$url" 2>"$tmp/err") || code=000
  body=$(tr -d '\000' <"$tmp/b" 2>/dev/null || true)
  [ "$code" = 000 ] && body=$(cat "$tmp/err")
  return 0
}
header() { grep -i "^$1:" "$tmp/h" | head -n1 | cut -d: -f2- | tr -d '\r' | sed 's/^ *//'; }
short() { printf '%s' "$1" | tr '\n' ' ' | cut -c1-300; }

# expect NAME WANT_CODE PATTERN...: the last fetch answered WANT_CODE and
# its body contains every PATTERN (fixed strings).
expect() {
  local name=$1 want=$2
  shift 2
  if [ "$code" != "$want" ]; then
    bad "$name" "got HTTP $code, want $want: $(short "$body")"
    return
  fi
  for p in "$@"; do
    if ! grep -qF -- "$p" "$tmp/b"; then
      bad "$name" "body lacks $p: $(short "$body")"
      return
    fi
  done
  ok "$name"
}

echo "geogate verify: $BASE (API key: ${KEY:+given})"
echo

fetch "$BASE/healthz"
expect "GET /healthz is 200 ok" 200 '"status":"ok"'

fetch "$BASE/readyz"
expect "GET /readyz is 200 with postgis and redis ok" 200 '"postgis":"ok"' '"redis":"ok"'

fetch "$BASE/openapi.json"
expect "GET /openapi.json is an OpenAPI 3.1 document with /within" 200 '"openapi":"3.1' '"/within"'

fetch "$BASE/docs"
if [ "$code" = 200 ] && grep -q 'swagger-ui-bundle.js' "$tmp/b" && [[ "$(header content-security-policy)" == *"script-src 'self'"* ]]; then
  fetch "$BASE/docs/assets/swagger-ui/swagger-ui-bundle.js"
  expect "GET /docs serves Swagger UI and its bundled assets" 200 'SwaggerUIBundle'
else
  bad "GET /docs serves Swagger UI and its bundled assets" "HTTP $code: $(short "$body")"
fi

fetch "$BASE/redoc"
expect "GET /redoc serves ReDoc" 200 'redoc.standalone.js' 'spec-url="openapi.json"'

fetch "$WITHIN" -H "x-api-key: $KEY"
expect "GET /within near Berlin is a GeoJSON FeatureCollection" 200 '"type":"FeatureCollection"' '"distance_m":'
if [ "$code" = 200 ] && [ -z "$(header ratelimit-policy)" ]; then
  bad "GET /within carries RateLimit headers" "no RateLimit-Policy header"
elif [ "$code" = 200 ]; then
  ok "GET /within carries RateLimit headers ($(header ratelimit-policy))"
fi

fetch "$BASE/within?lng=13.4&lat=52.5&radius=-5" -H "x-api-key: $KEY"
expect "GET /within with radius=-5 is a 422 naming query.radius" 422 '"detail":[' '"loc":["query","radius"]'

fetch "$BASE/geofences/999999999" -H "x-api-key: $KEY"
expect "GET /geofences/999999999 is a 404 in {\"detail\": ...} shape" 404 '"detail":"'

fetch "$BASE/no/such/route"
expect "GET /no/such/route is a 404 in {\"detail\": ...} shape" 404 '"detail":"Not Found"'

fetch "$BASE/tiles/places.json" -H "x-api-key: $KEY"
expect "GET /tiles/places.json is TileJSON 3.0.0" 200 '"tilejson":"3.0.0"' '/tiles/places/{z}/{x}/{y}.mvt'

fetch "$BASE/tiles/places/4/8/5.mvt" -H "x-api-key: $KEY"
if [ "$code" = 200 ] && [ "$(header content-type)" = application/vnd.mapbox-vector-tile ]; then
  ok "GET /tiles/places/4/8/5.mvt is a vector tile (X-Cache: $(header x-cache))"
else
  bad "GET /tiles/places/4/8/5.mvt is a vector tile" "HTTP $code, Content-Type $(header content-type)"
fi

# The seed's check: with the geofence policy at 10 per second, 12 requests
# in quick succession give ten 200s and then two 429s. The requests above
# spent part of this second's budget, so wait for a fresh window first.
sleep 1.1
# One curl for all twelve, on one kept-alive connection, so that the burst
# fits in the window even on a slow client.
burst=()
for _ in $(seq 1 12); do burst+=(-o /dev/null "$WITHIN"); done
start=$(date +%s%N)
got=$(curl -s --max-time 10 -w '%{http_code} ' -H "x-api-key: $KEY" "${burst[@]}")
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
got=${got% }
want="200 200 200 200 200 200 200 200 200 200 429 429"
if [ "$got" = "$want" ]; then
  ok "12 requests to /within in ${elapsed_ms} ms: ten 200s then two 429s"
elif [ "$elapsed_ms" -ge 1000 ]; then
  bad "12 requests to /within: ten 200s then two 429s" "the burst took ${elapsed_ms} ms, longer than the 1 s window, so it cannot show the limit: $got"
else
  bad "12 requests to /within: ten 200s then two 429s" "got: $got"
fi

if [ -z "${REDIS_URL:-}" ]; then
  note "Redis sorted set rl:geofence:key:$KEY (set REDIS_URL=redis://host:port/db to inspect it)"
elif ! command -v redis-cli >/dev/null; then
  note "Redis sorted set rl:geofence:key:$KEY (redis-cli is not installed)"
else
  zcard=$(redis-cli -u "$REDIS_URL" ZCARD "rl:geofence:key:$KEY" 2>&1)
  pttl=$(redis-cli -u "$REDIS_URL" PTTL "rl:geofence:key:$KEY" 2>&1)
  if [ "$zcard" = 10 ] && [[ "$pttl" =~ ^[0-9]+$ ]] && [ "$pttl" -le 1000 ]; then
    ok "Redis: ZCARD rl:geofence:key:$KEY = 10, PTTL = $pttl ms (<= 1000)"
  else
    bad "Redis: ZCARD rl:geofence:key:$KEY = 10 and PTTL <= 1000" "ZCARD = $zcard, PTTL = $pttl"
  fi
fi

echo
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
