package spatial

import (
	"math"
	"slices"

	"github.com/twpayne/go-geom"
)

// ContainsCircle reports whether the whole circle of radius metres around
// (lng, lat) lies inside the scope. The circle is replaced by its bounding
// box in longitude and latitude, computed on a sphere smaller than the
// Earth so that it is never smaller than the true geodesic circle; circles
// over a pole span every longitude, and circles crossing the antimeridian
// are split there. For a box scope this is exact up to that margin; for a
// polygon it refuses a few circles that fit only into concave corners.
// Invalid input (NaN, out-of-range coordinates, negative radius) is never
// contained.
func (s *Scope) ContainsCircle(lng, lat, radiusMeters float64) bool {
	return s.containsParts(circleBoxes(lng, lat, radiusMeters))
}

// containsParts reports whether every box of a valid (ok) shape lies
// inside the scope; a nil scope holds everything valid.
func (s *Scope) containsParts(parts []box, ok bool) bool {
	if !ok {
		return false
	}
	if s == nil {
		return true
	}
	for _, b := range parts {
		if !s.containsBox(b) {
			return false
		}
	}
	return true
}

// circleBoxes returns the longitude/latitude bounding box of a circle,
// split in two when it crosses the antimeridian.
func circleBoxes(lng, lat, r float64) ([]box, bool) {
	if math.IsNaN(lng) || math.IsNaN(lat) || math.IsNaN(r) || lng < -180 || lng > 180 || lat < -90 || lat > 90 || r < 0 || math.IsInf(r, 0) {
		return nil, false
	}
	d := r/minEarthRadius*1.001 + 1e-9 // angular radius, radians
	dDeg := d * 180 / math.Pi
	minLat, maxLat := lat-dDeg, lat+dDeg
	if minLat <= -90 || maxLat >= 90 || d >= math.Pi/2 {
		return []box{{-180, math.Max(minLat, -90), 180, math.Min(maxLat, 90)}}, true
	}
	ratio := math.Sin(d) / math.Cos(lat*math.Pi/180)
	if ratio >= 1 {
		return []box{{-180, minLat, 180, maxLat}}, true
	}
	dLng := math.Asin(ratio) * 180 / math.Pi
	minLng, maxLng := lng-dLng, lng+dLng
	switch {
	case dLng >= 180:
		return []box{{-180, minLat, 180, maxLat}}, true
	case minLng < -180:
		return []box{{minLng + 360, minLat, 180, maxLat}, {-180, minLat, maxLng, maxLat}}, true
	case maxLng > 180:
		return []box{{minLng, minLat, 180, maxLat}, {-180, minLat, maxLng - 360, maxLat}}, true
	}
	return []box{{minLng, minLat, maxLng, maxLat}}, true
}

// bboxParts validates a query box and splits it at the antimeridian when
// minLng > maxLng.
func bboxParts(minLng, minLat, maxLng, maxLat float64) ([]box, bool) {
	for _, v := range []float64{minLng, minLat, maxLng, maxLat} {
		if math.IsNaN(v) {
			return nil, false
		}
	}
	if minLng < -180 || minLng > 180 || maxLng < -180 || maxLng > 180 || minLat < -90 || maxLat > 90 || minLat > maxLat {
		return nil, false
	}
	if minLng <= maxLng {
		return []box{{minLng, minLat, maxLng, maxLat}}, true
	}
	return []box{{minLng, minLat, 180, maxLat}, {-180, minLat, maxLng, maxLat}}, true
}

// ContainsBBox reports whether the whole box lies inside the scope (its
// boundary counts as inside). minLng > maxLng means a box crossing the
// antimeridian. An invalid box is never contained.
func (s *Scope) ContainsBBox(minLng, minLat, maxLng, maxLat float64) bool {
	return s.containsParts(bboxParts(minLng, minLat, maxLng, maxLat))
}

// IntersectsBBox reports whether the box and the scope share any point.
// With ContainsBBox it sorts a tile into wholly inside, straddling, or
// wholly outside. An invalid box intersects nothing.
func (s *Scope) IntersectsBBox(minLng, minLat, maxLng, maxLat float64) bool {
	parts, ok := bboxParts(minLng, minLat, maxLng, maxLat)
	if !ok {
		return false
	}
	if s == nil {
		return true
	}
	for _, b := range parts {
		if s.intersectsBox(b) {
			return true
		}
	}
	return false
}

func (s *Scope) containsBox(b box) bool {
	if s.boxes != nil {
		for _, sb := range s.boxes {
			if b.within(sb) {
				return true
			}
		}
		return false
	}
	if !b.within(s.bound) {
		return false
	}
	// A box with no area would slip between edges: give it a sliver.
	const eps = 1e-9
	if b.maxX-b.minX < eps {
		b.minX, b.maxX = b.minX-eps, b.maxX+eps
	}
	if b.maxY-b.minY < eps {
		b.minY, b.maxY = b.minY-eps, b.maxY+eps
	}
	// No boundary of the scope may pass through the open box; then the box
	// is wholly in or wholly out, and its centre tells which.
	for _, rings := range s.polys {
		for _, r := range rings {
			for i := 0; i+1 < len(r); i++ {
				if segCrossesOpenBox(r[i], r[i+1], b) {
					return false
				}
			}
		}
	}
	return s.pointIn(pt{(b.minX + b.maxX) / 2, (b.minY + b.maxY) / 2})
}

func (s *Scope) intersectsBox(b box) bool {
	if s.boxes != nil {
		for _, sb := range s.boxes {
			if b.overlaps(sb) {
				return true
			}
		}
		return false
	}
	if !b.overlaps(s.bound) {
		return false
	}
	for _, c := range []pt{{b.minX, b.minY}, {b.maxX, b.minY}, {b.maxX, b.maxY}, {b.minX, b.maxY}} {
		if s.pointIn(c) {
			return true
		}
	}
	for _, rings := range s.polys {
		for _, r := range rings {
			for i := 0; i+1 < len(r); i++ {
				if _, _, ok := clip(r[i], r[i+1], b); ok {
					return true
				}
			}
		}
	}
	return false
}

// pointIn reports whether p lies in the closed area of a polygon scope.
func (s *Scope) pointIn(p pt) bool {
	for _, rings := range s.polys {
		if inPolygon(p, rings) {
			return true
		}
	}
	return false
}

// ContainsGeometry reports whether all of g lies inside the scope (touching
// its boundary is allowed). Edges are straight in longitude and latitude,
// as in PostGIS geometry. Empty or unsupported geometries are not
// contained.
func (s *Scope) ContainsGeometry(g geom.T) bool {
	if g == nil || g.Empty() {
		return false
	}
	lines, areas, ok := flatten(g)
	if !ok {
		return false
	}
	b := g.Bounds()
	gb := box{b.Min(0), b.Min(1), b.Max(0), b.Max(1)}
	if !gb.valid() || gb.minX < -180 || gb.maxX > 180 || gb.minY < -90 || gb.maxY > 90 {
		return false
	}
	if s == nil {
		return true
	}
	if s.boxes != nil {
		return s.containsBox(gb)
	}
	if !gb.within(s.bound) {
		return false
	}
	for _, l := range lines {
		if !s.pathIn(l) {
			return false
		}
	}
	// A hole of the scope (or a whole scope polygon) could sit inside an
	// area of g without any edge crossing: no scope vertex may lie strictly
	// inside g.
	for _, rings := range areas {
		for _, srings := range s.polys {
			for _, sr := range srings {
				for _, v := range sr {
					if polygonStrictlyContains(rings, v) {
						return false
					}
				}
			}
		}
	}
	return true
}

// pathIn reports whether every point of the polyline l lies in the scope:
// each segment is cut where it meets a scope edge, and the middle of each
// piece, which cannot cross the boundary, is tested.
func (s *Scope) pathIn(l []pt) bool {
	for _, p := range l {
		if !s.pointIn(p) {
			return false
		}
	}
	for i := 0; i+1 < len(l); i++ {
		a, b := l[i], l[i+1]
		ts := []float64{0, 1}
		sb := box{math.Min(a.x, b.x), math.Min(a.y, b.y), math.Max(a.x, b.x), math.Max(a.y, b.y)}
		for _, rings := range s.polys {
			for _, r := range rings {
				for j := 0; j+1 < len(r); j++ {
					c, d := r[j], r[j+1]
					eb := box{math.Min(c.x, d.x), math.Min(c.y, d.y), math.Max(c.x, d.x), math.Max(c.y, d.y)}
					if !sb.overlaps(eb) {
						continue
					}
					ts = append(ts, segParams(a, b, c, d)...)
				}
			}
		}
		if len(ts) == 2 {
			continue // no scope edge near: both ends are in, so is the segment
		}
		slices.Sort(ts)
		for k := 0; k+1 < len(ts); k++ {
			if ts[k+1]-ts[k] < 1e-12 {
				continue
			}
			t := (ts[k] + ts[k+1]) / 2
			if !s.pointIn(pt{a.x + t*(b.x-a.x), a.y + t*(b.y-a.y)}) {
				return false
			}
		}
	}
	return true
}
