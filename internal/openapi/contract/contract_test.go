package contract

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/geogate/geogate/internal/openapi"
)

func newChecker(t *testing.T) *Checker {
	t.Helper()
	c, err := New(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func gz(s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	_, _ = w.Write([]byte(s))
	_ = w.Close()
	return b.Bytes()
}

func TestCheck(t *testing.T) {
	c := newChecker(t)
	const emptyPage = `{"type":"FeatureCollection","features":[],"numberReturned":0,"links":[]}`
	const badLng = "/within?lng=500&lat=52.5&radius=500"
	js := http.Header{"Content-Type": {"application/json"}}
	geo := http.Header{"Content-Type": {"application/geo+json"}}
	tests := []struct {
		name   string
		method string
		path   string
		status int
		header http.Header
		body   []byte
		want   string // "" for no violation
	}{
		{"Conforms", "GET", "/healthz", 200, js, []byte(`{"status":"ok"}`), ""},
		{"UndocumentedStatus", "GET", "/healthz", 418, js, []byte(`{"detail":"teapot"}`), "418"},
		{"WrongBody", "GET", "/healthz", 200, js, []byte(`{"status":1}`), "does not match"},
		{"UndocumentedContentType", "GET", "/healthz", 200, http.Header{"Content-Type": {"text/html"}}, []byte(`<p>ok`), "does not match"},
		{"UnknownPathNot404", "GET", "/nowhere", 200, js, []byte(`{}`), "undocumented path"},
		{"Unknown404", "GET", "/nowhere", 404, js, []byte(`{"detail":"Not Found"}`), ""},
		{"Unknown404BadShape", "GET", "/nowhere", 404, js, []byte(`{"error":"nope"}`), "HTTPError"},
		{"WrongMethod405", "PATCH", "/within", 405, js, []byte(`{"detail":"Method Not Allowed"}`), ""},
		{"WrongMethodServed", "PATCH", "/within", 200, js, []byte(`{}`), "undocumented method"},
		{"InvalidRequestAccepted", "GET", badLng, 200, geo, []byte(emptyPage), "rejects this request"},
		{"InvalidRequestRefused", "GET", badLng, 422, js,
			[]byte(`{"detail":[{"loc":["query","lng"],"msg":"Input should be between -180 and 180.","type":"out_of_range"}]}`), ""},
		{"422WithoutLoc", "GET", badLng, 422, js, []byte(`{"detail":[{"msg":"bad","type":"x"}]}`), "does not match"},
		{"422AsString", "GET", badLng, 422, js, []byte(`{"detail":"bad"}`), "does not match"},
		{"GzipBody", "GET", "/within?lng=1&lat=2&radius=3", 200,
			http.Header{"Content-Type": {"application/geo+json"}, "Content-Encoding": {"gzip"}}, gz(emptyPage), ""},
		{"GzipClaimedNotGzip", "GET", "/within?lng=1&lat=2&radius=3", 200,
			http.Header{"Content-Type": {"application/geo+json"}, "Content-Encoding": {"gzip"}}, []byte(emptyPage), "not gzip"},
		{"TileBinary", "GET", "/tiles/places/4/8/5.mvt", 200, http.Header{"Content-Type": {"application/vnd.mapbox-vector-tile"}}, []byte{0x1a, 0x02, 0x00}, ""},
		{"TileSuffixRouted", "GET", "/tiles/places.json", 200, js, []byte(`{"tilejson":"3.0.0","tiles":["x"],"vector_layers":[]}`), ""},
		{"DocsPageIgnored", "GET", "/docs", 200, http.Header{"Content-Type": {"text/html"}}, []byte(`<html>`), ""},
		{"RateLimited", "GET", "/within?lng=1&lat=2&radius=3", 429,
			http.Header{"Content-Type": {"application/problem+json"}, "Retry-After": {"1"}},
			[]byte(`{"type":"about:blank","title":"Too Many Requests","status":429,"detail":"Rate limit exceeded.","violated-policies":["geofence"]}`), ""},
		{"RateLimitedBadRetryAfter", "GET", "/within?lng=1&lat=2&radius=3", 429,
			http.Header{"Content-Type": {"application/problem+json"}, "Retry-After": {"0"}},
			[]byte(`{"status":429,"detail":"Rate limit exceeded.","violated-policies":["geofence"]}`), "Retry-After"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, "http://geogate.test"+tt.path, nil)
			got := strings.Join(c.Check(context.Background(), Exchange{Request: req, Status: tt.status, Header: tt.header, Body: tt.body}), "\n")
			if tt.want == "" && got != "" {
				t.Errorf("Check() = %q, want no violation", got)
			}
			if tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("Check() = %q, want a violation mentioning %q", got, tt.want)
			}
		})
	}
}

// TestBodyWithoutContentType checks that a body sent without a
// Content-Type is validated as JSON.
func TestBodyWithoutContentType(t *testing.T) {
	c := newChecker(t)
	js := http.Header{"Content-Type": {"application/json"}}
	ok := []byte(`{"results":[]}`)
	tests := []struct {
		name, body, want string
		status           int
	}{
		{"ValidJSON", `{"points":[]}`, "", 200},
		{"InvalidAccepted", `{"points":"x"}`, "rejects this request", 200},
		{"InvalidRefused", `{"points":"x"}`, "", 422},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "http://geogate.test/geofences/contains", nil)
			body := ok
			if tt.status == 422 {
				body = []byte(`{"detail":[{"loc":["body","points"],"msg":"Wrong JSON type.","type":"type_error"}]}`)
			}
			got := strings.Join(c.Check(context.Background(), Exchange{Request: req, RequestBody: []byte(tt.body), Status: tt.status, Header: js, Body: body}), "\n")
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("Check() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestIgnoresCORSPreflight(t *testing.T) {
	c := newChecker(t)
	req := httptest.NewRequest("OPTIONS", "http://geogate.test/within", nil)
	req.Header.Set("Access-Control-Request-Method", "GET")
	if got := c.Check(context.Background(), Exchange{Request: req, Status: 204, Header: http.Header{}}); got != nil {
		t.Errorf("Check(preflight) = %q, want nothing", got)
	}
}

func TestTemplatePath(t *testing.T) {
	tests := map[string]string{
		"/geofences/:id":         "/geofences/{id}",
		"/tiles/:layer/:z/:x/:y": "/tiles/{layer}/{z}/{x}/{y}",
		"/docs/assets/*filepath": "/docs/assets/{filepath}",
		"/healthz":               "/healthz",
		"/geofences/contains":    "/geofences/contains",
	}
	for in, want := range tests {
		if got := TemplatePath(in); got != want {
			t.Errorf("TemplatePath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCompareRoutes shows what the route-coverage test reports: a served
// route missing from the document, and a documented one nothing serves.
func TestCompareRoutes(t *testing.T) {
	doc, err := Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var served []Route
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if path == "/geofences/contains" && method == "POST" {
				continue // pretend it is not served
			}
			served = append(served, Route{Method: method, Path: strings.NewReplacer("{", ":", "}", "").Replace(path)})
		}
	}
	served = append(served,
		Route{Method: "GET", Path: "/extra/:thing"},
		Route{Method: "GET", Path: "/docs/assets/*filepath"},
		Route{Method: "OPTIONS", Path: "/within"},
	)
	undocumented, unserved := CompareRoutes(served, doc, nil, Undocumented)
	if diff := cmp.Diff([]string{"GET /extra/{thing}"}, undocumented); diff != "" {
		t.Errorf("undocumented (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"POST /geofences/contains"}, unserved); diff != "" {
		t.Errorf("unserved (-want +got):\n%s", diff)
	}
}

// TestProxy checks that the proxy forwards requests unchanged and records
// what the backend answers against the document.
func TestProxy(t *testing.T) {
	var gotHeader http.Header
	var gotBody string
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotHeader = r.Header.Clone()
		b, _ := io.ReadAll(r.Body)
		gotBody = string(b)
		switch r.URL.Path {
		case "/healthz":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"status":"ok"}`))
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTeapot)
			_, _ = w.Write([]byte(`{"detail":"teapot"}`))
		}
	}))
	defer backend.Close()
	rec := NewRecorder(newChecker(t))
	proxy := httptest.NewServer(Handler(backend.URL, rec))
	defer proxy.Close()

	resp, err := http.Get(proxy.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != `{"status":"ok"}` {
		t.Errorf("GET /healthz through the proxy = %d %s, want the backend's 200", resp.StatusCode, b)
	}
	if v := rec.Violations(); len(v) != 0 {
		t.Errorf("violations after a conforming exchange: %q", v)
	}

	req, _ := http.NewRequest("POST", proxy.URL+"/geofences/contains", strings.NewReader(`{"points":[]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", "k")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot {
		t.Errorf("status through the proxy = %d, want the backend's 418", resp.StatusCode)
	}
	if gotBody != `{"points":[]}` || gotHeader.Get("x-api-key") != "k" || gotHeader.Get("X-Forwarded-For") != "" {
		t.Errorf("backend saw body %q, headers %v; want the request unchanged", gotBody, gotHeader)
	}
	v := rec.Violations()
	if len(v) != 1 || !strings.Contains(v[0], "POST /geofences/contains -> 418") {
		t.Errorf("violations = %q, want one for the 418", v)
	}
	if rec.Seen() != 2 {
		t.Errorf("Seen() = %d, want 2", rec.Seen())
	}
}

// fakeT collects what Wrap reports when the test ends.
type fakeT struct {
	testing.TB
	errors   []string
	cleanups []func()
}

func (f *fakeT) Helper()           {}
func (f *fakeT) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeT) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}
func (f *fakeT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

func TestWrap(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"status":"ok","checks":{}}`))
	})
	ft := &fakeT{TB: t}
	h := Wrap(ft, mux, openapi.Limits{})
	for _, path := range []string{"/healthz", "/readyz"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
	}
	for _, fn := range ft.cleanups {
		fn()
	}
	if len(ft.errors) != 1 || !strings.Contains(ft.errors[0], "GET /readyz -> 202") {
		t.Errorf("Wrap reported %q, want one violation for the undocumented 202", ft.errors)
	}
}

// TestWrapSkipsAbandoned checks that an answer to a client that went away
// (a 499 nobody received) is not held against the document.
func TestWrapSkipsAbandoned(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cancel() // the client disconnects while the handler works
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(499)
		_, _ = w.Write([]byte(`{"detail":"Client closed request."}`))
	})
	ft := &fakeT{TB: t}
	wrapped := Wrap(ft, h, openapi.Limits{})
	wrapped.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/healthz", nil).WithContext(ctx))
	for _, fn := range ft.cleanups {
		fn()
	}
	if len(ft.errors) != 0 {
		t.Errorf("Wrap reported %q for an abandoned request, want nothing", ft.errors)
	}
}
