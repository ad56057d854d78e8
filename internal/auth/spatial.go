package auth

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/twpayne/go-geom"
	"github.com/twpayne/go-geom/encoding/geojson"
	"github.com/twpayne/go-geom/encoding/wkb"
)

// MaxScopeVertices bounds the size of a polygon spatial scope, so that every
// check against it stays cheap.
const MaxScopeVertices = 1000

// minEarthRadius is the smallest radius of curvature of the WGS84 ellipsoid
// (the meridional radius at the equator), shaved a little further. Turning
// metres into angles with it over-estimates every angle, so a circle is never
// judged inside a scope when on the ellipsoid it is not.
const minEarthRadius = 6_335_000.0

// SpatialScope is the part of the world a caller may query: a longitude /
// latitude box (which may cross the antimeridian when minLng > maxLng) or a
// polygon or multipolygon in WGS84. Edges are straight lines in longitude
// and latitude, as in PostGIS geometry(…, 4326).
//
// A nil *SpatialScope is the whole world: every check on it succeeds.
type SpatialScope struct {
	boxes []box    // a box scope, split at the antimeridian; nil for polygons
	polys [][][]pt // a polygon scope: polygons of closed rings, outer ring first
	bound box      // bounds of polys
	mp    *geom.MultiPolygon
	raw   json.RawMessage // the canonical JSON form: [minLng,minLat,maxLng,maxLat] or a GeoJSON geometry
	wkb   []byte
	hash  string
}

type pt struct{ x, y float64 }

type box struct{ minX, minY, maxX, maxY float64 }

func (b box) valid() bool { return b.minX <= b.maxX && b.minY <= b.maxY }

func (b box) within(o box) bool {
	return b.minX >= o.minX && b.maxX <= o.maxX && b.minY >= o.minY && b.maxY <= o.maxY
}

func (b box) overlaps(o box) bool {
	return b.minX <= o.maxX && o.minX <= b.maxX && b.minY <= o.maxY && o.minY <= b.maxY
}

// ErrBadScope is returned for a spatial scope that cannot be used.
var ErrBadScope = errors.New("spatial scope must be [minLng,minLat,maxLng,maxLat] or a GeoJSON Polygon or MultiPolygon in WGS84")

// NewBBoxScope returns the scope of a longitude/latitude box. minLng may
// exceed maxLng for a box that crosses the antimeridian.
func NewBBoxScope(minLng, minLat, maxLng, maxLat float64) (*SpatialScope, error) {
	for _, v := range []float64{minLng, minLat, maxLng, maxLat} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, ErrBadScope
		}
	}
	if minLng < -180 || maxLng > 180 || minLng > 180 || maxLng < -180 || minLat < -90 || maxLat > 90 || minLat >= maxLat || minLng == maxLng {
		return nil, fmt.Errorf("%w: longitudes within [-180,180], latitudes within [-90,90], min below max", ErrBadScope)
	}
	s := &SpatialScope{}
	if minLng < maxLng {
		s.boxes = []box{{minLng, minLat, maxLng, maxLat}}
	} else {
		s.boxes = []box{{minLng, minLat, 180, maxLat}, {-180, minLat, maxLng, maxLat}}
	}
	mp := geom.NewMultiPolygon(geom.XY)
	for _, b := range s.boxes {
		p := geom.NewPolygon(geom.XY).MustSetCoords([][]geom.Coord{{
			{b.minX, b.minY}, {b.maxX, b.minY}, {b.maxX, b.maxY}, {b.minX, b.maxY}, {b.minX, b.minY},
		}})
		_ = mp.Push(p)
	}
	raw, _ := json.Marshal([]float64{minLng, minLat, maxLng, maxLat})
	return s.finish(mp, raw)
}

// NewGeometryScope returns the scope of a Polygon or MultiPolygon.
func NewGeometryScope(g geom.T) (*SpatialScope, error) {
	var mp *geom.MultiPolygon
	switch g := g.(type) {
	case *geom.Polygon:
		mp = geom.NewMultiPolygon(geom.XY)
		if err := mp.Push(toXYPolygon(g)); err != nil {
			return nil, ErrBadScope
		}
	case *geom.MultiPolygon:
		mp = geom.NewMultiPolygon(geom.XY)
		for i := 0; i < g.NumPolygons(); i++ {
			if err := mp.Push(toXYPolygon(g.Polygon(i))); err != nil {
				return nil, ErrBadScope
			}
		}
	default:
		return nil, ErrBadScope
	}
	if mp.NumPolygons() == 0 {
		return nil, fmt.Errorf("%w: it is empty", ErrBadScope)
	}
	if n := len(mp.FlatCoords()) / 2; n > MaxScopeVertices {
		return nil, fmt.Errorf("%w: at most %d vertices, got %d", ErrBadScope, MaxScopeVertices, n)
	}
	s := &SpatialScope{bound: box{math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)}}
	for i := 0; i < mp.NumPolygons(); i++ {
		p := mp.Polygon(i)
		var rings [][]pt
		for j := 0; j < p.NumLinearRings(); j++ {
			r, err := ringPoints(p.LinearRing(j).FlatCoords())
			if err != nil {
				return nil, err
			}
			for _, q := range r {
				s.bound.minX, s.bound.maxX = math.Min(s.bound.minX, q.x), math.Max(s.bound.maxX, q.x)
				s.bound.minY, s.bound.maxY = math.Min(s.bound.minY, q.y), math.Max(s.bound.maxY, q.y)
			}
			rings = append(rings, r)
		}
		s.polys = append(s.polys, rings)
	}
	raw, err := geojson.Marshal(mp)
	if err != nil {
		return nil, ErrBadScope
	}
	return s.finish(mp, raw)
}

func toXYPolygon(p *geom.Polygon) *geom.Polygon {
	if p.Layout() == geom.XY {
		return p
	}
	var rings [][]geom.Coord
	for j := 0; j < p.NumLinearRings(); j++ {
		r := p.LinearRing(j)
		cs := make([]geom.Coord, r.NumCoords())
		for k := range cs {
			c := r.Coord(k)
			cs[k] = geom.Coord{c.X(), c.Y()}
		}
		rings = append(rings, cs)
	}
	return geom.NewPolygon(geom.XY).MustSetCoords(rings)
}

func ringPoints(flat []float64) ([]pt, error) {
	n := len(flat) / 2
	if n < 4 {
		return nil, fmt.Errorf("%w: a ring needs at least 4 positions", ErrBadScope)
	}
	r := make([]pt, n)
	for i := range r {
		x, y := flat[2*i], flat[2*i+1]
		if math.IsNaN(x) || math.IsNaN(y) || x < -180 || x > 180 || y < -90 || y > 90 {
			return nil, fmt.Errorf("%w: positions must be [lng,lat] within [-180,180] and [-90,90]", ErrBadScope)
		}
		r[i] = pt{x, y}
	}
	if r[0] != r[n-1] {
		return nil, fmt.Errorf("%w: rings must be closed", ErrBadScope)
	}
	return r, nil
}

func (s *SpatialScope) finish(mp *geom.MultiPolygon, raw []byte) (*SpatialScope, error) {
	b, err := wkb.Marshal(mp, binary.LittleEndian)
	if err != nil {
		return nil, ErrBadScope
	}
	mp.SetSRID(4326)
	sum := sha256.Sum256(b)
	s.mp, s.raw, s.wkb, s.hash = mp, raw, b, hex.EncodeToString(sum[:16])
	return s, nil
}

// ParseSpatialScope parses a scope from JSON: null (the whole world, nil),
// an array [minLng,minLat,maxLng,maxLat], or a GeoJSON Polygon or
// MultiPolygon geometry (or a Feature holding one).
func ParseSpatialScope(data []byte) (*SpatialScope, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || bytes.Equal(data, []byte("null")) {
		return nil, nil
	}
	if data[0] == '[' {
		var bb []float64
		if err := json.Unmarshal(data, &bb); err != nil || len(bb) != 4 {
			return nil, ErrBadScope
		}
		return NewBBoxScope(bb[0], bb[1], bb[2], bb[3])
	}
	// A Feature stands for its geometry (files exported by GIS tools).
	var f struct {
		Type     string          `json:"type"`
		Geometry json.RawMessage `json:"geometry"`
	}
	if json.Unmarshal(data, &f) == nil && f.Type == "Feature" {
		data = f.Geometry
	}
	var g geom.T
	if err := geojson.Unmarshal(data, &g); err != nil {
		return nil, ErrBadScope
	}
	return NewGeometryScope(g)
}

// MarshalJSON returns the scope's canonical JSON: the bbox array it was
// made from, or a GeoJSON MultiPolygon.
func (s *SpatialScope) MarshalJSON() ([]byte, error) {
	if s == nil {
		return []byte("null"), nil
	}
	return s.raw, nil
}

// UnmarshalJSON parses what MarshalJSON returns (see ParseSpatialScope).
func (s *SpatialScope) UnmarshalJSON(data []byte) error {
	p, err := ParseSpatialScope(data)
	if err != nil {
		return err
	}
	if p == nil {
		*s = SpatialScope{}
		return nil
	}
	*s = *p
	return nil
}

// String returns the canonical JSON form, for logs and listings.
func (s *SpatialScope) String() string {
	if s == nil {
		return "world"
	}
	return string(s.raw)
}

// WKB returns the scope as a little-endian WKB MultiPolygon (SRID 4326 is
// implied: wrap it in ST_SetSRID(ST_GeomFromWKB($1), 4326) in SQL). It is nil
// for the whole world.
func (s *SpatialScope) WKB() []byte {
	if s == nil {
		return nil
	}
	return s.wkb
}

// Geometry returns the scope as a MultiPolygon with SRID 4326, or nil for
// the whole world. Callers must not modify it.
func (s *SpatialScope) Geometry() *geom.MultiPolygon {
	if s == nil {
		return nil
	}
	return s.mp
}

// Hash returns a short stable hex string that identifies the scope's shape,
// for cache keys; "world" for the whole world.
func (s *SpatialScope) Hash() string {
	if s == nil {
		return "world"
	}
	return s.hash
}

// ContainsCircle reports whether the whole circle of radius metres around
// (lng, lat) lies inside the scope. The circle is replaced by its bounding
// box in longitude and latitude, computed on a sphere smaller than the
// Earth so that it is never smaller than the true geodesic circle; circles
// over a pole span every longitude, and circles crossing the antimeridian
// are split there. For a box scope this is exact up to that margin; for a
// polygon it refuses a few circles that fit only into concave corners.
// Invalid input (NaN, out-of-range coordinates, negative radius) is never
// contained.
func (s *SpatialScope) ContainsCircle(lng, lat, radiusMeters float64) bool {
	parts, ok := circleBoxes(lng, lat, radiusMeters)
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
func (s *SpatialScope) ContainsBBox(minLng, minLat, maxLng, maxLat float64) bool {
	parts, ok := bboxParts(minLng, minLat, maxLng, maxLat)
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

// IntersectsBBox reports whether the box and the scope share any point.
// With ContainsBBox it sorts a tile into wholly inside, straddling, or
// wholly outside. An invalid box intersects nothing.
func (s *SpatialScope) IntersectsBBox(minLng, minLat, maxLng, maxLat float64) bool {
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

func (s *SpatialScope) containsBox(b box) bool {
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

func (s *SpatialScope) intersectsBox(b box) bool {
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
func (s *SpatialScope) pointIn(p pt) bool {
	for _, rings := range s.polys {
		if inPolygon(p, rings) {
			return true
		}
	}
	return false
}

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

// ContainsGeometry reports whether all of g lies inside the scope (touching
// its boundary is allowed). Edges are straight in longitude and latitude,
// as in PostGIS geometry. Empty or unsupported geometries are not
// contained.
func (s *SpatialScope) ContainsGeometry(g geom.T) bool {
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
func (s *SpatialScope) pathIn(l []pt) bool {
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
