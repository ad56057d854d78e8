#!/usr/bin/env bash
# Provisions the development API key: id "demo", secret "demo", every
# scope (admin included: it can create, change and revoke every key), no
# expiry; and the demo's empty sites table, open for writing. Run by
# scripts/run.sh after the migrations; safe to run again (the key is
# reset to exactly this). Never run it against a
# production database.
set -euo pipefail
cd "$(dirname "$0")/.."

[ -x bin/api ] || go build -o bin/api ./cmd/api
if ! out=$(bin/api keys create --name demo --secret demo --scopes all --replace \
  --notes "development key from make run; not for production" 2>&1); then
  echo "dev-setup: could not create the demo key: $out" >&2
  exit 1
fi
# The table the README's write walk-through uses.
if command -v psql >/dev/null && [ -n "${DATABASE_URL:-}" ]; then
  psql "$DATABASE_URL" -qX -v ON_ERROR_STOP=1 -f data/demo-sites.sql >/dev/null
else
  echo "dev-setup: no psql or DATABASE_URL: the demo's sites table (data/demo-sites.sql) was not made" >&2
fi
echo "dev-setup: API key 'demo' (secret 'demo', all scopes, admin included) is ready. FOR DEVELOPMENT ONLY."
echo "           curl -H 'x-api-key: demo' 'http://localhost:${PORT:-8000}/within?lng=13.4&lat=52.5&radius=500'"
