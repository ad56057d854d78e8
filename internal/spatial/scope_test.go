package spatial

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/twpayne/go-geom"
	"github.com/twpayne/go-geom/encoding/geojson"
	"github.com/twpayne/go-geom/encoding/wkb"

	"github.com/geogate/geogate/internal/testenv"
)

func mustScope(t testing.TB, js string) *Scope {
	t.Helper()
	s, err := Parse([]byte(js))
	if err != nil || s == nil {
		t.Fatalf("Parse(%s) = %v, %v", js, s, err)
	}
	return s
}

func mustGeom(t testing.TB, js string) geom.T {
	t.Helper()
	var g geom.T
	if err := geojson.Unmarshal([]byte(js), &g); err != nil {
		t.Fatalf("geojson %s: %v", js, err)
	}
	return g
}

const (
	berlinBox = `[13,52,14,53]`
	// An L: a vertical arm x 0..2, y 0..10 and a horizontal arm y 0..2.
	lShape = `{"type":"Polygon","coordinates":[[[0,0],[10,0],[10,2],[2,2],[2,10],[0,10],[0,0]]]}`
	// A square with a square hole in the middle.
	holed = `{"type":"Polygon","coordinates":[[[0,0],[10,0],[10,10],[0,10],[0,0]],[[4,4],[6,4],[6,6],[4,6],[4,4]]]}`
	// A box around the antimeridian, as two polygons split there.
	splitAtDateLine = `{"type":"MultiPolygon","coordinates":[[[[170,-50],[180,-50],[180,-40],[170,-40],[170,-50]]],[[[-180,-50],[-170,-50],[-170,-40],[-180,-40],[-180,-50]]]]}`
)

func TestContainsCircle(t *testing.T) {
	for _, tc := range []struct {
		name, scope string
		lng, lat, r float64
		want        bool
	}{
		{"Inside", berlinBox, 13.5, 52.5, 1000, true},
		{"CrossesEastEdge", berlinBox, 13.5, 52.5, 40000, false}, // 0.59° of longitude at 52.5°N
		{"FitsInLatitudeNotLongitude", berlinBox, 13.5, 52.5, 35000, false},
		{"FitsBoth", berlinBox, 13.5, 52.5, 30000, true},
		{"CentreOutside", berlinBox, 12, 52.5, 10, false},
		{"NaN", berlinBox, math.NaN(), 52.5, 10, false},
		{"NegativeRadius", berlinBox, 13.5, 52.5, -1, false},
		{"LatitudeOutOfRange", berlinBox, 13.5, 91, 1, false},
		{"WrappedBoxAcrossDateLine", `[170,-60,-170,-30]`, 179.9, -45, 20000, true},
		{"WrappedBoxWest", `[170,-60,-170,-30]`, -175, -45, 10000, true},
		{"WrappedBoxOutside", `[170,-60,-170,-30]`, -165, -45, 10, false},
		{"LeavesAcrossDateLine", `[170,-10,180,10]`, 179.99, 0, 5000, false},
		{"SplitPolygonsAcrossDateLine", splitAtDateLine, 179.95, -45, 5000, true},
		{"OverThePoleInPolarCap", `[-180,80,180,90]`, 0, 89.9, 50000, true},
		{"OverThePoleLeavesSlice", `[0,80,10,90]`, 5, 89.9, 50000, false},
		{"LArmVertical", lShape, 1, 6, 50000, true},
		{"LNotch", lShape, 2.5, 2.5, 10000, false},
		{"LCornerTooBig", lShape, 1.9, 1.9, 200000, false},
		{"InHole", holed, 5, 5, 1000, false},
		{"AroundHole", holed, 5, 5, 300000, false},
		{"BesideHole", holed, 2, 2, 100000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustScope(t, tc.scope)
			if got := s.ContainsCircle(tc.lng, tc.lat, tc.r); got != tc.want {
				t.Errorf("%s.ContainsCircle(%v, %v, %v) = %v, want %v", tc.scope, tc.lng, tc.lat, tc.r, got, tc.want)
			}
		})
	}
	var world *Scope
	if !world.ContainsCircle(179, 89, 1e7) || world.ContainsCircle(0, 0, -1) {
		t.Errorf("nil scope: want every valid circle inside and invalid ones refused")
	}
}

func TestBBoxChecks(t *testing.T) {
	for _, tc := range []struct {
		name, scope                    string
		minLng, minLat, maxLng, maxLat float64
		wantContains, wantIntersects   bool
	}{
		{"BoxInside", berlinBox, 13.1, 52.1, 13.9, 52.9, true, true},
		{"BoxEqual", berlinBox, 13, 52, 14, 53, true, true},
		{"BoxStraddles", berlinBox, 13.5, 52.5, 14.5, 53.5, false, true},
		{"BoxOutside", berlinBox, 15, 52, 16, 53, false, false},
		{"BoxAroundScope", berlinBox, 0, 0, 20, 60, false, true},
		{"BoxInvalid", berlinBox, 13.5, 53, 13.6, 52, false, false},
		{"LVerticalArm", lShape, 0.5, 0.5, 1.5, 9, true, true},
		{"LHorizontalArm", lShape, 0.5, 0.5, 9, 1.5, true, true},
		{"LAcrossNotch", lShape, 0.5, 0.5, 5, 5, false, true},
		{"LInNotch", lShape, 5, 5, 6, 6, false, false},
		{"LCoversAll", lShape, -5, -5, 20, 20, false, true},
		{"HoleBesideIt", holed, 1, 1, 3, 3, true, true},
		{"HoleInsideBox", holed, 3, 3, 7, 7, false, true},
		{"InHole", holed, 4.5, 4.5, 5.5, 5.5, false, false},
		{"WrappedTileInSplitScope", splitAtDateLine, 175, -45, -175, -42, true, true},
		{"WrappedTileTooWide", splitAtDateLine, 160, -45, -175, -42, false, true},
		{"WrappedBoxScope", `[170,-60,-170,-30]`, 175, -45, -175, -42, true, true},
		{"WrappedBoxScopeEastOnly", `[170,-60,-170,-30]`, -179, -45, -171, -42, true, true},
		{"WrappedBoxScopeMiss", `[170,-60,-170,-30]`, -100, -45, 100, -42, false, false},
		{"ZeroAreaBoxOnEdge", lShape, 2, 3, 2, 3, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustScope(t, tc.scope)
			if got := s.ContainsBBox(tc.minLng, tc.minLat, tc.maxLng, tc.maxLat); got != tc.wantContains {
				t.Errorf("ContainsBBox = %v, want %v", got, tc.wantContains)
			}
			if got := s.IntersectsBBox(tc.minLng, tc.minLat, tc.maxLng, tc.maxLat); got != tc.wantIntersects {
				t.Errorf("IntersectsBBox = %v, want %v", got, tc.wantIntersects)
			}
		})
	}
}

func TestContainsGeometry(t *testing.T) {
	for _, tc := range []struct {
		name, scope, g string
		want           bool
	}{
		{"PolygonInArm", lShape, `{"type":"Polygon","coordinates":[[[0.5,3],[1.5,3],[1.5,9],[0.5,9],[0.5,3]]]}`, true},
		{"TriangleAcrossNotch", lShape, `{"type":"Polygon","coordinates":[[[1,1],[9,1],[1,9],[1,1]]]}`, false},
		{"LineAcrossNotch", lShape, `{"type":"LineString","coordinates":[[1,9],[9,1]]}`, false},
		{"LineAlongArm", lShape, `{"type":"LineString","coordinates":[[1,1],[1,9]]}`, true},
		{"LineAlongEdge", lShape, `{"type":"LineString","coordinates":[[0,0],[10,0]]}`, true},
		{"PointInNotch", lShape, `{"type":"Point","coordinates":[5,5]}`, false},
		{"PointInCorner", lShape, `{"type":"Point","coordinates":[1,1]}`, true},
		{"EqualToScope", lShape, lShape, true},
		{"PolygonAroundHole", holed, `{"type":"Polygon","coordinates":[[[3,3],[7,3],[7,7],[3,7],[3,3]]]}`, false},
		{"PolygonWithTheHole", holed, `{"type":"Polygon","coordinates":[[[3,3],[7,3],[7,7],[3,7],[3,3]],[[4,4],[6,4],[6,6],[4,6],[4,4]]]}`, true},
		{"MultiPolygonOneOut", berlinBox, `{"type":"MultiPolygon","coordinates":[[[[13.1,52.1],[13.2,52.1],[13.2,52.2],[13.1,52.1]]],[[[15,52],[15.1,52],[15.1,52.1],[15,52]]]]}`, false},
		{"BoxScopeInside", berlinBox, `{"type":"Polygon","coordinates":[[[13.1,52.1],[13.9,52.1],[13.9,52.9],[13.1,52.1]]]}`, true},
		{"BoxScopePartlyOut", berlinBox, `{"type":"Polygon","coordinates":[[[13.1,52.1],[14.1,52.1],[13.9,52.9],[13.1,52.1]]]}`, false},
		{"EmptyCollection", berlinBox, `{"type":"GeometryCollection","geometries":[]}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustScope(t, tc.scope).ContainsGeometry(mustGeom(t, tc.g)); got != tc.want {
				t.Errorf("ContainsGeometry(%s) = %v, want %v", tc.g, got, tc.want)
			}
		})
	}
	var world *Scope
	if !world.ContainsGeometry(mustGeom(t, lShape)) {
		t.Errorf("nil scope refused a geometry")
	}
}

func TestParseSpatialScope(t *testing.T) {
	big := make([][]float64, 0, MaxVertices+2)
	for i := 0; i <= MaxVertices; i++ {
		a := 2 * math.Pi * float64(i) / float64(MaxVertices+1)
		big = append(big, []float64{math.Cos(a), math.Sin(a)})
	}
	big = append(big, big[0])
	bigJSON, _ := json.Marshal(map[string]any{"type": "Polygon", "coordinates": [][][]float64{big}})
	for _, bad := range []string{
		`[1,2,3]`, `[0,0,0,1]`, `[-181,0,0,1]`, `[0,1,1,0]`, `[0,-91,1,0]`, `["a",0,1,1]`, `{}`, `"x"`,
		`{"type":"Point","coordinates":[1,2]}`,
		`{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,1]]]}`,
		`{"type":"Polygon","coordinates":[[[0,0],[1,0],[0,0]]]}`,
		`{"type":"Polygon","coordinates":[[[0,0],[200,0],[1,1],[0,0]]]}`,
		`{"type":"MultiPolygon","coordinates":[]}`,
		`{"type":"MultiPolygon","coordinates":[[],[]]}`,
		`{"type":"Polygon","coordinates":[]}`,
		string(bigJSON),
	} {
		if s, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%.60s) = %v, want an error", bad, s)
		}
	}
	if s, err := Parse([]byte(" null ")); s != nil || err != nil {
		t.Errorf("Parse(null) = %v, %v; want the whole world", s, err)
	}
	f := mustScope(t, `{"type":"Feature","properties":{},"geometry":`+lShape+`}`)
	if f.Hash() != mustScope(t, lShape).Hash() {
		t.Errorf("a Feature scope differs from its geometry")
	}
	if _, err := Parse([]byte(`{"type":"Feature","geometry":null}`)); err == nil {
		t.Errorf("a Feature without geometry parsed")
	}
	z := mustScope(t, `{"type":"Polygon","coordinates":[[[0,0,5],[1,0,5],[1,1,5],[0,0,5]]]}`)
	if !z.ContainsBBox(0.6, 0.1, 0.9, 0.3) {
		t.Errorf("a 3D polygon scope does not work in 2D")
	}
}

func TestScopeEncodings(t *testing.T) {
	a, b, c := mustScope(t, berlinBox), mustScope(t, ` [13, 52, 14, 53] `), mustScope(t, `[13,52,14,53.5]`)
	if a.Hash() != b.Hash() || a.Hash() == c.Hash() || len(a.Hash()) != 32 {
		t.Errorf("Hash() = %s, %s, %s; want equal for equal boxes, different otherwise", a.Hash(), b.Hash(), c.Hash())
	}
	if (*Scope)(nil).Hash() != "world" {
		t.Errorf("nil Hash() != world")
	}
	for _, js := range []string{berlinBox, lShape, splitAtDateLine, `[170,-60,-170,-30]`} {
		s := mustScope(t, js)
		out, _ := json.Marshal(s)
		var back Scope
		if err := json.Unmarshal(out, &back); err != nil || back.Hash() != s.Hash() {
			t.Errorf("JSON round trip of %s: %s, %v", js, out, err)
		}
		g, err := wkb.Unmarshal(s.WKB())
		if _, ok := g.(*geom.MultiPolygon); err != nil || !ok {
			t.Errorf("WKB of %s decodes to %T, %v; want a MultiPolygon", js, g, err)
		}
	}
}

// TestCircleConservativeOnSpheroid checks ContainsCircle against PostGIS:
// for the largest circle it accepts around random centres, every point of
// the geodesic circle
// on the WGS84 spheroid (ST_Project, every degree of azimuth) is inside
// the scope as PostGIS sees the scope's WKB.
func TestCircleConservativeOnSpheroid(t *testing.T) {
	db := testenv.DB(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	scopes := []string{berlinBox, `[-10,-5,10,5]`, `[-30,60,30,75]`, lShape, `[170,-60,-170,-30]`}
	checked := 0
	for _, js := range scopes {
		s := mustScope(t, js)
		b := s.Geometry().Bounds()
		for i := 0; i < 40; i++ {
			lng := b.Min(0) + rng.Float64()*(b.Max(0)-b.Min(0))
			if js == `[170,-60,-170,-30]` {
				lng = 165 + rng.Float64()*30
				if lng > 180 {
					lng -= 360
				}
			}
			lat := b.Min(1) + rng.Float64()*(b.Max(1)-b.Min(1))
			// The largest circle accepted here is the one that tells.
			lo, hi := 0.0, 2e6
			for k := 0; k < 40; k++ {
				if mid := (lo + hi) / 2; s.ContainsCircle(lng, lat, mid) {
					lo = mid
				} else {
					hi = mid
				}
			}
			r := lo
			if r < 1 {
				continue
			}
			checked++
			var outside int
			err := db.QueryRow(ctx, `
				SELECT count(*) FROM generate_series(0, 359) AS az
				WHERE NOT ST_Covers(ST_SetSRID(ST_GeomFromWKB($1), 4326),
				    ST_Project(ST_SetSRID(ST_MakePoint($2, $3), 4326)::geography, $4, radians(az))::geometry)`,
				s.WKB(), lng, lat, r).Scan(&outside)
			if err != nil {
				t.Fatal(err)
			}
			if outside > 0 {
				t.Errorf("%s.ContainsCircle(%.5f, %.5f, %.0f) = true, but %d points of the circle are outside", js, lng, lat, r, outside)
			}
		}
	}
	if checked < 40 {
		t.Errorf("only %d circles were inside; the check has too little to check", checked)
	}
	t.Logf("%d circles checked", checked)
}

// TestCircleTightForBoxes: for a box scope the margin stays small: a
// circle at most 1% smaller than the largest that fits is accepted.
func TestCircleTightForBoxes(t *testing.T) {
	s := mustScope(t, `[-10,-60,10,60]`)
	for _, lat := range []float64{0, 30, 55} {
		// Distance to the nearer edge along a meridian or parallel, from a
		// spherical estimate that is generous (the real one is larger).
		fit := math.Min((60-math.Abs(lat))*110_574, 10*111_320*math.Cos(lat*math.Pi/180))
		lo, hi := 0.0, 2*fit
		for i := 0; i < 40; i++ {
			mid := (lo + hi) / 2
			if s.ContainsCircle(0, lat, mid) {
				lo = mid
			} else {
				hi = mid
			}
		}
		if lo < 0.985*fit {
			t.Errorf("at lat %v the largest accepted radius is %.0f m, want at least 98.5%% of %.0f m", lat, lo, fit)
		}
	}
}

func ExampleScope_ContainsCircle() {
	s, _ := Parse([]byte(`[13,52,14,53]`))
	fmt.Println(s.ContainsCircle(13.4, 52.5, 500))
	fmt.Println(s.ContainsCircle(13.4, 52.5, 50_000))
	fmt.Println(strings.HasPrefix(s.String(), "[13,52"))
	// Output:
	// true
	// false
	// true
}
