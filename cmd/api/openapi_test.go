package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
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

// TestContractProxyCatchesDrift shows that the proxy every end-to-end test
// goes through reports an answer the document does not describe.
func TestContractProxyCatchesDrift(t *testing.T) {
	base, _ := startService(t, nil)
	c, err := contract.New(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		method string
		path   string
		status int
		body   string
		want   string // "" for no violation
	}{
		{"Conforms", "GET", "/healthz", 200, `{"status":"ok"}`, ""},
		{"UndocumentedStatus", "GET", "/healthz", 418, `{"detail":"teapot"}`, "418"},
		{"WrongBody", "GET", "/healthz", 200, `{"status":1}`, "does not match"},
		{"UnknownPathNot404", "GET", "/nowhere", 200, `{}`, "undocumented path"},
		{"Unknown404", "GET", "/nowhere", 404, `{"detail":"Not Found"}`, ""},
		{"Unknown404BadShape", "GET", "/nowhere", 404, `{"error":"nope"}`, "HTTPError"},
		{"InvalidRequestAccepted", "GET", "/within?lng=500&lat=52.5&radius=500", 200,
			`{"type":"FeatureCollection","features":[],"numberReturned":0,"links":[]}`, "rejects this request"},
		{"InvalidRequestRefused", "GET", "/within?lng=500&lat=52.5&radius=500", 422,
			`{"detail":[{"loc":["query","lng"],"msg":"Input should be between -180 and 180.","type":"out_of_range"}]}`, ""},
		{"422WithoutLoc", "GET", "/within?lng=500&lat=52.5&radius=500", 422, `{"detail":[{"msg":"bad","type":"x"}]}`, "does not match"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, "http://geogate.test"+tt.path, nil)
			h := http.Header{"Content-Type": {"application/json"}}
			got := strings.Join(c.Check(context.Background(), contract.Exchange{Request: req, Status: tt.status, Header: h, Body: []byte(tt.body)}), "\n")
			if tt.want == "" && got != "" {
				t.Errorf("Check() = %q, want no violation", got)
			}
			if tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("Check() = %q, want a violation mentioning %q", got, tt.want)
			}
		})
	}

	// And through the running service: a real exchange conforms.
	resp, err := http.Get(base + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"openapi":"3.1.0"`) {
		t.Errorf("GET /openapi.json through the proxy = %d, want 200 with the document", resp.StatusCode)
	}
}
