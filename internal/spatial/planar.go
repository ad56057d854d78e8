package spatial

import (
	"math"

	"github.com/twpayne/go-geom"
)

// The primitives below treat longitude and latitude as plane x and y, as
// PostGIS geometry does. Boundaries count as inside.

// inPolygon reports whether p lies in the polygon or on its boundary.
func inPolygon(p pt, rings [][]pt) bool {
	if len(rings) == 0 {
		return false
	}
	if ringSide(p, rings[0]) < 0 {
		return false
	}
	for _, h := range rings[1:] {
		if ringSide(p, h) > 0 {
			return false
		}
	}
	return true
}

// ringSide is 1 when p is strictly inside the closed ring r, 0 on it, -1
// outside.
func ringSide(p pt, r []pt) int {
	in := false
	for i := 0; i+1 < len(r); i++ {
		a, b := r[i], r[i+1]
		if onSegment(p, a, b) {
			return 0
		}
		if (a.y > p.y) != (b.y > p.y) {
			x := a.x + (p.y-a.y)*(b.x-a.x)/(b.y-a.y)
			if p.x < x {
				in = !in
			}
		}
	}
	if in {
		return 1
	}
	return -1
}

func cross(o, a, b pt) float64 { return (a.x-o.x)*(b.y-o.y) - (a.y-o.y)*(b.x-o.x) }

func onSegment(p, a, b pt) bool {
	if p.x < math.Min(a.x, b.x) || p.x > math.Max(a.x, b.x) || p.y < math.Min(a.y, b.y) || p.y > math.Max(a.y, b.y) {
		return false
	}
	return math.Abs(cross(a, b, p)) <= 1e-12*math.Max(1, math.Abs(b.x-a.x)+math.Abs(b.y-a.y))
}

// clip returns the part of segment ab inside the closed box (Liang-Barsky).
func clip(a, b pt, bx box) (pt, pt, bool) {
	t0, t1 := 0.0, 1.0
	dx, dy := b.x-a.x, b.y-a.y
	for _, e := range [4][2]float64{{-dx, a.x - bx.minX}, {dx, bx.maxX - a.x}, {-dy, a.y - bx.minY}, {dy, bx.maxY - a.y}} {
		p, q := e[0], e[1]
		if p == 0 {
			if q < 0 {
				return pt{}, pt{}, false
			}
			continue
		}
		r := q / p
		if p < 0 {
			t0 = math.Max(t0, r)
		} else {
			t1 = math.Min(t1, r)
		}
		if t0 > t1 {
			return pt{}, pt{}, false
		}
	}
	return pt{a.x + t0*dx, a.y + t0*dy}, pt{a.x + t1*dx, a.y + t1*dy}, true
}

// segCrossesOpenBox reports whether segment ab has a point strictly inside
// the box. The part of ab in the closed box is convex, so it reaches the
// interior exactly when its midpoint does.
func segCrossesOpenBox(a, b pt, bx box) bool {
	p, q, ok := clip(a, b, bx)
	if !ok {
		return false
	}
	m := pt{(p.x + q.x) / 2, (p.y + q.y) / 2}
	return m.x > bx.minX && m.x < bx.maxX && m.y > bx.minY && m.y < bx.maxY
}

// segParams returns the parameters along ab where it meets cd.
func segParams(a, b, c, d pt) []float64 {
	r := pt{b.x - a.x, b.y - a.y}
	q := pt{d.x - c.x, d.y - c.y}
	den := r.x*q.y - r.y*q.x
	ac := pt{c.x - a.x, c.y - a.y}
	if den == 0 {
		// Parallel: where c and d project onto ab, if collinear.
		if cross(a, b, c) != 0 {
			return nil
		}
		rr := r.x*r.x + r.y*r.y
		if rr == 0 {
			return nil
		}
		var out []float64
		for _, p := range []pt{c, d} {
			if t := ((p.x-a.x)*r.x + (p.y-a.y)*r.y) / rr; t > 0 && t < 1 {
				out = append(out, t)
			}
		}
		return out
	}
	t := (ac.x*q.y - ac.y*q.x) / den
	u := (ac.x*r.y - ac.y*r.x) / den
	if t < 0 || t > 1 || u < 0 || u > 1 {
		return nil
	}
	return []float64{t}
}

func polygonStrictlyContains(rings [][]pt, p pt) bool {
	if len(rings) == 0 || ringSide(p, rings[0]) <= 0 {
		return false
	}
	for _, h := range rings[1:] {
		if ringSide(p, h) >= 0 {
			return false
		}
	}
	return true
}

// flatten returns every polyline (points are one-point lines, rings are
// closed lines) and every polygon (as rings) of g.
func flatten(g geom.T) (lines [][]pt, areas [][][]pt, ok bool) {
	toPts := func(flat []float64, stride int) []pt {
		if stride < 2 { // an empty geometry in a collection has no layout
			return nil
		}
		out := make([]pt, 0, len(flat)/stride)
		for i := 0; i+1 < len(flat); i += stride {
			out = append(out, pt{flat[i], flat[i+1]})
		}
		return out
	}
	addPoly := func(p *geom.Polygon) {
		var rings [][]pt
		for j := 0; j < p.NumLinearRings(); j++ {
			r := toPts(p.LinearRing(j).FlatCoords(), p.Stride())
			lines = append(lines, r)
			rings = append(rings, r)
		}
		areas = append(areas, rings)
	}
	switch g := g.(type) {
	case *geom.Point:
		lines = append(lines, toPts(g.FlatCoords(), g.Stride()))
	case *geom.MultiPoint:
		for _, p := range toPts(g.FlatCoords(), g.Stride()) {
			lines = append(lines, []pt{p})
		}
	case *geom.LineString:
		lines = append(lines, toPts(g.FlatCoords(), g.Stride()))
	case *geom.MultiLineString:
		for i := 0; i < g.NumLineStrings(); i++ {
			lines = append(lines, toPts(g.LineString(i).FlatCoords(), g.Stride()))
		}
	case *geom.Polygon:
		addPoly(g)
	case *geom.MultiPolygon:
		for i := 0; i < g.NumPolygons(); i++ {
			addPoly(g.Polygon(i))
		}
	case *geom.GeometryCollection:
		for _, c := range g.Geoms() {
			l, a, ok := flatten(c)
			if !ok {
				return nil, nil, false
			}
			lines, areas = append(lines, l...), append(areas, a...)
		}
	default:
		return nil, nil, false
	}
	for _, l := range lines {
		for _, p := range l {
			if math.IsNaN(p.x) || math.IsNaN(p.y) {
				return nil, nil, false
			}
		}
	}
	return lines, areas, true
}
