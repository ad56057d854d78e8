package spatial

import "fmt"

// checkNesting refuses rings that do not cross but lie in the wrong place:
// a hole outside its shell or inside another hole, and a polygon of a
// multipolygon inside or overlapping another one (outside it, or inside
// one of its holes, is fine). PostGIS calls these invalid ("Hole lies
// outside shell", "Holes are nested", "Nested shells", "Self-intersection")
// and, worse for a scope, the even-odd tests that decide whether a point
// lies in it would answer wrongly: a nested polygon's area would count
// twice, or cancel out. It also catches two rings meeting at a vertex and
// passing through each other there, which crossing (proper crossings of
// edges only) lets through.
//
// It runs after checkSimple has made sure no edges cross, so a ring lies
// wholly on one side of another, apart from points where they touch;
// side samples a few of its points to find which.
func checkNesting(polys [][][]pt) error {
	for i, p := range polys {
		if err := checkHoles(i, p); err != nil {
			return err
		}
	}
	for a, p := range polys {
		for b, q := range polys {
			if a == b {
				continue
			}
			switch side(q[0], func(x pt) int { return areaSide(x, p) }) {
			case inside:
				return fmt.Errorf("%w: polygon %d lies inside polygon %d (the polygons of a MultiPolygon may only touch at points)", ErrInvalid, b, a)
			case both:
				return fmt.Errorf("%w: polygon %d overlaps polygon %d (the polygons of a MultiPolygon may only touch at points)", ErrInvalid, b, a)
			}
		}
	}
	return nil
}

// checkHoles refuses holes of polygon i (rings p[1:]) that leave its shell
// or lie inside one another.
func checkHoles(i int, p [][]pt) error {
	for j := 1; j < len(p); j++ {
		switch side(p[j], func(x pt) int { return ringSide(x, p[0]) }) {
		case outside:
			return fmt.Errorf("%w: ring %d of polygon %d is a hole that lies outside its shell (ring 0)", ErrInvalid, j, i)
		case both:
			return fmt.Errorf("%w: ring %d of polygon %d is a hole that crosses its shell (ring 0)", ErrInvalid, j, i)
		}
		for k := 1; k < len(p); k++ {
			if k == j {
				continue
			}
			if s := side(p[j], func(x pt) int { return ringSide(x, p[k]) }); s == inside || s == both {
				return fmt.Errorf("%w: ring %d of polygon %d is a hole inside (or overlapping) hole ring %d", ErrInvalid, j, i, k)
			}
		}
	}
	return nil
}

// Where a ring lies relative to an area.
const (
	unknown = iota // every sample lies on the area's boundary
	inside
	outside
	both
)

// side tells where ring r lies by the sign of at (1 inside, 0 on the
// boundary, -1 outside) at its vertices and the midpoints of its edges.
// Points on the boundary say nothing: rings may touch.
func side(r []pt, at func(pt) int) int {
	var in, out bool
	for i, a := range r {
		samples := []pt{a}
		if i+1 < len(r) {
			b := r[i+1]
			samples = append(samples, pt{(a.x + b.x) / 2, (a.y + b.y) / 2})
		}
		for _, x := range samples {
			switch at(x) {
			case 1:
				in = true
			case -1:
				out = true
			}
		}
	}
	switch {
	case in && out:
		return both
	case in:
		return inside
	case out:
		return outside
	}
	return unknown
}

// areaSide is 1 when x lies strictly inside polygon p (its shell but none
// of its holes), 0 on one of its rings, -1 outside.
func areaSide(x pt, p [][]pt) int {
	s := ringSide(x, p[0])
	for _, h := range p[1:] {
		if s <= 0 {
			break
		}
		switch ringSide(x, h) {
		case 0:
			s = 0
		case 1:
			s = -1
		}
	}
	return s
}
