package cql2

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// geomKind is the type of a geometry literal.
type geomKind int

const (
	gPoint geomKind = iota
	gLineString
	gPolygon
	gMultiPoint
	gMultiLineString
	gMultiPolygon
	gCollection
	gBBox
)

var geomNames = [...]string{"POINT", "LINESTRING", "POLYGON", "MULTIPOINT", "MULTILINESTRING", "MULTIPOLYGON", "GEOMETRYCOLLECTION", "BBOX"}

// The GeoJSON names of the kinds, in the same order.
var geoJSONNames = [...]string{"Point", "LineString", "Polygon", "MultiPoint", "MultiLineString", "MultiPolygon", "GeometryCollection"}

// pos is a position as written: x is the first coordinate, y the second.
// A third (a height) is read and dropped: every S_ function is a 2D test.
type pos [2]float64

// geometry is a geometry literal. Every kind but the collection and the
// box keeps its positions in coords as a list of members (one for a single
// geometry), each a list of lines or rings, each a list of positions:
//
//	POINT            [[[p]]]
//	LINESTRING       [[line]]
//	POLYGON          [[ring, ring...]]
//	MULTIPOINT       [[[p]], [[p]], ...]
//	MULTILINESTRING  [[line], [line], ...]
//	MULTIPOLYGON     [[ring...], [ring...], ...]
type geometry struct {
	kind    geomKind
	coords  [][][]pos
	members []geometry // GEOMETRYCOLLECTION
	box     [4]float64 // BBOX: the first corner, then the second, as written
}

// check holds what PostGIS requires of a geometry before it will read it,
// so that a bad literal is the client's error and not a failed statement.
func (g *geometry) check() string {
	switch {
	case g.kind == gCollection && len(g.members) == 0:
		return "a GEOMETRYCOLLECTION needs at least one geometry"
	case g.kind != gCollection && g.kind != gBBox && len(g.coords) == 0:
		return "a MULTI geometry needs at least one member"
	}
	for _, m := range g.coords {
		if len(m) == 0 {
			return "a polygon needs at least one ring"
		}
	}
	switch g.kind {
	case gLineString, gMultiLineString:
		for _, m := range g.coords {
			if len(m[0]) < 2 {
				return "a line needs at least two positions"
			}
		}
	case gPolygon, gMultiPolygon:
		for _, m := range g.coords {
			for _, ring := range m {
				if len(ring) < 4 {
					return "a polygon ring needs at least four positions"
				}
				if ring[0] != ring[len(ring)-1] {
					return "a polygon ring must end where it starts"
				}
			}
		}
	}
	return ""
}

// writeText writes the literal as cql2-text, positions as written.
func (g *geometry) writeText(b *strings.Builder) {
	if g.kind == gBBox {
		fmt.Fprintf(b, "BBOX(%s, %s, %s, %s)", num(g.box[0]), num(g.box[1]), num(g.box[2]), num(g.box[3]))
		return
	}
	g.writeWKT(b, false)
}

// writeWKT writes the literal as WKT, x and y swapped when swap is set.
// A box must have been turned into a polygon first.
func (g *geometry) writeWKT(b *strings.Builder, swap bool) {
	b.WriteString(geomNames[g.kind])
	b.WriteByte('(')
	switch g.kind {
	case gCollection:
		for i := range g.members {
			if i > 0 {
				b.WriteString(", ")
			}
			g.members[i].writeWKT(b, swap)
		}
	case gPoint, gLineString, gPolygon:
		writeMember(b, g.coords[0], g.kind == gPolygon, swap)
	default:
		for i, m := range g.coords {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('(')
			writeMember(b, m, g.kind == gMultiPolygon, swap)
			b.WriteByte(')')
		}
	}
	b.WriteByte(')')
}

// writeMember writes the lines of one member, each in parentheses when
// they are a polygon's rings.
func writeMember(b *strings.Builder, lines [][]pos, rings, swap bool) {
	for i, line := range lines {
		if i > 0 {
			b.WriteString(", ")
		}
		if rings {
			b.WriteByte('(')
		}
		for j, p := range line {
			if j > 0 {
				b.WriteString(", ")
			}
			x, y := p[0], p[1]
			if swap {
				x, y = y, x
			}
			b.WriteString(num(x) + " " + num(y))
		}
		if rings {
			b.WriteByte(')')
		}
	}
}

func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// sqlWKT returns the literal as WKT for srid, longitude first when swap
// says it was written latitude first; a box becomes one or more
// rectangles (see boxes). The second string is a message for the client
// when the literal cannot be in srid.
func (g *geometry) sqlWKT(srid int, swap, geography bool) (string, string) {
	var b strings.Builder
	if g.kind == gBBox {
		rects, msg := g.boxes(srid, swap, geography)
		if msg != "" {
			return "", msg
		}
		poly := geometry{kind: gPolygon}
		if len(rects) > 1 {
			poly.kind = gMultiPolygon
		}
		for _, r := range rects {
			w, s, e, n := r[0], r[1], r[2], r[3]
			poly.coords = append(poly.coords, [][]pos{{{w, s}, {e, s}, {e, n}, {w, n}, {w, s}}})
		}
		poly.writeWKT(&b, false)
		return b.String(), ""
	}
	if srid == 4326 {
		if msg := g.checkLatitudes(swap); msg != "" {
			return "", msg
		}
	}
	g.writeWKT(&b, swap)
	return b.String(), ""
}

// checkLatitudes says when a position of the literal is beyond a pole.
func (g *geometry) checkLatitudes(swap bool) string {
	for _, m := range g.members {
		if msg := m.checkLatitudes(swap); msg != "" {
			return msg
		}
	}
	for _, m := range g.coords {
		for _, line := range m {
			for _, p := range line {
				lat := p[1]
				if swap {
					lat = p[0]
				}
				if math.Abs(lat) > 90 {
					return fmt.Sprintf("latitude %s is beyond a pole", num(lat))
				}
			}
		}
	}
	return ""
}

// boxes returns the rectangles (west, south, east, north) a BBOX stands
// for. In 4326 a box whose west edge is east of its east edge crosses the
// antimeridian, as OGC API bounding boxes do: two rectangles. For a
// geography column each is cut into slices at most a quarter of the world
// wide: PostGIS tells the inside of a geography polygon from the outside
// by a point beyond its bounds, and a polygon that spans most longitudes
// has none, so it would take points far outside for inside.
func (g *geometry) boxes(srid int, swap, geography bool) ([][4]float64, string) {
	w, s, e, n := g.box[0], g.box[1], g.box[2], g.box[3]
	if swap {
		w, s, e, n = s, w, n, e
	}
	if s > n {
		return nil, "the box's south edge is north of its north edge"
	}
	if srid == 4326 && (math.Abs(s) > 90 || math.Abs(n) > 90) {
		return nil, "the box reaches beyond a pole"
	}
	var rects [][4]float64
	switch {
	case w <= e:
		rects = [][4]float64{{w, s, e, n}}
	case srid == 4326:
		rects = [][4]float64{{w, s, 180, n}, {-180, s, e, n}}
	default:
		return nil, "the box's west edge is east of its east edge"
	}
	quarter := map[int]float64{4326: 90, 3857: 20037508.342789244 / 2}[srid]
	if !geography || quarter == 0 {
		return rects, ""
	}
	var slices [][4]float64
	for _, r := range rects {
		n := max(1, int(math.Ceil((r[2]-r[0])/quarter)))
		step := (r[2] - r[0]) / float64(n)
		for i := range n {
			east := r[0] + float64(i+1)*step
			if i == n-1 {
				east = r[2]
			}
			slices = append(slices, [4]float64{r[0] + float64(i)*step, r[1], east, r[3]})
		}
	}
	return slices, ""
}

// polygonal says the literal is a polygon a client wrote, which PostGIS
// only compares safely once it is valid. A box is valid as it is made.
func (g *geometry) polygonal() bool {
	return g.kind == gPolygon || g.kind == gMultiPolygon
}
