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
