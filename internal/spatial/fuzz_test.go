package spatial

import (
	"encoding/json"
	"testing"

	"github.com/twpayne/go-geom"
	"github.com/twpayne/go-geom/encoding/geojson"
)

func FuzzParse(f *testing.F) {
	for _, s := range []string{berlinBox, lShape, holed, splitAtDateLine, `[170,-60,-170,-30]`, `null`, `{"type":"Point","coordinates":[1,2]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			return
		}
		s, err := Parse(data)
		if err != nil || s == nil {
			return
		}
		_ = s.ContainsCircle(13.4, 52.5, 1000)
		_ = s.ContainsBBox(-1, -1, 1, 1)
		_ = s.IntersectsBBox(170, -10, -170, 10)
		out, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		back, err := Parse(out)
		if err != nil || back.Hash() != s.Hash() {
			t.Fatalf("round trip of %s via %s: %v", data, out, err)
		}
	})
}

func FuzzContainsGeometry(f *testing.F) {
	for _, g := range []string{
		`{"type":"Polygon","coordinates":[[[1,1],[9,1],[1,9],[1,1]]]}`,
		`{"type":"LineString","coordinates":[[1,9],[9,1]]}`,
		`{"type":"Point","coordinates":[5,5]}`,
		`{"type":"MultiPolygon","coordinates":[[[[3,3],[7,3],[7,7],[3,7],[3,3]],[[4,4],[6,4],[6,6],[4,6],[4,4]]]]}`,
		`{"type":"GeometryCollection","geometries":[{"type":"Point","coordinates":[1,1]}]}`,
		`{"type":"Polygon","coordinates":[[[0,0],[0,0],[0,0],[0,0]]]}`,
	} {
		f.Add(uint8(0), []byte(g))
		f.Add(uint8(1), []byte(g))
	}
	scopes := []*Scope{mustScope(f, lShape), mustScope(f, holed), mustScope(f, berlinBox), mustScope(f, splitAtDateLine)}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		if len(data) > 16<<10 {
			return
		}
		var g geom.T
		if err := geojson.Unmarshal(data, &g); err != nil || g == nil {
			return
		}
		s := scopes[int(which)%len(scopes)]
		if !s.ContainsGeometry(g) {
			return
		}
		// Contained: every vertex is in the scope.
		lines, _, _ := flatten(g)
		for _, l := range lines {
			for _, p := range l {
				if !s.ContainsBBox(p.x, p.y, p.x, p.y) && (s.polys == nil || !s.pointIn(p)) {
					t.Fatalf("ContainsGeometry(%s) = true, but vertex %v is outside", data, p)
				}
			}
		}
	})
}
