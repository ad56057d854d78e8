package spatial

import (
	"fmt"
	"strings"
)

// checkSimple refuses rings that cross or touch themselves (a bow tie, a
// spike) and rings that cross one another. PostGIS calls such polygons
// invalid, and GEOS overlays (ST_Intersection, which clips features and
// tiles to a scope) fail on them with a TopologyException: a scope like
// that would turn every scoped request into a 500. It is refused where it
// is given rather than repaired, so that the area a key or token reaches
// is always exactly the one written.
//
// Once no two rings cross, checkNesting looks at where each ring lies.
func checkSimple(polys [][][]pt) error {
	var rings [][]pt
	var names []string
	clean := make([][][]pt, len(polys))
	for i, p := range polys {
		for j, r := range p {
			r = dedup(r)
			clean[i] = append(clean[i], r)
			rings = append(rings, r)
			names = append(names, fmt.Sprintf("ring %d of polygon %d", j, i))
		}
	}
	for a, r := range rings {
		if at, ok := selfIntersection(r); ok {
			return fmt.Errorf("%w: %s intersects itself near [%g,%g]", ErrInvalid, names[a], at.x, at.y)
		}
		for b := a + 1; b < len(rings); b++ {
			if at, ok := crossing(r, rings[b]); ok {
				return fmt.Errorf("%w: %s crosses %s near [%g,%g]", ErrInvalid, names[a], names[b], at.x, at.y)
			}
		}
	}
	return checkNesting(clean)
}

// dedup drops repeated consecutive positions, which PostGIS allows.
func dedup(r []pt) []pt {
	out := r[:1:1]
	for _, p := range r[1:] {
		if p != out[len(out)-1] {
			out = append(out, p)
		}
	}
	return out
}

// selfIntersection finds two edges of closed ring r that meet other than
// where consecutive edges share their vertex.
func selfIntersection(r []pt) (pt, bool) {
	n := len(r) - 1 // edges
	if n < 3 {
		return r[0], true // collapsed to a line or a point
	}
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			a, b, c, d := r[i], r[i+1], r[j], r[j+1]
			switch {
			case j == i+1:
				if foldsBack(a, b, d) {
					return b, true
				}
			case i == 0 && j == n-1:
				if foldsBack(b, a, c) {
					return a, true
				}
			case segmentsMeet(a, b, c, d):
				return a, true
			}
		}
	}
	return pt{}, false
}

// foldsBack reports whether the edges from shared to p and to q run
// along each other (a spike): consecutive edges may only share their
// vertex.
func foldsBack(p, shared, q pt) bool {
	return orient(p, shared, q) == 0 && dot(p, shared, q) > 0
}

// crossing finds an edge of r crossing an edge of s. Rings may touch at a
// point (a hole touching its shell is valid), but not cross.
func crossing(r, s []pt) (pt, bool) {
	for i := 0; i+1 < len(r); i++ {
		for j := 0; j+1 < len(s); j++ {
			if segmentsCross(r[i], r[i+1], s[j], s[j+1]) {
				return r[i], true
			}
		}
	}
	return pt{}, false
}

// orient is the sign of the turn a, b, c: 1 left, -1 right, 0 collinear.
func orient(a, b, c pt) int {
	v := (b.x-a.x)*(c.y-a.y) - (b.y-a.y)*(c.x-a.x)
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}

// dot is the dot product of b→a and b→c: positive when a and c lie on
// the same side of b.
func dot(a, b, c pt) float64 { return (a.x-b.x)*(c.x-b.x) + (a.y-b.y)*(c.y-b.y) }

// between reports whether p, collinear with a and b, lies between them.
func between(a, b, p pt) bool {
	return min(a.x, b.x) <= p.x && p.x <= max(a.x, b.x) && min(a.y, b.y) <= p.y && p.y <= max(a.y, b.y)
}

// segmentsMeet reports whether segments ab and cd share any point.
func segmentsMeet(a, b, c, d pt) bool {
	o1, o2, o3, o4 := orient(a, b, c), orient(a, b, d), orient(c, d, a), orient(c, d, b)
	if o1 != o2 && o3 != o4 {
		return true
	}
	return (o1 == 0 && between(a, b, c)) || (o2 == 0 && between(a, b, d)) ||
		(o3 == 0 && between(c, d, a)) || (o4 == 0 && between(c, d, b))
}

// segmentsCross reports whether ab and cd cross at a point inside both,
// or overlap along a stretch.
func segmentsCross(a, b, c, d pt) bool {
	o1, o2, o3, o4 := orient(a, b, c), orient(a, b, d), orient(c, d, a), orient(c, d, b)
	if o1*o2 < 0 && o3*o4 < 0 {
		return true
	}
	return o1 == 0 && o2 == 0 && overlapsAlong(a, b, c, d)
}

// overlapsAlong reports whether collinear segments ab and cd share more
// than a point.
func overlapsAlong(a, b, c, d pt) bool {
	if a.x == b.x && c.x == d.x { // vertical: compare along y
		return max(min(a.y, b.y), min(c.y, d.y)) < min(max(a.y, b.y), max(c.y, d.y))
	}
	return max(min(a.x, b.x), min(c.x, d.x)) < min(max(a.x, b.x), max(c.x, d.x))
}

// Reason returns what a Parse or NewGeometry error says is wrong with the
// scope beyond its being invalid, or "" when it says nothing more.
func Reason(err error) string {
	s, ok := strings.CutPrefix(err.Error(), ErrInvalid.Error()+": ")
	if !ok {
		return ""
	}
	return s
}
