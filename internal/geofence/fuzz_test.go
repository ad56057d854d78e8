package geofence

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/openapi"
	"github.com/geogate/geogate/internal/openapi/contract"
)

// The fuzz targets drive the real router against a real database: any
// input must get a 2xx or a 4xx with a {"detail": ...} body, never a 5xx,
// and every exchange must be one the OpenAPI document describes.

// fuzzServer serves the routes to fuzz inputs and checks each exchange
// against the document as it happens (contract.Wrap would report only
// when the whole target ends).
type fuzzServer struct {
	h       http.Handler
	checker *contract.Checker
}

func newFuzzServer(f *testing.F, pool *pgxpool.Pool) *fuzzServer {
	f.Helper()
	_, h := newRawService(f, pool, testTimeouts)
	data, err := openapi.JSON(testRules.Limits)
	if err != nil {
		f.Fatal(err)
	}
	c, err := contract.NewFor(context.Background(), data)
	if err != nil {
		f.Fatal(err)
	}
	return &fuzzServer{h: h, checker: c}
}

// serve sends req (with body, the bytes req reads) and fails t on a 5xx,
// on a 4xx without a {"detail": ...} body, or on anything the document
// contradicts.
func (s *fuzzServer) serve(t *testing.T, req *http.Request, body string) (int, []byte) {
	t.Helper()
	seen := req.Clone(context.Background())
	seen.URL.Scheme, seen.URL.Host = "http", req.Host
	w := httptest.NewRecorder()
	s.h.ServeHTTP(w, req)
	target := req.URL.RequestURI()
	checkNo5xx(t, req.Method, target, w.Code, w.Body.Bytes())
	x := contract.Exchange{Request: seen, RequestBody: []byte(body), Status: w.Code, Header: w.Result().Header, Body: w.Body.Bytes()}
	if v := s.checker.Check(context.Background(), x); len(v) > 0 {
		t.Fatalf("%s %q = %d %.300s, contradicts the document: %s", req.Method, target, w.Code, w.Body.Bytes(), strings.Join(v, "; "))
	}
	return w.Code, w.Body.Bytes()
}

// do sends a request with a body string (none when empty).
func (s *fuzzServer) do(t *testing.T, method, target, body string) (int, []byte) {
	t.Helper()
	var req *http.Request
	if body == "" {
		req = httptest.NewRequest(method, target, nil)
	} else {
		req = httptest.NewRequest(method, target, strings.NewReader(body))
	}
	return s.serve(t, req, body)
}

// query sends GET path with a raw, possibly malformed, query string.
func (s *fuzzServer) query(t *testing.T, path, rawQuery string) (int, []byte) {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	req.URL.RawQuery = rawQuery
	return s.serve(t, req, "")
}

func checkNo5xx(t *testing.T, method, target string, code int, body []byte) {
	t.Helper()
	if code >= 500 {
		t.Fatalf("%s %q = %d %s, want no 5xx", method, target, code, body)
	}
	if code >= 400 && !strings.HasPrefix(string(body), `{"detail":`) {
		t.Fatalf("%s %q = %d %s, want a {\"detail\": ...} body", method, target, code, body)
	}
}

func FuzzWithinQuery(f *testing.F) {
	for _, s := range []string{
		"lng=2.35&lat=48.85&radius=1000",
		"lng=179.9&lat=-16.5&radius=50000&limit=3&layer=places",
		"lng=0&lat=90&radius=100000&layer=geofences&properties=none",
		"lng=NaN&lat=Inf&radius=-0",
		"lng=1e308&lat=-1e-320&radius=0x1p-2",
		"lng=1&lat=1&radius=1&cursor=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"lng=1&lat=1&radius=1&properties=%00,a",
		"lng=1&lng=2&lat=1&radius=1&limit=99999999999999999999",
	} {
		f.Add(s)
	}
	pool := newDB(f)
	mustExec(f, pool, `INSERT INTO places (name, properties, geom)
		SELECT 'p' || i, jsonb_build_object('i', i), ST_SetSRID(ST_MakePoint(i % 360 - 180 + 0.5, (i % 179) - 89.5), 4326)
		FROM generate_series(1, 500) i`)
	mustExec(f, pool, `INSERT INTO geofences (name, geom) VALUES ('sq', ST_Multi(ST_MakeEnvelope(0, 0, 10, 10, 4326)))`)
	s := newFuzzServer(f, pool)
	f.Fuzz(func(t *testing.T, query string) {
		code, _ := s.query(t, "/within", query)
		if code == http.StatusOK {
			// A 200 must have come from valid parameters.
			if _, err := parseWithin(mustQuery(query), testRules); err != nil {
				t.Fatalf("GET /within?%s = 200 but the parameters are invalid: %v", query, err)
			}
		}
	})
}

func mustQuery(raw string) url.Values {
	v, _ := url.ParseQuery(raw)
	return v
}

// FuzzGeofenceListQuery fuzzes the query of GET /geofences: bbox (across
// the antimeridian too), limit and cursor.
func FuzzGeofenceListQuery(f *testing.F) {
	for _, s := range []string{
		"",
		"bbox=-10,-10,10,10&limit=2",
		"bbox=170,-5,-170,5",
		"bbox=-180,-90,180,90&limit=1000",
		"bbox=1,2,3",
		"bbox=0,10,1,5",
		"bbox=NaN,0,1,1",
		"bbox=1e400,0,1,1",
		"bbox=,,,",
		"bbox=1,2,3,4&bbox=1,2,3,4",
		"limit=0",
		"limit=-1&cursor=",
		"cursor=eyJpZCI6MX0.c2ln",
		"limit=1&cursor=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
	} {
		f.Add(s)
	}
	pool := newDB(f)
	mustExec(f, pool, `INSERT INTO geofences (name, geom)
		SELECT 'f' || i, ST_Multi(ST_Expand(ST_SetSRID(ST_MakePoint(i * 7 % 360 - 179.5, i % 170 - 85), 4326), 0.5))
		FROM generate_series(1, 60) i`)
	s := newFuzzServer(f, pool)
	f.Fuzz(func(t *testing.T, query string) {
		code, body := s.query(t, "/geofences", query)
		if code != http.StatusOK {
			return
		}
		// A 200 must have come from valid parameters, and a next link
		// must lead to another valid page.
		if _, err := parseList(mustQuery(query), testRules); err != nil {
			t.Fatalf("GET /geofences?%s = 200 but the parameters are invalid: %v", query, err)
		}
		if next := nextHref(t, body); next != "" {
			if code, b := s.do(t, "GET", next, ""); code != http.StatusOK {
				t.Fatalf("GET %s (the next link of ?%s) = %d %.300s, want 200", next, query, code, b)
			}
		}
	})
}

// nextHref returns the next link of a FeatureCollection body, "" without.
func nextHref(t *testing.T, body []byte) string {
	t.Helper()
	i := strings.Index(string(body), `"rel":"next"`)
	if i < 0 {
		return ""
	}
	rest := string(body[i:])
	const key = `"href":"`
	j := strings.Index(rest, key)
	if j < 0 {
		t.Fatalf("next link without href: %s", rest)
	}
	rest = rest[j+len(key):]
	return rest[:strings.IndexByte(rest, '"')]
}

// FuzzGeofenceID fuzzes the id path segment of GET, PUT and DELETE
// /geofences/{id}: anything but a positive integer is a 422, an id that is
// not stored a 404.
func FuzzGeofenceID(f *testing.F) {
	for _, s := range []string{"1", "2", "0", "-1", "+1", "01", "1.0", "1e3", "9223372036854775807",
		"9223372036854775808", "99999999999999999999", "abc", " 1", "%31", "1%00", "contains", "1/2", ""} {
		f.Add(s)
	}
	pool := newDB(f)
	mustExec(f, pool, `INSERT INTO geofences (name, geom) VALUES ('sq', ST_Multi(ST_MakeEnvelope(0, 0, 10, 10, 4326)))`)
	s := newFuzzServer(f, pool)
	put := fenceJSON(`{"type":"Polygon","coordinates":` + square(5, 5, 1) + `}`)
	f.Fuzz(func(t *testing.T, id string) {
		for _, m := range []struct{ method, body string }{{"GET", ""}, {"PUT", put}, {"DELETE", ""}} {
			req := httptest.NewRequest(m.method, "/geofences/x", strings.NewReader(m.body))
			req.URL.Path, req.URL.RawPath = "/geofences/"+id, ""
			code, body := s.serve(t, req, m.body)
			_, err := parseID(id)
			if code < 400 && (err != nil || strings.Contains(id, "/")) {
				t.Fatalf("%s /geofences/%q = %d %.200s, but the id is invalid", m.method, id, code, body)
			}
			if err == nil && code == http.StatusUnprocessableEntity && !strings.Contains(string(body), `"body"`) {
				t.Fatalf("%s /geofences/%q = 422 %.200s, but the id is valid", m.method, id, body)
			}
		}
	})
}

func FuzzFenceBody(f *testing.F) {
	for _, s := range []string{
		fenceJSON(`{"type":"Polygon","coordinates":` + square(1, 1, 1) + `}`),
		fenceJSON(`{"type":"MultiPolygon","coordinates":[` + square(1, 1, 1) + `,` + square(5, 5, 1) + `]}`),
		fenceJSON(`{"type":"Polygon","coordinates":[[[0,0],[2,2],[2,0],[0,2],[0,0]]]}`),
		fenceJSON(`{"type":"Polygon","coordinates":[[[0,0,1],[1,0],[1,1],[0,0]]]}`),
		fenceJSON(`{"type":"Polygon","coordinates":[[[0,0],[0,0],[0,0],[0,0]]]}`),
		fenceJSON(`{"type":"GeometryCollection","geometries":[]}`),
		`{"type":"Feature","properties":{"name":"a\u0000","x":[1,{"y":1e999}]},"geometry":null}`,
		`{"type":"Feature","properties":{"name":"n"},"geometry":{"type":"Polygon","coordinates":[[[180,90],[-180,90],[-180,-90],[180,90]]]}}`,
		`[`, `null`, `"x"`, `{}`,
	} {
		f.Add(s)
	}
	pool := newDB(f)
	s := newFuzzServer(f, pool)
	f.Fuzz(func(t *testing.T, body string) {
		for _, m := range []struct{ method, path string }{{"POST", "/geofences"}, {"PUT", "/geofences/1"}} {
			s.do(t, m.method, m.path, body)
		}
	})
}

func FuzzContainsBatch(f *testing.F) {
	for _, s := range []string{
		`{"points":[[1,2],[3,4]]}`,
		`{"points":[]}`,
		`{"points":[[180,90],[-180,-90],[0,0,0]]}`,
		`{"points":[[1e400,1]]}`,
		`{"points":null}`,
		`{"points":[[1,2]],"points":[["a"]]}`,
	} {
		f.Add(s)
	}
	pool := newDB(f)
	mustExec(f, pool, `INSERT INTO geofences (name, geom) VALUES ('sq', ST_Multi(ST_MakeEnvelope(0, 0, 10, 10, 4326)))`)
	s := newFuzzServer(f, pool)
	f.Fuzz(func(t *testing.T, body string) {
		s.do(t, "POST", "/geofences/contains", body)
	})
}
