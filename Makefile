# geogate: `make run` serves the demo on :8000, `make test` runs every test,
# `make check` is the quick loop while editing.
.PHONY: run test check soak bench lint stop build fmt verify

run:
	scripts/run.sh

test:
	scripts/test.sh

# The edit-test loop: gofmt, go vet and every test that needs no service.
# Under -short the helpers in internal/testenv skip the tests that need
# PostgreSQL, Redis, Chromium or minutes of load (make test runs them all).
# With -race, as make test, so the two share one build cache. On 2 busy
# cores: 20-30 s with a warm build cache (the tests alone 17 s, 6 s
# without -race), 2 s when nothing changed, 3.5 min with an empty cache.
check: lint
	go test -race -short ./...

# TestSoak for longer than the 60s of make test: GEOGATE_SOAK=10m make soak (default 5m).
soak:
	scripts/soak.sh

bench:
	scripts/bench.sh

verify:
	scripts/verify.sh $${BASE_URL:-http://localhost:8000} $${API_KEY:-demo}

build:
	go build -o bin/api ./cmd/api

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

stop:
	scripts/services.sh stop dev
	scripts/services.sh stop test
