# syntax=docker/dockerfile:1
# geogate: one static binary, `api`, on a distroless non-root base.
#   docker build -t geogate .
#   docker run --rm -e DATABASE_URL=... -e REDIS_URL=... -p 8000:8000 geogate

FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so that a code change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/api ./cmd/api

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/api /usr/local/bin/api
# Demo data for `api import` and the rate-limit policy example.
COPY data/*.gz /srv/geogate/data/
COPY configs/ /srv/geogate/configs/
WORKDIR /srv/geogate
USER nonroot:nonroot
EXPOSE 8000
ENV PORT=8000
ENTRYPOINT ["/usr/local/bin/api"]
CMD ["serve"]
