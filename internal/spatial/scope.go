package spatial

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/twpayne/go-geom"
	"github.com/twpayne/go-geom/encoding/geojson"
	"github.com/twpayne/go-geom/encoding/wkb"
)

// MaxVertices bounds the size of a polygon spatial scope, so that every
// check against it stays cheap.
const MaxVertices = 1000

// minEarthRadius is the smallest radius of curvature of the WGS84 ellipsoid
// (the meridional radius at the equator), shaved a little further. Turning
// metres into angles with it over-estimates every angle, so a circle is never
// judged inside a scope when on the ellipsoid it is not.
const minEarthRadius = 6_335_000.0

// Scope is the part of the world a caller may query: a longitude /
// latitude box (which may cross the antimeridian when minLng > maxLng) or a
// polygon or multipolygon in WGS84. Edges are straight lines in longitude
// and latitude, as in PostGIS geometry(…, 4326).
//
// A nil *Scope is the whole world: every check on it succeeds.
type Scope struct {
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

// ErrInvalid is returned for a spatial scope that cannot be used.
var ErrInvalid = errors.New("spatial scope must be [minLng,minLat,maxLng,maxLat] or a GeoJSON Polygon or MultiPolygon in WGS84")

// NewBBox returns the scope of a longitude/latitude box. minLng may
// exceed maxLng for a box that crosses the antimeridian.
func NewBBox(minLng, minLat, maxLng, maxLat float64) (*Scope, error) {
	for _, v := range []float64{minLng, minLat, maxLng, maxLat} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, ErrInvalid
		}
	}
	if minLng < -180 || maxLng > 180 || minLng > 180 || maxLng < -180 || minLat < -90 || maxLat > 90 || minLat >= maxLat || minLng == maxLng {
		return nil, fmt.Errorf("%w: longitudes within [-180,180], latitudes within [-90,90], min below max", ErrInvalid)
	}
	s := &Scope{}
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

// NewGeometry returns the scope of a Polygon or MultiPolygon.
func NewGeometry(g geom.T) (*Scope, error) {
	var polys []*geom.Polygon
	switch g := g.(type) {
	case *geom.Polygon:
		polys = append(polys, g)
	case *geom.MultiPolygon:
		for i := 0; i < g.NumPolygons(); i++ {
			polys = append(polys, g.Polygon(i))
		}
	default:
		return nil, ErrInvalid
	}
	mp := geom.NewMultiPolygon(geom.XY)
	for _, p := range polys {
		// An empty member (PostGIS's MULTIPOLYGON(..., EMPTY)) is valid
		// and covers nothing, so it is dropped rather than refused.
		if p.NumLinearRings() == 0 {
			continue
		}
		if err := mp.Push(toXYPolygon(p)); err != nil {
			return nil, ErrInvalid
		}
	}
	if mp.NumPolygons() == 0 {
		return nil, fmt.Errorf("%w: it is empty", ErrInvalid)
	}
	if n := len(mp.FlatCoords()) / 2; n > MaxVertices {
		return nil, fmt.Errorf("%w: at most %d vertices, got %d", ErrInvalid, MaxVertices, n)
	}
	s := &Scope{bound: box{math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)}}
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
	if err := checkSimple(s.polys); err != nil {
		return nil, err
	}
	raw, err := geojson.Marshal(mp)
	if err != nil {
		return nil, ErrInvalid
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
		return nil, fmt.Errorf("%w: a ring needs at least 4 positions", ErrInvalid)
	}
	r := make([]pt, n)
	for i := range r {
		x, y := flat[2*i], flat[2*i+1]
		if math.IsNaN(x) || math.IsNaN(y) || x < -180 || x > 180 || y < -90 || y > 90 {
			return nil, fmt.Errorf("%w: positions must be [lng,lat] within [-180,180] and [-90,90]", ErrInvalid)
		}
		r[i] = pt{x, y}
	}
	if r[0] != r[n-1] {
		return nil, fmt.Errorf("%w: rings must be closed", ErrInvalid)
	}
	return r, nil
}

func (s *Scope) finish(mp *geom.MultiPolygon, raw []byte) (*Scope, error) {
	b, err := wkb.Marshal(mp, binary.LittleEndian)
	if err != nil {
		return nil, ErrInvalid
	}
	mp.SetSRID(4326)
	sum := sha256.Sum256(b)
	s.mp, s.raw, s.wkb, s.hash = mp, raw, b, hex.EncodeToString(sum[:16])
	return s, nil
}

// Parse parses a scope from JSON: null (the whole world, nil),
// an array [minLng,minLat,maxLng,maxLat], or a GeoJSON Polygon or
// MultiPolygon geometry (or a Feature holding one).
func Parse(data []byte) (*Scope, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || bytes.Equal(data, []byte("null")) {
		return nil, nil
	}
	if data[0] == '[' {
		var bb []float64
		if err := json.Unmarshal(data, &bb); err != nil || len(bb) != 4 {
			return nil, ErrInvalid
		}
		return NewBBox(bb[0], bb[1], bb[2], bb[3])
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
		return nil, ErrInvalid
	}
	return NewGeometry(g)
}

// MarshalJSON returns the scope's canonical JSON: the bbox array it was
// made from, or a GeoJSON MultiPolygon.
func (s *Scope) MarshalJSON() ([]byte, error) {
	if s == nil {
		return []byte("null"), nil
	}
	return s.raw, nil
}

// UnmarshalJSON parses what MarshalJSON returns (see Parse).
func (s *Scope) UnmarshalJSON(data []byte) error {
	p, err := Parse(data)
	if err != nil {
		return err
	}
	if p == nil {
		*s = Scope{}
		return nil
	}
	*s = *p
	return nil
}

// String returns the canonical JSON form, for logs and listings.
func (s *Scope) String() string {
	if s == nil {
		return "world"
	}
	return string(s.raw)
}

// WKB returns the scope as a little-endian WKB MultiPolygon (SRID 4326 is
// implied: wrap it in ST_SetSRID(ST_GeomFromWKB($1), 4326) in SQL). It is nil
// for the whole world.
func (s *Scope) WKB() []byte {
	if s == nil {
		return nil
	}
	return s.wkb
}

// Geometry returns the scope as a MultiPolygon with SRID 4326, or nil for
// the whole world. Callers must not modify it.
func (s *Scope) Geometry() *geom.MultiPolygon {
	if s == nil {
		return nil
	}
	return s.mp
}

// Hash returns a short stable hex string that identifies the scope's shape,
// for cache keys; "world" for the whole world.
func (s *Scope) Hash() string {
	if s == nil {
		return "world"
	}
	return s.hash
}

// Clip is the part of box b (west, south, east, north) within the box
// around the scope, so that a scoped caller learns nothing of where a
// layer extends beyond its reach; the scope's box when none of b is in
// it. A nil scope is the whole world: b as it is.
func (s *Scope) Clip(b [4]float64) [4]float64 {
	if s == nil {
		return b
	}
	c := s.Bounds()
	out := [4]float64{max(b[0], c[0]), max(b[1], c[1]), min(b[2], c[2]), min(b[3], c[3])}
	if out[0] > out[2] || out[1] > out[3] {
		return c
	}
	return out
}

// Bounds is the box around the scope, west, south, east, north; a box
// crossing the antimeridian is bounded by the whole width.
func (s *Scope) Bounds() [4]float64 {
	b := s.mp.Bounds()
	return [4]float64{b.Min(0), b.Min(1), b.Max(0), b.Max(1)}
}
