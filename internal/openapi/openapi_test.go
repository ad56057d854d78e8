package openapi_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/httpx"
	"github.com/geogate/geogate/internal/openapi"
	"github.com/geogate/geogate/internal/openapi/contract"
)

func newRouter(t *testing.T) *gin.Engine {
	t.Helper()
	r := httpx.NewRouter(slog.New(slog.DiscardHandler), nil, httpx.TrustedProxies{})
	d, err := openapi.New(openapi.Limits{})
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	r.GET("/openapi.json", d.Spec)
	r.GET("/docs", d.SwaggerUI)
	r.GET("/redoc", d.Redoc)
	r.GET("/docs/assets/*filepath", d.Asset)
	return r
}

func TestDocumentIsValidOpenAPI31(t *testing.T) {
	doc, err := contract.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Errorf("openapi = %q, want 3.1.x", doc.OpenAPI)
	}
	for _, name := range []string{"ApiKeyAuth", "BearerAuth"} {
		if doc.Components.SecuritySchemes[name] == nil {
			t.Errorf("components.securitySchemes lacks %s", name)
		}
	}
	for _, h := range []string{"RateLimit", "RateLimit-Policy", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "Retry-After"} {
		if doc.Components.Headers[h] == nil {
			t.Errorf("components.headers lacks %s", h)
		}
	}
}

// TestEveryOperationDeclaresItsScope keeps security requirements and
// x-scopes in step: a route that needs a scope says so in both.
func TestEveryOperationDeclaresItsScope(t *testing.T) {
	doc, err := contract.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			raw, ok := op.Extensions["x-scopes"]
			if !ok {
				if op.Security != nil && len(*op.Security) > 0 && len((*op.Security)[0]) > 0 {
					t.Errorf("%s %s has security requirements but no x-scopes", method, path)
				}
				continue
			}
			scopes, _ := raw.([]any)
			if op.Security == nil {
				t.Errorf("%s %s: x-scopes %v but no security requirements", method, path, scopes)
				continue
			}
			for _, req := range *op.Security {
				for scheme, got := range req {
					if len(got) != len(scopes) || (len(got) > 0 && got[0] != scopes[0]) {
						t.Errorf("%s %s: %s scopes = %v, want x-scopes %v", method, path, scheme, got, scopes)
					}
				}
			}
		}
	}
}

func TestServedDocumentIsTheYAML(t *testing.T) {
	r := newRouter(t)
	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest("GET", "/openapi.json", nil))
	if w.Code != 200 {
		t.Fatalf("GET /openapi.json = %d, want 200", w.Code)
	}
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var got map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got["openapi"] != "3.1.0" {
		t.Errorf("openapi = %v, want 3.1.0", got["openapi"])
	}
	paths, _ := got["paths"].(map[string]any)
	if _, ok := paths["/within"]; !ok {
		t.Errorf("paths lacks /within: %v", paths)
	}
	tile, _ := paths["/tiles/{layer}/{z}/{x}/{y}.pbf"].(map[string]any)
	if _, ok := tile["get"].(map[string]any); !ok {
		t.Errorf("the .pbf tile path has no get operation (YAML alias not expanded?): %v", tile)
	}
	// Swagger UI lists paths in document order: keep the YAML's.
	if i, j := strings.Index(w.Body.String(), `"/within"`), strings.Index(w.Body.String(), `"/healthz"`); i < 0 || j < i {
		t.Errorf("/within should come before /healthz as in the YAML")
	}

	etag := w.Header().Get("ETag")
	req := httptest.NewRequest("GET", "/openapi.json", nil)
	req.Header.Set("If-None-Match", etag)
	w = httptest.NewRecorder()
	r.ServeHTTP(w, req)
	if w.Code != http.StatusNotModified {
		t.Errorf("GET /openapi.json with If-None-Match = %d, want 304", w.Code)
	}
}

func TestPages(t *testing.T) {
	r := newRouter(t)
	tests := []struct {
		path, wantType, wantBody string
		wantCSP                  bool
	}{
		{"/docs", "text/html", "swagger-ui-bundle.js", true},
		{"/redoc", "text/html", "redoc.standalone.js", true},
		{"/docs/assets/docs.js", "text/javascript", "SwaggerUIBundle", false},
		{"/docs/assets/swagger-ui/swagger-ui-bundle.js", "text/javascript", "SwaggerUIBundle", false},
		{"/docs/assets/swagger-ui/swagger-ui.css", "text/css", ".swagger-ui", false},
		{"/docs/assets/redoc/redoc.standalone.js", "text/javascript", "redoc", false},
		{"/docs/assets/swagger-ui/LICENSE", "text/plain", "Apache License", false},
		{"/docs/assets/redoc/LICENSE", "text/plain", "MIT License", false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			w := httptest.NewRecorder()
			r.ServeHTTP(w, httptest.NewRequest("GET", tt.path, nil))
			if w.Code != 200 {
				t.Fatalf("GET %s = %d, want 200", tt.path, w.Code)
			}
			if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, tt.wantType) {
				t.Errorf("Content-Type = %q, want %s", ct, tt.wantType)
			}
			if !strings.Contains(w.Body.String(), tt.wantBody) {
				t.Errorf("body lacks %q", tt.wantBody)
			}
			csp := w.Header().Get("Content-Security-Policy")
			if tt.wantCSP && csp != openapi.PageContentSecurityPolicy {
				t.Errorf("Content-Security-Policy = %q, want the page policy", csp)
			}
			if !tt.wantCSP && csp != httpx.APIContentSecurityPolicy {
				t.Errorf("Content-Security-Policy = %q, want the API policy", csp)
			}
		})
	}
}

func TestAssetsGzipAndMissing(t *testing.T) {
	r := newRouter(t)
	req := httptest.NewRequest("GET", "/docs/assets/swagger-ui/swagger-ui-bundle.js", nil)
	req.Header.Set("Accept-Encoding", "br, gzip;q=0.8")
	w := httptest.NewRecorder()
	r.ServeHTTP(w, req)
	if w.Header().Get("Content-Encoding") != "gzip" {
		t.Fatalf("Content-Encoding = %q, want gzip", w.Header().Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(w.Body)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil || !strings.Contains(string(b), "SwaggerUIBundle") {
		t.Errorf("gzip body does not decompress to the bundle: %v", err)
	}

	for _, path := range []string{"/docs/assets/nope.js", "/docs/assets/../openapi.yaml", "/docs/assets/docs.html", "/docs/assets/"} {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		if w.Code != 404 || !strings.Contains(w.Body.String(), `"detail"`) {
			t.Errorf("GET %s = %d %s, want 404 with detail", path, w.Code, w.Body)
		}
	}
}

// TestLimitsInDocument checks that the served document states the
// configured limits and stays valid.
func TestLimitsInDocument(t *testing.T) {
	b, err := openapi.JSON(openapi.Limits{MaxRadius: 2500.5, DefaultLimit: 7, MaxLimit: 50, MaxBatchPoints: 9})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := contract.LoadData(context.Background(), b)
	if err != nil {
		t.Fatalf("the document with limits is not valid: %v", err)
	}
	params := doc.Components.Parameters
	if got := *params["Radius"].Value.Schema.Value.Max; got != 2500.5 {
		t.Errorf("radius maximum = %v, want 2500.5", got)
	}
	lim := params["PageLimit"].Value.Schema.Value
	if *lim.Max != 50 || lim.Default != float64(7) {
		t.Errorf("limit maximum, default = %v, %v; want 50, 7", *lim.Max, lim.Default)
	}
	if got := *doc.Components.Schemas["ContainsBatch"].Value.Properties["points"].Value.MaxItems; got != 9 {
		t.Errorf("points maxItems = %d, want 9", got)
	}
	whole, err := openapi.JSON(openapi.Limits{MaxRadius: 5000})
	if err != nil || !strings.Contains(string(whole), `"maximum":5000}`) {
		t.Errorf("a whole radius should be written as an integer: %v", err)
	}
	def, err := openapi.JSON(openapi.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(def), `"maximum":100000}`) {
		t.Errorf("with no limits the document should keep the written radius maximum 100000")
	}
}

// TestServedJSONHasNoDuplicateKeys guards against YAML merges that leave a
// key twice in an object: parsers disagree on which one wins.
func TestServedJSONHasNoDuplicateKeys(t *testing.T) {
	b, err := openapi.JSON(openapi.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if dups := duplicateKeys(json.NewDecoder(strings.NewReader(string(b))), "$"); len(dups) > 0 {
		t.Errorf("keys that appear twice in one object: %v", dups)
	}
	if dups := duplicateKeys(json.NewDecoder(strings.NewReader(`{"a":{"b":1,"c":[{"b":2,"b":3}]},"a":2}`)), "$"); len(dups) != 2 {
		t.Errorf("duplicateKeys found %v in a sample with two", dups)
	}
}

// duplicateKeys reads one JSON value from dec and returns the paths of the
// keys that repeat within an object.
func duplicateKeys(dec *json.Decoder, at string) []string {
	tok, err := dec.Token()
	if err != nil {
		return []string{at + ": " + err.Error()}
	}
	var out []string
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			k, _ := dec.Token()
			key, _ := k.(string)
			if seen[key] {
				out = append(out, at+"."+key)
			}
			seen[key] = true
			out = append(out, duplicateKeys(dec, at+"."+key)...)
		}
		_, _ = dec.Token()
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			out = append(out, duplicateKeys(dec, fmt.Sprintf("%s[%d]", at, i))...)
		}
		_, _ = dec.Token()
	}
	return out
}

// TestQGISFindsTheFeaturesPageSize reads the served document as QGIS's
// OGC API Features provider does (QgsOapifApiRequest): the page size
// comes from components.parameters.limit, by that exact name, and the
// items operation must name it.
func TestQGISFindsTheFeaturesPageSize(t *testing.T) {
	b, err := openapi.JSON(openapi.Limits{FeaturesDefaultLimit: 20, FeaturesMaxLimit: 5000})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Parameters map[string]struct {
				Name   string
				Schema struct{ Maximum, Default json.Number }
			}
		}
		Paths map[string]struct {
			Get struct{ Parameters []map[string]any }
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	limit := doc.Components.Parameters["limit"]
	if limit.Name != "limit" || limit.Schema.Maximum != "5000" || limit.Schema.Default != "20" {
		t.Errorf("components.parameters.limit = %+v, want name limit, maximum 5000, default 20", limit)
	}
	var refs []any
	for _, p := range doc.Paths["/collections/{collectionId}/items"].Get.Parameters {
		refs = append(refs, p["$ref"])
	}
	if !slices.Contains(refs, any("#/components/parameters/limit")) {
		t.Errorf("the items operation's parameters %v do not name #/components/parameters/limit", refs)
	}
}
