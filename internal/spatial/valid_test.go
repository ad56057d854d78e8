package spatial

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/geogate/geogate/internal/testenv"
)

// validityCases are scopes PostGIS calls valid or not; want is a part of
// Parse's error, "" for a scope accepted.
var validityCases = []struct {
	name, geojson, want string
}{
	{"Square", `{"type":"Polygon","coordinates":[[[0,0],[2,0],[2,2],[0,2],[0,0]]]}`, ""},
	{"RepeatedPoint", `{"type":"Polygon","coordinates":[[[0,0],[2,0],[2,0],[2,2],[0,2],[0,0]]]}`, ""},
	{"HoleTouchingShell", `{"type":"Polygon","coordinates":[[[0,0],[4,0],[4,4],[0,4],[0,0]],[[0,2],[2,1],[2,3],[0,2]]]}`, ""},
	{"TwoApart", `{"type":"MultiPolygon","coordinates":[[[[0,0],[1,0],[1,1],[0,1],[0,0]]],[[[2,2],[3,2],[3,3],[2,3],[2,2]]]]}`, ""},
	{"ErrBowTie", `{"type":"Polygon","coordinates":[[[0,0],[2,2],[2,0],[0,2],[0,0]]]}`, "ring 0 of polygon 0 intersects itself"},
	{"ErrSpike", `{"type":"Polygon","coordinates":[[[0,0],[2,0],[2,2],[2,3],[2,2],[0,2],[0,0]]]}`, "intersects itself"},
	{"ErrTouchingItself", `{"type":"Polygon","coordinates":[[[0,0],[4,0],[4,4],[2,0],[0,4],[0,0]]]}`, "intersects itself"},
	{"ErrHoleCrossingShell", `{"type":"Polygon","coordinates":[[[0,0],[4,0],[4,4],[0,4],[0,0]],[[3,1],[5,1],[5,2],[3,2],[3,1]]]}`, "ring 0 of polygon 0 crosses ring 1 of polygon 0"},
	{"HoleInside", `{"type":"Polygon","coordinates":[[[0,0],[4,0],[4,4],[0,4],[0,0]],[[1,1],[2,1],[2,2],[1,2],[1,1]]]}`, ""},
	{"TwoHoles", `{"type":"Polygon","coordinates":[[[0,0],[6,0],[6,4],[0,4],[0,0]],[[1,1],[2,1],[2,2],[1,2],[1,1]],[[3,1],[4,1],[4,2],[3,2],[3,1]]]}`, ""},
	{"IslandInHole", `{"type":"MultiPolygon","coordinates":[[[[0,0],[6,0],[6,6],[0,6],[0,0]],[[1,1],[5,1],[5,5],[1,5],[1,1]]],[[[2,2],[4,2],[4,4],[2,4],[2,2]]]]}`, ""},
	{"TouchingAtVertex", `{"type":"MultiPolygon","coordinates":[[[[0,0],[1,0],[1,1],[0,1],[0,0]]],[[[1,1],[2,1],[2,2],[1,2],[1,1]]]]}`, ""},
	{"ErrHoleOutsideShell", `{"type":"Polygon","coordinates":[[[0,0],[4,0],[4,4],[0,4],[0,0]],[[5,5],[6,5],[6,6],[5,6],[5,5]]]}`, "ring 1 of polygon 0 is a hole that lies outside its shell"},
	{"ErrHoleOutsideTouching", `{"type":"Polygon","coordinates":[[[0,0],[4,0],[4,4],[0,4],[0,0]],[[4,4],[5,4],[5,5],[4,5],[4,4]]]}`, "lies outside its shell"},
	{"ErrHoleThroughShellVertex", `{"type":"Polygon","coordinates":[[[0,0],[4,0],[4,4],[0,4],[0,0]],[[3,3],[4,4],[5,2],[4,0],[3,1],[3,3]]]}`, "ring 1 of polygon 0 is a hole that crosses its shell"},
	{"ErrNestedHoles", `{"type":"Polygon","coordinates":[[[0,0],[6,0],[6,6],[0,6],[0,0]],[[1,1],[5,1],[5,5],[1,5],[1,1]],[[2,2],[3,2],[3,3],[2,3],[2,2]]]}`, "ring 2 of polygon 0 is a hole inside (or overlapping) hole ring 1"},
	{"ErrNestedPolygons", `{"type":"MultiPolygon","coordinates":[[[[0,0],[4,0],[4,4],[0,4],[0,0]]],[[[1,1],[2,1],[2,2],[1,2],[1,1]]]]}`, "polygon 1 lies inside polygon 0"},
	{"ErrNestedFirstInside", `{"type":"MultiPolygon","coordinates":[[[[1,1],[2,1],[2,2],[1,2],[1,1]]],[[[0,0],[4,0],[4,4],[0,4],[0,0]]]]}`, "polygon 0 lies inside polygon 1"},
	{"ErrNestedTouching", `{"type":"MultiPolygon","coordinates":[[[[0,0],[4,0],[4,4],[0,4],[0,0]]],[[[0,0],[2,1],[1,2],[0,0]]]]}`, "polygon 1 lies inside polygon 0"},
	{"ErrOverlapThroughVertex", `{"type":"MultiPolygon","coordinates":[[[[0,0],[4,0],[4,4],[0,4],[0,0]]],[[[0,0],[6,-2],[4,4],[0,0]]]]}`, "polygon 1 overlaps polygon 0"},
	{"ErrIdenticalPolygons", `{"type":"MultiPolygon","coordinates":[[[[0,0],[2,0],[2,2],[0,2],[0,0]]],[[[0,0],[2,0],[2,2],[0,2],[0,0]]]]}`, "crosses"},
	{"EmptyMember", `{"type":"MultiPolygon","coordinates":[[[[0,0],[1,0],[1,1],[0,0]]],[]]}`, ""},
	{"EmptyFirstMember", `{"type":"MultiPolygon","coordinates":[[],[[[0,0],[1,0],[1,1],[0,0]]]]}`, ""},
	{"ErrOverlappingPolygons", `{"type":"MultiPolygon","coordinates":[[[[0,0],[2,0],[2,2],[0,2],[0,0]]],[[[1,1],[3,1],[3,3],[1,3],[1,1]]]]}`, "ring 0 of polygon 0 crosses ring 0 of polygon 1"},
}

func TestParseRefusesInvalidPolygons(t *testing.T) {
	for _, tt := range validityCases {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.geojson))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Parse(%s) = %v, want nil", tt.geojson, err)
			case tt.want != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Parse(%s) = %v, want ErrInvalid saying %q", tt.geojson, err, tt.want)
			}
		})
	}
}

// TestValidityMatchesPostGIS: what Parse accepts, ST_IsValid calls valid,
// and what it refuses, invalid.
func TestValidityMatchesPostGIS(t *testing.T) {
	db := testenv.DB(t)
	for _, tt := range validityCases {
		var valid bool
		var reason string
		err := db.QueryRow(context.Background(), "SELECT ST_IsValid(g), ST_IsValidReason(g) FROM ST_GeomFromGeoJSON($1) g", tt.geojson).Scan(&valid, &reason)
		if err != nil {
			t.Fatal(err)
		}
		if want := tt.want == ""; valid != want {
			t.Errorf("%s: ST_IsValid = %v (%s), but Parse accepting it = %v", tt.name, valid, reason, want)
		}
	}
}
