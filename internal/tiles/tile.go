// Package tiles serves Mapbox Vector Tiles rendered by PostGIS, cached
// gzip-compressed in Redis under keys that carry each layer's data
// version, so that writes never leave stale tiles behind.
//
// Service finds and renders tiles and knows nothing of HTTP; Handler
// answers the tile routes with it, asking the gate for the layers that
// missed the cache and for those that hit it.
package tiles

import (
	"fmt"
	"math"
	"strconv"
)

// MaxZoom is the highest zoom any layer may declare.
const MaxZoom = 30

// Tile is one tile address in the XYZ scheme (y grows southwards).
type Tile struct {
	Z, X, Y int
}

func (t Tile) String() string { return fmt.Sprintf("%d/%d/%d", t.Z, t.X, t.Y) }

// ParseTile reads z, x and y as decimal integers and checks that the tile
// exists: 0 <= z <= MaxZoom and 0 <= x, y < 2^z. ok is false otherwise.
func ParseTile(z, x, y string) (t Tile, ok bool) {
	var err error
	if t.Z, err = parseInt(z); err != nil || t.Z > MaxZoom {
		return Tile{}, false
	}
	n := 1 << t.Z
	if t.X, err = parseInt(x); err != nil || t.X >= n {
		return Tile{}, false
	}
	if t.Y, err = parseInt(y); err != nil || t.Y >= n {
		return Tile{}, false
	}
	return t, true
}

// parseInt accepts only plain digits: no sign, no spaces, at most 10 of
// them, so "+1", "01x" and "1e3" are all rejected.
func parseInt(s string) (int, error) {
	if s == "" || len(s) > 10 {
		return 0, strconv.ErrSyntax
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, strconv.ErrSyntax
		}
	}
	return strconv.Atoi(s)
}

// Bounds returns the tile's extent in longitude and latitude, widened by
// margin (a fraction of the tile's width, 0 for the exact tile) and
// clamped to the Web Mercator world (latitudes within ±85.0511).
func (t Tile) Bounds(margin float64) (minLng, minLat, maxLng, maxLat float64) {
	n := float64(int64(1) << t.Z)
	x0, x1 := float64(t.X)-margin, float64(t.X+1)+margin
	y0, y1 := float64(t.Y)-margin, float64(t.Y+1)+margin
	minLng = max(-180, x0/n*360-180)
	maxLng = min(180, x1/n*360-180)
	maxLat = tileLat(y0 / n)
	minLat = tileLat(y1 / n)
	return minLng, minLat, maxLng, maxLat
}

// tileLat converts a Web Mercator y in [0, 1] (0 at the top) to latitude.
func tileLat(v float64) float64 {
	v = min(1, max(0, v))
	return math.Atan(math.Sinh(math.Pi*(1-2*v))) * 180 / math.Pi
}
