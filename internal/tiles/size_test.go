package tiles

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/paulmach/orb"

	"github.com/geogate/geogate/internal/spatial"
	"github.com/geogate/geogate/internal/testenv"
)

// maxTileBytes is the bound every tile of the demo data must stay under.
const maxTileBytes = 500 << 10

// demoDB returns a fresh database holding the demo data: 171k cities in
// places, 220 countries in geofences.
func demoDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	return testenv.DemoDB(t)
}

// TestEveryTileFitsDemoData renders every tile of zooms 0 to 6 of both
// layers (5,461 each) straight through the Renderer, and at zooms 7 to 14
// the tiles around the densest places plus random ones: each must stay
// under maxTileBytes.
func TestEveryTileFitsDemoData(t *testing.T) {
	t.Parallel()
	db := demoDB(t)
	r := newRenderer(t, db, DefaultSettings())
	var tiles []Tile
	for z := 0; z <= 6; z++ {
		for x := 0; x < 1<<z; x++ {
			for y := 0; y < 1<<z; y++ {
				tiles = append(tiles, Tile{z, x, y})
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for z := 7; z <= 14; z++ {
		tiles = append(tiles, densestTiles(t, db, z, 10)...)
		for range 10 {
			tiles = append(tiles, Tile{z, rng.IntN(1 << z), rng.IntN(1 << z)})
		}
	}
	for _, l := range r.Layers() {
		t.Run(l.ID, func(t *testing.T) {
			var mu sync.Mutex
			largest, largestAt, features := 0, Tile{}, 0
			renderAll(t, tiles, func(tl Tile) error {
				out, err := r.Render(context.Background(), l, tl, nil)
				if err != nil {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				if len(out.MVT) > largest {
					largest, largestAt = len(out.MVT), tl
				}
				if len(out.MVT) >= maxTileBytes {
					t.Errorf("tile %s of %s is %d bytes, want < %d", tl, l.ID, len(out.MVT), maxTileBytes)
				}
				if len(out.MVT) > 0 {
					features++
				}
				return nil
			})
			t.Logf("%s: %d tiles, %d not empty, largest %d bytes at %s", l.ID, len(tiles), features, largest, largestAt)
			if features < 1000 {
				t.Errorf("only %d non-empty tiles: the demo data did not load?", features)
			}
		})
	}
}

// TestScopedRendersDemoData renders every tile of zooms 0 to 5 that
// straddles a polygon scope over central Europe, for both layers: the
// overlay with real country borders must never fail, and nothing may lie
// outside the scope's box.
func TestScopedRendersDemoData(t *testing.T) {
	t.Parallel()
	db := demoDB(t)
	r := newRenderer(t, db, DefaultSettings())
	scope, err := spatial.Parse([]byte(`{"type":"Polygon","coordinates":[[[2,45],[20,44],[12,56],[2,45]]]}`))
	if err != nil {
		t.Fatal(err)
	}
	var tiles []Tile
	for z := 0; z <= 5; z++ {
		for x := 0; x < 1<<z; x++ {
			for y := 0; y < 1<<z; y++ {
				tl := Tile{z, x, y}
				a, b, c, d := tl.Bounds(float64(r.buffer) / float64(r.extent))
				if scope.IntersectsBBox(a, b, c, d) && !scope.ContainsBBox(a, b, c, d) {
					tiles = append(tiles, tl)
				}
			}
		}
	}
	for _, l := range r.Layers() {
		t.Run(l.ID, func(t *testing.T) {
			renderAll(t, tiles, func(tl Tile) error {
				out, err := r.Render(context.Background(), l, tl, scope.WKB())
				if err != nil {
					return err
				}
				// Grid snapping and simplification move vertices by a few
				// grid units.
				tol := 6 * 360 / float64(int(1)<<tl.Z) / float64(r.extent)
				for _, ml := range decode(t, out.MVT, tl) {
					for _, f := range ml.Features {
						b := f.Geometry.Bound()
						if b.Min[0] < 2-tol || b.Max[0] > 20+tol || b.Min[1] < 44-tol || b.Max[1] > 56+tol {
							t.Errorf("tile %s: %v %v at %v lies outside the scope's box", tl, ml.Name, f.Properties["name"], b)
						}
					}
				}
				return nil
			})
		})
	}
}

// densestTiles returns the n tiles of zoom z holding the most places.
func densestTiles(t *testing.T, db *pgxpool.Pool, z, n int) []Tile {
	t.Helper()
	rows, err := db.Query(context.Background(), `
		SELECT floor((ST_X(geom) + 180) / 360 * 2^$1)::int AS x,
		       floor((1 - ln(tan(radians(ST_Y(geom))) + 1 / cos(radians(ST_Y(geom)))) / pi()) / 2 * 2^$1)::int AS y
		FROM places WHERE abs(ST_Y(geom)) < 85
		GROUP BY 1, 2 ORDER BY count(*) DESC LIMIT $2`, z, n)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []Tile
	for rows.Next() {
		var x, y int
		if err := rows.Scan(&x, &y); err != nil {
			t.Fatal(err)
		}
		out = append(out, Tile{z, x, y})
	}
	return out
}

// renderAll runs fn over tiles with a few workers.
func renderAll(t *testing.T, tiles []Tile, fn func(Tile) error) {
	t.Helper()
	ch := make(chan Tile)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tl := range ch {
				if err := fn(tl); err != nil {
					t.Errorf("render %s: %v", tl, err)
				}
			}
		}()
	}
	for _, tl := range tiles {
		ch <- tl
	}
	close(ch)
	wg.Wait()
}

// TestThinningNests checks what the README promises of thinning: a place
// shown at one zoom is shown at the next, in the child tile holding it.
func TestThinningNests(t *testing.T) {
	t.Parallel()
	db := demoDB(t)
	r := newRenderer(t, db, DefaultSettings())
	l := layer(t, r, "places")
	ids := func(tl Tile) map[any]orb.Point {
		out, err := r.Render(context.Background(), l, tl, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := map[any]orb.Point{}
		for _, ml := range decode(t, out.MVT, tl) {
			for _, f := range ml.Features {
				got[f.ID] = f.Geometry.(orb.Point)
			}
		}
		return got
	}
	for _, parent := range []Tile{{4, 8, 5}, {6, 34, 20}, {9, 274, 167}} {
		minLng, minLat, maxLng, maxLat := parent.Bounds(0)
		shown := ids(parent)
		children := map[any]bool{}
		for dx := range 2 {
			for dy := range 2 {
				for id := range ids(Tile{parent.Z + 1, 2*parent.X + dx, 2*parent.Y + dy}) {
					children[id] = true
				}
			}
		}
		inside := 0
		for id, p := range shown {
			// Buffer features belong to the neighbours' children.
			if p[0] <= minLng || p[0] >= maxLng || p[1] <= minLat || p[1] >= maxLat {
				continue
			}
			inside++
			if !children[id] {
				t.Errorf("place %v shown in %s at %v is missing from its children", id, parent, p)
			}
		}
		if inside < 20 {
			t.Errorf("tile %s shows only %d places inside it", parent, inside)
		}
	}
}
