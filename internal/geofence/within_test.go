package geofence

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

type place struct {
	name     string
	lng, lat float64
}

// insertPlaces stores ps and returns their ids in order.
func insertPlaces(t testing.TB, pool *pgxpool.Pool, ps []place) []int64 {
	t.Helper()
	ids := make([]int64, len(ps))
	for i, p := range ps {
		err := pool.QueryRow(context.Background(),
			`INSERT INTO places (name, properties, geom)
			 VALUES ($1, jsonb_build_object('country', 'XX', 'rank', $4::int), ST_SetSRID(ST_MakePoint($2, $3), 4326))
			 RETURNING id`, p.name, p.lng, p.lat, i).Scan(&ids[i])
		if err != nil {
			t.Fatalf("insert place %v: %v", p, err)
		}
	}
	return ids
}

// expectWithin computes, independently of PostGIS, the places within r
// metres of (lng, lat) and their distances. Places within tol metres of
// the boundary are reported separately: too close to call for a different
// ellipsoid implementation.
func expectWithin(ps []place, ids []int64, lng, lat, r, tol float64) (want map[int64]float64, borderline map[int64]bool) {
	want, borderline = map[int64]float64{}, map[int64]bool{}
	for i, p := range ps {
		d, ok := vincenty(lng, lat, p.lng, p.lat)
		switch {
		case !ok:
		case math.Abs(d-r) <= tol:
			borderline[ids[i]] = true
		case d < r:
			want[ids[i]] = d
		}
	}
	return want, borderline
}

// checkWithin compares an answer (ids and distance_m in order) with
// expectWithin: strictly ordered by (distance, id), the same places apart
// from borderline ones, and every distance within a millimetre.
func checkWithin(t *testing.T, ids []int64, dists []float64, want map[int64]float64, border map[int64]bool) {
	t.Helper()
	seen := map[int64]bool{}
	for i, id := range ids {
		if i > 0 && (dists[i] < dists[i-1] || dists[i] == dists[i-1] && id <= ids[i-1]) {
			t.Errorf("feature %d (id %d, %v m) after id %d at %v m: not ordered by (distance, id)", i, id, dists[i], ids[i-1], dists[i-1])
		}
		if seen[id] {
			t.Errorf("id %d returned twice", id)
		}
		seen[id] = true
		d, ok := want[id]
		switch {
		case border[id]:
		case !ok:
			t.Errorf("id %d at %v m returned, but it is outside the radius", id, dists[i])
		case math.Abs(d-dists[i]) > 0.001:
			t.Errorf("id %d: distance_m = %.4f, want %.4f (Vincenty)", id, dists[i], d)
		}
	}
	for id, d := range want {
		if !seen[id] {
			t.Errorf("id %d at %.3f m missing", id, d)
		}
	}
}

func withinURL(lng, lat, r float64, extra string) string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	u := "/within?lng=" + f(lng) + "&lat=" + f(lat) + "&radius=" + f(r)
	if extra != "" {
		u += "&" + extra
	}
	return u
}

// allPages follows next links from target and returns every feature id
// and distance in order.
func allPages(t *testing.T, h http.Handler, target string) (ids []int64, dists []float64) {
	t.Helper()
	for pages := 0; target != ""; pages++ {
		if pages > 1000 {
			t.Fatalf("more than 1000 pages from %s", target)
		}
		c := getCollection(t, h, target)
		for _, f := range c.Features {
			ids = append(ids, f.ID)
			d, _ := f.Properties["distance_m"].(float64)
			dists = append(dists, d)
		}
		target = c.next()
	}
	return ids, dists
}

func TestWithinMatchesGeodesicComputation(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	_, h := newTestService(t, pool, testTimeouts)
	// A grid around Paris with repeated positions, so that ties by id and
	// paging across equal distances are exercised.
	var ps []place
	for i := -6; i <= 6; i++ {
		for j := -6; j <= 6; j++ {
			p := place{fmt.Sprintf("p%d_%d", i, j), 2.35 + float64(i)*0.013, 48.85 + float64(j)*0.009}
			ps = append(ps, p, p)
		}
	}
	ids := insertPlaces(t, pool, ps)
	tests := []struct {
		name     string
		lng, lat float64
		r        float64
		query    string
	}{
		{"one page", 2.35, 48.85, 3000, "limit=1000"},
		{"pages of 7 across ties", 2.35, 48.85, 5000, "limit=7"},
		{"pages of 1", 2.36, 48.86, 2500, "limit=1"},
		{"off-centre, no stored properties", 2.3, 48.8, 4000, "limit=10&properties=none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, border := expectWithin(ps, ids, tt.lng, tt.lat, tt.r, 0.001)
			got, dists := allPages(t, h, withinURL(tt.lng, tt.lat, tt.r, tt.query))
			checkWithin(t, got, dists, want, border)
		})
	}
}

func TestWithinDistancesAreSpheroidal(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	_, h := newTestService(t, pool, testTimeouts)
	ps := []place{
		{"Longyearbyen", 15.65, 78.22},
		{"north", 0, 89.95},
		{"north-opposite", 180, 89.95},
		{"Suva", 178.44, -18.14},
		{"Taveuni east", -179.95, -16.8},
		{"equator", 0.01, 0},
	}
	ids := insertPlaces(t, pool, ps)
	for i, p := range ps {
		t.Run(p.name, func(t *testing.T) {
			c := getCollection(t, h, withinURL(p.lng+0.001*sign(p.lng), p.lat-0.001, 1000, ""))
			if len(c.Features) != 1 || c.Features[0].ID != ids[i] {
				t.Fatalf("features = %+v, want only %s", c.Features, p.name)
			}
			want, _ := vincenty(p.lng+0.001*sign(p.lng), p.lat-0.001, p.lng, p.lat)
			if got := c.Features[0].Properties["distance_m"].(float64); math.Abs(got-want) > 0.001 {
				t.Errorf("distance_m = %.4f, want %.4f (Vincenty)", got, want)
			}
		})
	}
}

func sign(f float64) float64 {
	if f < 0 {
		return 1 // move towards zero, staying inside [-180, 180]
	}
	return -1
}

func TestWithinWhereMapsBreak(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	_, h := newTestService(t, pool, testTimeouts)
	ps := []place{
		{"east of the antimeridian", 179.95, -16.5},
		{"west of the antimeridian", -179.95, -16.5},
		{"far west", -179.0, -16.5},
		{"Longyearbyen", 15.6333, 78.2167},
		{"Barentsburg", 14.2167, 78.0667},
		{"pole side 0", 0, 89.95},
		{"pole side 90", 90, 89.95},
		{"pole side 180", 180, 89.95},
		{"pole side -90", -90, 89.95},
		{"south pole", 0, -90},
	}
	ids := insertPlaces(t, pool, ps)
	tests := []struct {
		name     string
		lng, lat float64
		r        float64
	}{
		{"circle across the antimeridian from the east", 179.9, -16.5, 50_000},
		{"circle across the antimeridian from the west", -179.99, -16.5, 20_000},
		{"centre on the antimeridian", 180, -16.5, 10_000},
		{"centre on -180", -180, -16.5, 10_000},
		{"Svalbard", 15.65, 78.22, 40_000},
		{"near the north pole", 0, 89.9, 30_000},
		{"on the north pole", 0, 90, 6_000},
		{"on the south pole", 123, -90, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, border := expectWithin(ps, ids, tt.lng, tt.lat, tt.r, 0.001)
			if len(border) > 0 {
				t.Fatalf("fixture has borderline places %v", border)
			}
			if len(want) == 0 {
				t.Fatal("fixture has nothing in the circle")
			}
			got, dists := allPages(t, h, withinURL(tt.lng, tt.lat, tt.r, "limit=2"))
			checkWithin(t, got, dists, want, border)
		})
	}
}

func TestWithinRadiusBoundaryToTheCentimetre(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	_, h := newTestService(t, pool, testTimeouts)
	ps := []place{{"target", 13.4, 52.52}}
	insertPlaces(t, pool, ps)
	for _, c := range []struct{ lng, lat float64 }{{13.5, 52.6}, {13.1, 52.1}, {13.4, 53.4}} {
		d, _ := vincenty(c.lng, c.lat, 13.4, 52.52)
		for _, tt := range []struct {
			r    float64
			want int
		}{{d + 0.01, 1}, {d - 0.01, 0}} {
			got := getCollection(t, h, withinURL(c.lng, c.lat, tt.r, ""))
			if len(got.Features) != tt.want {
				t.Errorf("radius %.3f from (%v, %v), target at %.3f m: %d features, want %d", tt.r, c.lng, c.lat, d, len(got.Features), tt.want)
			}
		}
	}
}

func TestWithinProperties(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	_, h := newTestService(t, pool, testTimeouts)
	mustExec(t, pool, `INSERT INTO places (name, properties, geom) VALUES
		('A', '{"country":"FR","pop":12,"name":"shadowed","distance_m":-1}', ST_SetSRID(ST_MakePoint(2.35, 48.85), 4326))`)
	tests := []struct {
		query string
		want  string
	}{
		{"", `{"country":"FR","distance_m":0,"name":"A","pop":12}`},
		{"properties=none", `{"distance_m":0,"name":"A"}`},
		{"properties=pop", `{"distance_m":0,"name":"A","pop":12}`},
		{"properties=pop,country,missing", `{"country":"FR","distance_m":0,"name":"A","pop":12}`},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			c := getCollection(t, h, withinURL(2.35, 48.85, 10, tt.query))
			if len(c.Features) != 1 {
				t.Fatalf("features = %d, want 1", len(c.Features))
			}
			got, _ := json.Marshal(c.Features[0].Properties)
			if string(got) != tt.want {
				t.Errorf("properties = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestWithinCursors(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	_, h := newTestService(t, pool, testTimeouts)
	insertPlaces(t, pool, []place{{"a", 10, 10}, {"b", 10.001, 10}, {"c", 10.002, 10}})
	first := getCollection(t, h, withinURL(10, 10, 1000, "limit=1"))
	next := first.next()
	if next == "" {
		t.Fatal("no next link on a partial page")
	}
	u, err := url.Parse(next)
	if err != nil {
		t.Fatal(err)
	}
	cursor := u.Query().Get("cursor")
	tampered := []byte(cursor)
	tampered[5] ^= 1
	tests := []struct {
		name   string
		target string
	}{
		{"tampered", withinURL(10, 10, 1000, "limit=1&cursor="+string(tampered))},
		{"other circle", withinURL(10, 10, 999, "limit=1&cursor="+cursor)},
		{"other layer", withinURL(10, 10, 1000, "layer=geofences&cursor="+cursor)},
		{"garbage", withinURL(10, 10, 1000, "cursor=%00%ff")},
		{"too long", withinURL(10, 10, 1000, "cursor="+strings.Repeat("A", 500))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := do(t, h, "GET", tt.target, "")
			if code != 422 || !strings.Contains(string(body), `"cursor"`) {
				t.Errorf("GET %s = %d %s, want 422 naming cursor", tt.target, code, body)
			}
		})
	}
	// Another limit and other properties keep the cursor valid.
	c := getCollection(t, h, withinURL(10, 10, 1000, "limit=5&properties=none&cursor="+cursor))
	if len(c.Features) != 2 || c.next() != "" {
		t.Errorf("second page: %d features, next %q; want 2 and none", len(c.Features), c.next())
	}
}

func TestWithinPolygonLayer(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	_, h := newTestService(t, pool, testTimeouts)
	mustExec(t, pool, `INSERT INTO geofences (name, geom) VALUES
		('square', ST_Multi(ST_MakeEnvelope(10, 10, 11, 11, 4326)))`)
	tests := []struct {
		name     string
		lng, lat float64
		r        float64
		want     float64 // distance, or -1 for no feature
	}{
		{"inside", 10.5, 10.5, 1, 0},
		{"east of the edge", 11.01, 10.5, 2000, -2},
		{"too far", 11.05, 10.5, 2000, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := getCollection(t, h, withinURL(tt.lng, tt.lat, tt.r, "layer=geofences"))
			switch {
			case tt.want == -1:
				if len(c.Features) != 0 {
					t.Errorf("features = %d, want 0", len(c.Features))
				}
			case len(c.Features) != 1 || c.Features[0].Geometry.Type != "MultiPolygon":
				t.Errorf("features = %+v, want the square", c.Features)
			case tt.want == 0:
				if d := c.Features[0].Properties["distance_m"].(float64); d != 0 {
					t.Errorf("distance_m = %v, want 0", d)
				}
			default:
				d := c.Features[0].Properties["distance_m"].(float64)
				if d < 1000 || d > 1100 {
					t.Errorf("distance_m = %v, want about 1096 (0.01° of longitude at 10.5°N)", d)
				}
			}
		})
	}
}

func TestWithinLayerWithNulls(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	insertPlaces(t, pool, []place{{"a", 1, 1}})
	mustExec(t, pool, `CREATE VIEW public.bare_places AS
		SELECT id, NULL::text AS name, NULL::jsonb AS properties, geom FROM places`)
	_, h := newTestService(t, pool, testTimeouts)
	c := getCollection(t, h, withinURL(1, 1, 10, "layer=bare_places&properties=x"))
	if len(c.Features) != 1 || c.Features[0].Properties["name"] != "" {
		t.Errorf("features = %+v, want one with an empty name", c.Features)
	}
}
