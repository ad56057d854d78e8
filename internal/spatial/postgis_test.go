package spatial

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/twpayne/go-geom"
	"github.com/twpayne/go-geom/encoding/wkb"

	"github.com/geogate/geogate/internal/testenv"
)

// TestScopeChecksMatchPostGIS compares the pure-Go checks with PostGIS on
// random boxes and triangles, some on a coarse grid so that many touch the
// scope's edges and vertices: ContainsBBox and ContainsGeometry with
// ST_Covers, IntersectsBBox with ST_Intersects.
func TestScopeChecksMatchPostGIS(t *testing.T) {
	db := testenv.DB(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 11))
	coord := func(grid bool) float64 {
		v := -2 + rng.Float64()*14
		if grid {
			v = float64(int(v*2)) / 2
		}
		return v
	}
	for _, js := range []string{lShape, holed, `[1,1,9,9]`} {
		s := mustScope(t, js)
		for i := 0; i < 150; i++ {
			grid := i%2 == 0
			x1, x2, y1, y2 := coord(grid), coord(grid), coord(grid), coord(grid)
			if x1 > x2 {
				x1, x2 = x2, x1
			}
			if y1 > y2 {
				y1, y2 = y2, y1
			}
			if x1 == x2 || y1 == y2 {
				continue
			}
			var covers, intersects bool
			err := db.QueryRow(ctx, `
				SELECT ST_Covers(s, b), ST_Intersects(s, b)
				FROM (SELECT ST_GeomFromWKB($1) AS s, ST_MakeEnvelope($2, $3, $4, $5) AS b) q`,
				s.WKB(), x1, y1, x2, y2).Scan(&covers, &intersects)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.ContainsBBox(x1, y1, x2, y2); got != covers {
				t.Errorf("%s.ContainsBBox(%v,%v,%v,%v) = %v, PostGIS ST_Covers = %v", js, x1, y1, x2, y2, got, covers)
			}
			if got := s.IntersectsBBox(x1, y1, x2, y2); got != intersects {
				t.Errorf("%s.IntersectsBBox(%v,%v,%v,%v) = %v, PostGIS ST_Intersects = %v", js, x1, y1, x2, y2, got, intersects)
			}

			tri := geom.NewPolygon(geom.XY).MustSetCoords([][]geom.Coord{{
				{coord(grid), coord(grid)}, {coord(grid), coord(grid)}, {coord(grid), coord(grid)}, {0, 0},
			}})
			flat := tri.FlatCoords()
			flat[6], flat[7] = flat[0], flat[1]
			if tri.Area() < 1e-6 {
				continue
			}
			g, _ := wkb.Marshal(tri, wkb.NDR)
			if err := db.QueryRow(ctx, `SELECT ST_Covers(ST_GeomFromWKB($1), ST_GeomFromWKB($2))`, s.WKB(), g).Scan(&covers); err != nil {
				t.Fatal(err)
			}
			if got := s.ContainsGeometry(tri); got != covers {
				t.Errorf("%s.ContainsGeometry(%v) = %v, PostGIS ST_Covers = %v", js, fmt.Sprint(tri.Coords()), got, covers)
			}
		}
	}
}
