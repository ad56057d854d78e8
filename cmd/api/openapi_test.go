package main

import (
	"context"
	"log/slog"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/config"
	"github.com/geogate/geogate/internal/openapi/contract"
	"github.com/geogate/geogate/internal/testenv"
)

// routeAliases names the documented paths behind Gin routes whose last
// parameter carries a suffix: Gin cannot route /tiles/{layer}.json apart
// from /tiles/{layer}, so the tile handlers take the suffix off themselves.
var routeAliases = map[string][]string{
	"/tiles/{layer}":             {"/tiles/{layer}.json"},
	"/tiles/{layer}/{z}/{x}/{y}": {"/tiles/{layer}/{z}/{x}/{y}.mvt", "/tiles/{layer}/{z}/{x}/{y}.pbf"},
}

// servedRoutes builds the real handler, as serve does, and lists its routes.
func servedRoutes(t *testing.T) []contract.Route {
	t.Helper()
	pool, dbURL := testenv.DBWithURL(t)
	cfg, err := config.Load(envMap(map[string]string{
		"DATABASE_URL": dbURL,
		"REDIS_URL":    testenv.Getenv(t, "TEST_REDIS_URL"),
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h, err := newHandler(ctx, cfg, slog.New(slog.DiscardHandler), deps{db: pool, redis: testenv.Redis(t)})
	if err != nil {
		t.Fatalf("newHandler() = %v", err)
	}
	engine, ok := h.(*gin.Engine)
	if !ok {
		t.Fatalf("newHandler() returned %T, want *gin.Engine to list its routes", h)
	}
	var out []contract.Route
	for _, r := range engine.Routes() {
		out = append(out, contract.Route{Method: r.Method, Path: r.Path})
	}
	return out
}

// TestRoutesMatchOpenAPI fails on any route the router serves that the
// document lacks, and on any documented operation nothing serves.
func TestRoutesMatchOpenAPI(t *testing.T) {
	doc, err := contract.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	served := servedRoutes(t)
	undocumented, unserved := contract.CompareRoutes(served, doc, routeAliases, contract.Undocumented)
	for _, r := range undocumented {
		t.Errorf("%s is served but not in internal/openapi/openapi.yaml", r)
	}
	for _, r := range unserved {
		t.Errorf("%s is in internal/openapi/openapi.yaml but not served", r)
	}
	if len(served) < 10 {
		t.Errorf("only %d routes served; the listing is broken", len(served))
	}
}
