package geofence

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/httpx"
	"github.com/geogate/geogate/internal/openapi/contract"
	"github.com/geogate/geogate/internal/spatial"
)

type featureJSON struct {
	Type     string `json:"type"`
	ID       int64  `json:"id"`
	Geometry struct {
		Type        string          `json:"type"`
		Coordinates [][][][]float64 `json:"coordinates"`
	} `json:"geometry"`
	Properties map[string]any `json:"properties"`
}

func TestFenceLifecycle(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	_, h := newTestService(t, pool, testTimeouts)

	body := `{"type":"Feature","properties":{"name":"Depot","zone":"A","tags":["x"]},
		"geometry":{"type":"Polygon","coordinates":` + square(10, 10, 1) + `}}`
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("POST", "/geofences", strings.NewReader(body)))
	if w.Code != http.StatusCreated {
		t.Fatalf("POST = %d %s, want 201", w.Code, w.Body)
	}
	var created featureJSON
	if err := json.Unmarshal(w.Body.Bytes(), &created); err != nil {
		t.Fatal(err)
	}
	if loc := w.Header().Get("Location"); loc != fmt.Sprintf("/geofences/%d", created.ID) {
		t.Errorf("Location = %q, want /geofences/%d", loc, created.ID)
	}
	if created.Geometry.Type != "MultiPolygon" || created.Properties["name"] != "Depot" || created.Properties["zone"] != "A" {
		t.Errorf("created = %+v, want a MultiPolygon named Depot in zone A", created)
	}

	code, got := do(t, h, "GET", fmt.Sprintf("/geofences/%d", created.ID), "")
	if code != 200 || !strings.Contains(string(got), `"name":"Depot"`) {
		t.Errorf("GET = %d %s, want 200 with the fence", code, got)
	}
	if n := parts(t, pool, created.ID); n != 1 {
		t.Errorf("geofence_parts rows after insert = %d, want 1", n)
	}

	// Replace with a detailed shape: the subdivided copy follows.
	code, got = do(t, h, "PUT", fmt.Sprintf("/geofences/%d", created.ID), fenceJSON(circle(20, 20, 2, 2000)))
	if code != 200 || !strings.Contains(string(got), `"name":"f"`) || strings.Contains(string(got), "zone") {
		t.Errorf("PUT = %d %.200s, want 200 with the new name and no old properties", code, got)
	}
	if n := parts(t, pool, created.ID); n < 8 {
		t.Errorf("geofence_parts rows after update to 2000 vertices = %d, want at least 8 (subdivided)", n)
	}
	if ids := containsIDs(t, h, 20, 20); fmt.Sprint(ids) != fmt.Sprintf("[%d]", created.ID) {
		t.Errorf("contains(20, 20) = %v, want [%d]", ids, created.ID)
	}
	if ids := containsIDs(t, h, 10, 10); len(ids) != 0 {
		t.Errorf("contains(10, 10) after moving the fence = %v, want none", ids)
	}

	code, _ = do(t, h, "DELETE", fmt.Sprintf("/geofences/%d", created.ID), "")
	if code != http.StatusNoContent {
		t.Errorf("DELETE = %d, want 204", code)
	}
	if code, _ := do(t, h, "GET", fmt.Sprintf("/geofences/%d", created.ID), ""); code != 404 {
		t.Errorf("GET after DELETE = %d, want 404", code)
	}
	if n := parts(t, pool, created.ID); n != 0 {
		t.Errorf("geofence_parts rows after delete = %d, want 0", n)
	}
}

// circle is a GeoJSON Polygon approximating a circle with n vertices.
func circle(lng, lat, r float64, n int) string {
	var b strings.Builder
	b.WriteString(`{"type":"Polygon","coordinates":[[`)
	for i := 0; i <= n; i++ {
		a := 2 * math.Pi * float64(i%n) / float64(n)
		x, y := lng+r*math.Cos(a), lat+r*math.Sin(a)
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "[%v,%v]", x, y)
	}
	b.WriteString(`]]}`)
	return b.String()
}

// parts counts the subdivided rows of fence id.
func parts(t *testing.T, pool *pgxpool.Pool, id int64) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM geofence_parts WHERE fence_id = $1", id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func containsIDs(t *testing.T, h http.Handler, lng, lat float64) []int64 {
	t.Helper()
	code, body := do(t, h, "GET", fmt.Sprintf("/geofences/contains?lng=%v&lat=%v", lng, lat), "")
	if code != 200 {
		t.Fatalf("contains = %d %s", code, body)
	}
	var r struct {
		Fences []struct {
			ID int64 `json:"id"`
		} `json:"fences"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	ids := []int64{}
	for _, f := range r.Fences {
		ids = append(ids, f.ID)
	}
	return ids
}

func TestContainsSemantics(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	_, h := newTestService(t, pool, testTimeouts)
	var a, b, hole int64
	for _, f := range []struct {
		id  *int64
		wkt string
	}{
		{&a, "MULTIPOLYGON(((0 0,10 0,10 10,0 10,0 0)))"},
		{&b, "MULTIPOLYGON(((10 0,20 0,20 10,10 10,10 0)))"},
		{&hole, "MULTIPOLYGON(((30 0,40 0,40 10,30 10,30 0),(33 3,37 3,37 7,33 7,33 3)))"},
	} {
		// Plain SQL, as an import would write: the triggers keep the parts.
		err := pool.QueryRow(context.Background(),
			"INSERT INTO geofences (name, geom) VALUES ('f', ST_GeomFromText($1, 4326)) RETURNING id", f.wkt).Scan(f.id)
		if err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name     string
		lng, lat float64
		want     []int64
	}{
		{"inside a", 5, 5, []int64{a}},
		{"on the shared edge: both", 10, 5, []int64{a, b}},
		{"on a corner", 0, 0, []int64{a}},
		{"outside", 25, 5, []int64{}},
		{"in the hole", 35, 5, []int64{}},
		{"on the hole's edge", 33, 5, []int64{hole}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := containsIDs(t, h, tt.lng, tt.lat); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("GET contains(%v, %v) = %v, want %v", tt.lng, tt.lat, got, tt.want)
			}
		})
	}
	t.Run("batch", func(t *testing.T) {
		var pts []string
		var want []string
		for _, tt := range tests {
			pts = append(pts, fmt.Sprintf("[%v,%v]", tt.lng, tt.lat))
			want = append(want, fmt.Sprint(tt.want))
		}
		code, body := do(t, h, "POST", "/geofences/contains", `{"points":[`+strings.Join(pts, ",")+`]}`)
		if code != 200 {
			t.Fatalf("POST contains = %d %s", code, body)
		}
		var r struct {
			Results []struct {
				Point  []float64 `json:"point"`
				Fences []int64   `json:"fences"`
			} `json:"results"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatal(err)
		}
		var got []string
		for i, res := range r.Results {
			got = append(got, fmt.Sprint(res.Fences))
			if res.Point[0] != tests[i].lng || res.Point[1] != tests[i].lat {
				t.Errorf("result %d point = %v, want [%v %v]", i, res.Point, tests[i].lng, tests[i].lat)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("batch fences = %v, want %v", got, want)
		}
	})
	t.Run("truncate clears the parts", func(t *testing.T) {
		mustExec(t, pool, "TRUNCATE geofences")
		if n := parts(t, pool, a) + parts(t, pool, b) + parts(t, pool, hole); n != 0 {
			t.Errorf("parts after TRUNCATE = %d, want 0", n)
		}
	})
}

func TestListFences(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	_, h := newTestService(t, pool, testTimeouts)
	// Ten fences along the equator at lng -175, -140, ..., 140, 175.
	var ids []int64
	for i := range 11 {
		var id int64
		lng := -175 + float64(i)*35
		err := pool.QueryRow(context.Background(),
			"INSERT INTO geofences (name, geom) VALUES ($1, ST_Multi(ST_Expand(ST_SetSRID(ST_MakePoint($2, 0), 4326), 1))) RETURNING id",
			fmt.Sprint("f", i), lng).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	tests := []struct {
		name  string
		query string
		want  []int64
	}{
		{"all, pages of 3", "limit=3", ids},
		{"bbox", "limit=2&bbox=-150,-5,-100,5", ids[1:3]},
		{"bbox across the antimeridian", "limit=1&bbox=170,-5,-170,5", []int64{ids[0], ids[10]}},
		{"bbox with nothing", "bbox=0,50,10,60", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := allPages(t, h, "/geofences?"+tt.query)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("ids = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestListFencesByShape checks that a bbox lists the fences whose shape
// meets it, not those whose bounding box alone does: an L's notch holds
// no part of the L.
func TestListFencesByShape(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	_, h := newTestService(t, pool, testTimeouts)
	ids := map[string]int64{}
	for _, f := range []struct{ name, wkt string }{
		// An L at the origin: arms along x (y 0..2) and y (x 0..2); its
		// notch is x 2..10, y 2..10.
		{"L", "POLYGON((0 0,10 0,10 2,2 2,2 10,0 10,0 0))"},
		{"notch square", "POLYGON((6 6,7 6,7 7,6 7,6 6))"},
		// The same L just west of the antimeridian (x 170..179).
		{"L east", "POLYGON((170 0,179 0,179 2,172 2,172 10,170 10,170 0))"},
		{"square past the antimeridian", "POLYGON((-178 6,-177 6,-177 7,-178 7,-178 6))"},
	} {
		var id int64
		err := pool.QueryRow(context.Background(),
			"INSERT INTO geofences (name, geom) VALUES ($1, ST_Multi(ST_GeomFromText($2, 4326))) RETURNING id", f.name, f.wkt).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		ids[f.name] = id
	}
	tests := []struct {
		name  string
		query string
		want  []string
	}{
		{"in the notch", "bbox=5,5,8,8", []string{"notch square"}},
		{"on the arm", "bbox=1,5,3,6", []string{"L"}},
		{"touching the arm's edge", "bbox=2,5,3,6", []string{"L"}},
		{"in the notch across the antimeridian", "bbox=175,5,-175,8", []string{"square past the antimeridian"}},
		{"on the arm across the antimeridian, paged", "limit=1&bbox=171,5,-175,8", []string{"L east", "square past the antimeridian"}},
		{"the world, paged", "limit=1&bbox=-180,-90,180,90", []string{"L", "notch square", "L east", "square past the antimeridian"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := allPages(t, h, "/geofences?"+tt.query)
			var want []int64
			for _, n := range tt.want {
				want = append(want, ids[n])
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("GET /geofences?%s ids = %v, want %v %v", tt.query, got, want, tt.want)
			}
		})
	}
}

func TestSpatialScopeOnFences(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	svc, _ := newTestService(t, pool, testTimeouts)
	scope, err := spatial.NewBBox(0, 0, 10, 10)
	if err != nil {
		t.Fatal(err)
	}
	h := contract.Wrap(t, testRouter(svc, testRules, scope), testRules.Limits)
	ids := map[string]int64{}
	for name, env := range map[string]string{"inside": "1, 1, 2, 2", "outside": "20, 20, 21, 21", "straddling": "9, 9, 11, 11"} {
		var id int64
		err := pool.QueryRow(context.Background(), "INSERT INTO geofences (name, geom) VALUES ($1, ST_Multi(ST_MakeEnvelope("+env+", 4326))) RETURNING id", name).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = id
	}
	put := fenceJSON(`{"type":"Polygon","coordinates":` + square(5, 5, 1) + `}`)
	tests := []struct {
		method, fence, body string
		want                int
	}{
		{"GET", "inside", "", 200},
		{"GET", "straddling", "", 200},
		{"GET", "outside", "", 404},
		{"PUT", "outside", put, 404},
		{"DELETE", "outside", "", 404},
		{"DELETE", "straddling", "", 404},
		{"PUT", "inside", put, 200},
		{"DELETE", "inside", "", 204},
	}
	for _, tt := range tests {
		path := fmt.Sprintf("/geofences/%d", ids[tt.fence])
		if code, body := do(t, h, tt.method, path, tt.body); code != tt.want {
			t.Errorf("%s the %s fence = %d %.200s, want %d", tt.method, tt.fence, code, body, tt.want)
		}
	}
	got, _ := allPages(t, h, "/geofences")
	if want := []int64{ids["straddling"]}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("listing = %v, want only the straddling fence %v (the inside one is deleted)", got, want)
	}
}

func TestOutsideScopeNamesWhatLeftIt(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	svc, _ := newTestService(t, pool, testTimeouts)
	scope, err := spatial.NewBBox(0, 0, 10, 10)
	if err != nil {
		t.Fatal(err)
	}
	h := contract.Wrap(t, testRouter(svc, testRules, scope), testRules.Limits)
	tests := []struct {
		name, method, target, body, want string
	}{
		{"Point", "GET", "/geofences/contains?lng=20&lat=20", "", "The point lies outside your spatial scope."},
		{"BatchPoint", "POST", "/geofences/contains", `{"points":[[1,1],[20,20]]}`, "The point lies outside your spatial scope."},
		{"Circle", "GET", "/within?lng=20&lat=20&radius=100", "", "The query circle leaves your spatial scope: the whole circle must lie inside it."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := do(t, h, tt.method, tt.target, tt.body)
			var got httpx.Detail
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("%s %s: body %s: %v", tt.method, tt.target, body, err)
			}
			if status != 403 || got.Detail != tt.want {
				t.Errorf("%s %s = %d %v, want 403 %q", tt.method, tt.target, status, got.Detail, tt.want)
			}
		})
	}
}

// TestContainsBoundedAnswer: the features holding a point stop before
// the one that would take the answer past GEOFENCE_MAX_PAGE_BYTES, and
// the answer says it was cut; within the bound it is whole and says
// nothing of the kind.
func TestContainsBoundedAnswer(t *testing.T) {
	pool := newDB(t)
	svc, whole := newTestService(t, pool, testTimeouts)
	rules := testRules
	rules.MaxPageBytes = 64 << 10
	cut := contract.Wrap(t, testRouter(svc, rules, nil), rules.Limits)
	note := strings.Repeat("n", 40<<10)
	for i := range 3 {
		body := fmt.Sprintf(`{"type":"Feature","properties":{"name":"f%d","note":%q},"geometry":{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,1],[0,0]]]}}`, i, note)
		if status, b := do(t, whole, "POST", "/geofences", body); status != 201 {
			t.Fatalf("POST /geofences = %d %s", status, b)
		}
	}
	for _, tc := range []struct {
		name   string
		h      http.Handler
		fences int
		cut    bool
	}{{"Whole", whole, 3, false}, {"Cut", cut, 1, true}} {
		status, b := do(t, tc.h, "GET", "/geofences/contains?lng=0.5&lat=0.5", "")
		var got struct {
			Fences    []json.RawMessage
			Truncated *bool
		}
		if err := json.Unmarshal(b, &got); status != 200 || err != nil {
			t.Fatalf("%s: GET /geofences/contains = %d %v", tc.name, status, err)
		}
		if len(got.Fences) != tc.fences || (got.Truncated != nil) != tc.cut || tc.cut && !*got.Truncated {
			t.Errorf("%s: %d fences, truncated %v; want %d, cut %v", tc.name, len(got.Fences), got.Truncated, tc.fences, tc.cut)
		}
	}
}
