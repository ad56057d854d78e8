package geofence

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// The fuzz targets drive the real router against a real database: any
// input must get a 2xx or a 4xx with a {"detail": ...} body, never a 5xx.

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
	_, h := newTestService(f, pool, testLimits)
	f.Fuzz(func(t *testing.T, query string) {
		req := httptest.NewRequest("GET", "/within", nil)
		req.URL.RawQuery = query
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		target, code, body := "/within?"+query, w.Code, w.Body.Bytes()
		checkNo5xx(t, "GET", target, code, body)
		if code == http.StatusOK {
			// A 200 must have come from valid parameters.
			if _, err := parseWithin(mustQuery(query), testRules, []string{"places", "geofences"}); err != nil {
				t.Fatalf("GET %q = 200 but the parameters are invalid: %v", target, err)
			}
		}
	})
}

func mustQuery(raw string) url.Values {
	v, _ := url.ParseQuery(raw)
	return v
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
	_, h := newTestService(f, pool, testLimits)
	f.Fuzz(func(t *testing.T, body string) {
		for _, m := range []struct{ method, path string }{{"POST", "/geofences"}, {"PUT", "/geofences/1"}} {
			code, out := do(t, h, m.method, m.path, body)
			checkNo5xx(t, m.method, m.path, code, out)
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
	_, h := newTestService(f, pool, testLimits)
	f.Fuzz(func(t *testing.T, body string) {
		code, out := do(t, h, "POST", "/geofences/contains", body)
		checkNo5xx(t, "POST", "/geofences/contains", code, out)
	})
}
