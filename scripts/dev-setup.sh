#!/usr/bin/env bash
# Provisions the development API key: id "demo", secret "demo", every
# scope (admin included: it can create, change and revoke every key), no
# expiry. Run by scripts/run.sh after the migrations; safe to run
# again (the key is reset to exactly this). Never run it against a
# production database.
set -euo pipefail
cd "$(dirname "$0")/.."

[ -x bin/api ] || go build -o bin/api ./cmd/api
if ! out=$(bin/api keys create --name demo --secret demo --scopes all --replace \
  --notes "development key from make run; not for production" 2>&1); then
  echo "dev-setup: could not create the demo key: $out" >&2
  exit 1
fi
echo "dev-setup: API key 'demo' (secret 'demo', all scopes, admin included) is ready. FOR DEVELOPMENT ONLY."
echo "           curl -H 'x-api-key: demo' 'http://localhost:${PORT:-8000}/within?lng=13.4&lat=52.5&radius=500'"
