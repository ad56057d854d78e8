package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"

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

// servedRoutes builds the services as serve does and returns routes(),
// after checking that the router serves exactly those.
func servedRoutes(t *testing.T) []route {
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
	log := slog.New(slog.DiscardHandler)
	s, err := newServices(ctx, cfg, log, deps{db: pool, redis: testenv.Redis(t), draining: new(atomic.Bool)})
	if err != nil {
		t.Fatalf("newServices() = %v", err)
	}
	rs := routes(s)
	engine, err := newRouter(cfg, log, s, rs)
	if err != nil {
		t.Fatalf("newRouter() = %v", err)
	}
	var listed, served []string
	for _, r := range rs {
		listed = append(listed, r.method+" "+r.path)
		if r.method == "GET" {
			listed = append(listed, "HEAD "+r.path)
		}
	}
	for _, r := range engine.Routes() {
		served = append(served, r.Method+" "+r.Path)
	}
	slices.Sort(listed)
	slices.Sort(served)
	if !slices.Equal(listed, served) {
		t.Errorf("the router serves %v, want exactly the routes of routes(), with HEAD for each GET: %v", served, listed)
	}
	return rs
}

// documented are the routes the API description should hold: all but the
// 405 refusals.
func documented(rs []route) []contract.Route {
	var out []contract.Route
	for _, r := range rs {
		if r.scope != nobody {
			out = append(out, contract.Route{Method: r.method, Path: r.path})
		}
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
	served := documented(servedRoutes(t))
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

// TestRouteScopesMatchOpenAPI: the scope each route requires is the one
// its operation states in x-scopes, and a route that needs none states
// none.
func TestRouteScopesMatchOpenAPI(t *testing.T) {
	doc, err := contract.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range servedRoutes(t) {
		if r.scope == nobody || contract.Undocumented(r.path) {
			continue
		}
		path := contract.TemplatePath(r.path)
		paths := routeAliases[path]
		if paths == nil {
			paths = []string{path}
		}
		for _, p := range paths {
			item := doc.Paths.Find(p)
			if item == nil || item.GetOperation(r.method) == nil {
				t.Errorf("%s %s: no operation in the document", r.method, p)
				continue
			}
			got, _ := item.GetOperation(r.method).Extensions["x-scopes"].([]any)
			want := []any{r.scope}
			if r.scope == anyone || r.scope == public {
				want = nil
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s %s: x-scopes %v, want %v as routes() requires", r.method, p, got, want)
			}
		}
	}
}
