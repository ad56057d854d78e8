package geofence

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/geogate/geogate/internal/apperr"
)

// TestContainsBoundariesAndMixedRows: on a generic column holding squares,
// their centre points, lines across them and a collection with a polygon,
// a point on an edge or corner is inside, points and lines never hold a
// point, and a collection's polygon does; the same with the copy.
func TestContainsBoundariesAndMixedRows(t *testing.T) {
	pool, cat, _, h := containsService(t)
	tests := []struct {
		name string
		p    [2]float64
		want []string
	}{
		{"Inside", [2]float64{0.5, 10.7}, []string{"0"}},
		{"OnTheCentrePoint", [2]float64{0.5, 10.5}, []string{"0"}},
		{"OnTheLine", [2]float64{0.7, 10.25}, []string{"0"}},
		{"OnASharedEdge", [2]float64{1, 10.5}, []string{"0", "1"}},
		{"OnASharedCorner", [2]float64{2, 11}, []string{"1", "2"}},
		{"OnAnOuterEdge", [2]float64{3.5, 10}, []string{"3"}},
		{"JustOutside", [2]float64{3.5, 9.999999}, []string{}},
		{"InTheCollectionsPolygon", [2]float64{20.5, 10.5}, []string{"300"}},
		{"OnTheCollectionsCorner", [2]float64{21, 11}, []string{"300"}},
		{"FarAway", [2]float64{-120, -40}, []string{}},
	}
	for _, stage := range []string{"Direct", "Subdivided"} {
		if stage == "Subdivided" {
			subdivide(t, pool, cat)
		}
		t.Run(stage, func(t *testing.T) {
			if got := cat.Layer("landmarks").ContainsPath(); (got == "subdivided") != (stage == "Subdivided") {
				t.Fatalf("landmarks contains path = %s", got)
			}
			var pts [][2]float64
			for _, tt := range tests {
				pts = append(pts, tt.p)
			}
			batch := batchContains(t, h, "landmarks", pts)
			for i, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					if diff := cmp.Diff(tt.want, batch[i]); diff != "" {
						t.Errorf("POST contains %v (-want +got):\n%s", tt.p, diff)
					}
					got := []string{}
					for _, f := range getContains(t, h, "landmarks", tt.p) {
						got = append(got, idText(t, f.ID))
						if kind := f.Properties["kind"]; kind != "square" && kind != "collection" {
							t.Errorf("feature %s: kind %v, want a polygon's", f.ID, kind)
						}
					}
					if diff := cmp.Diff(tt.want, got); diff != "" {
						t.Errorf("GET contains %v (-want +got):\n%s", tt.p, diff)
					}
				})
			}
		})
	}
}

// TestContainsOnTheSphere: a geography layer's edges are great circles.
// The southern edge of zone 1, between (0, 50) and (40, 50), runs north
// of the 50th parallel (to 51.75 at 20 E), and zone 4's northern edge, at
// 55 at its corners, reaches 55.41 at 20 E; a zone across the antimeridian
// takes the short way round.
func TestContainsOnTheSphere(t *testing.T) {
	pool, _, _, h := containsService(t)
	mustExec(t, pool, `INSERT INTO public.zones VALUES (2, 'antimeridian', 'SRID=4326;POLYGON((170 -20, -170 -20, -170 -10, 170 -10, 170 -20))')`)
	tests := []struct {
		name string
		p    [2]float64
		want []string
	}{
		{"SouthOfAGreatCircleEdge", [2]float64{20, 51}, []string{"4"}},
		{"NorthOfItInBoth", [2]float64{20, 55.2}, []string{"1", "4"}},
		{"NearACorner", [2]float64{0.01, 50.01}, []string{"1"}},
		{"OnAVertex", [2]float64{40, 60}, []string{"1"}},
		{"AcrossTheAntimeridianEast", [2]float64{179.5, -15}, []string{"2"}},
		{"AcrossTheAntimeridianWest", [2]float64{-175, -15}, []string{"2"}},
		{"NotTheLongWayRound", [2]float64{0, -15}, []string{}},
		{"Paris", [2]float64{2.35, 48.85}, []string{"3"}},
	}
	var pts [][2]float64
	for _, tt := range tests {
		pts = append(pts, tt.p)
	}
	got := batchContains(t, h, "zones", pts)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, got[i]); diff != "" {
				t.Errorf("POST contains %v (-want +got):\n%s", tt.p, diff)
			}
		})
	}
}

// TestContainsLayerAnswers: features are named by the layer's key (a
// string for a text key) and carry the layer's columns but its geometries;
// the fences answer the same with and without layer=geofences.
func TestContainsLayerAnswers(t *testing.T) {
	_, _, _, h := containsService(t)
	berlin := [2]float64{13.4, 52.5}
	fs := getContains(t, h, "countries", berlin)
	if len(fs) != 1 || string(fs[0].ID) != `"DEU"` {
		t.Fatalf("GET contains %v on countries = %+v, want DEU alone", berlin, fs)
	}
	want := map[string]any{"iso3": "DEU", "label": "Country DEU"}
	if got := fs[0].Properties; got["iso3"] != want["iso3"] || got["label"] != want["label"] || got["population"] == nil || len(got) != 3 {
		t.Errorf("properties = %v, want iso3, label and population", got)
	}
	for _, p := range [][2]float64{berlin, {2.35, 48.85}, {0, 0}, {1, 42.5}} {
		target := fmt.Sprintf("/geofences/contains?lng=%v&lat=%v", p[0], p[1])
		_, plain := do(t, h, "GET", target, "")
		_, layered := do(t, h, "GET", target+"&layer=geofences", "")
		if !bytes.Equal(plain, layered) {
			t.Errorf("GET %s = %s, with layer=geofences %s; want the same", target, plain, layered)
		}
	}
	body := `{"points":[[13.4,52.5],[2.35,48.85],[0,0],[1.52,42.51]]}`
	_, plain := do(t, h, "POST", "/geofences/contains", body)
	_, layered := do(t, h, "POST", "/geofences/contains?layer=geofences", body)
	if !bytes.Equal(plain, layered) {
		t.Errorf("POST contains = %s, with layer=geofences %s; want the same", plain, layered)
	}
}

// TestContainsLayerErrors: an unknown layer is a 404 as on /within, a
// malformed id or a layer without polygons a 422 naming the parameter, on
// both routes; every problem of a request is reported at once.
func TestContainsLayerErrors(t *testing.T) {
	_, _, _, h := containsService(t)
	const points = `{"points":[[13.4,52.5]]}`
	tests := []struct {
		name, method, target, body string
		wantCode                   int
		wantDetail                 string
		wantLocs                   [][]any
	}{
		{"UnknownLayer", "GET", "/geofences/contains?lng=1&lat=2&layer=nope", "", 404, apperr.MessageOf(errUnknownLayer), nil},
		{"UnknownLayerBatch", "POST", "/geofences/contains?layer=nope", points, 404, apperr.MessageOf(errUnknownLayer), nil},
		{"MalformedLayer", "GET", "/geofences/contains?lng=1&lat=2&layer=no%20pe", "", 422, "A layer id is", [][]any{{"query", "layer"}}},
		{"MalformedLayerBatch", "POST", "/geofences/contains?layer=no%20pe", points, 422, "A layer id is", [][]any{{"query", "layer"}}},
		{"LayerTwice", "GET", "/geofences/contains?lng=1&lat=2&layer=zones&layer=parcels", "", 422, "more than once", [][]any{{"query", "layer"}}},
		{"Lines", "GET", "/geofences/contains?lng=1&lat=2&layer=roads", "", 422, "holds LineString geometries", [][]any{{"query", "layer"}}},
		{"LinesBatch", "POST", "/geofences/contains?layer=roads", points, 422, "holds LineString geometries", [][]any{{"query", "layer"}}},
		{"PointsEmptyBatch", "POST", "/geofences/contains?layer=airports", `{"points":[]}`, 422, "holds Point geometries", [][]any{{"query", "layer"}}},
		{"EveryProblemAtOnce", "GET", "/geofences/contains?lng=200&layer=a.b", "", 422, "", [][]any{{"query", "lng"}, {"query", "lat"}, {"query", "layer"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := do(t, h, tt.method, tt.target, tt.body)
			if code != tt.wantCode || !strings.Contains(string(body), tt.wantDetail) {
				t.Fatalf("%s %s = %d %s, want %d with %q", tt.method, tt.target, code, body, tt.wantCode, tt.wantDetail)
			}
			if tt.wantLocs == nil {
				return
			}
			var got [][]any
			for _, fe := range detail422(t, body) {
				got = append(got, fe.Loc)
			}
			if diff := cmp.Diff(tt.wantLocs, got); diff != "" {
				t.Errorf("locs (-want +got):\n%s", diff)
			}
		})
	}
}
