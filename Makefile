# geogate: `make run` serves the demo on :8000, `make test` runs every test.
.PHONY: run test soak bench lint stop build fmt verify

run:
	scripts/run.sh

test:
	scripts/test.sh

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
