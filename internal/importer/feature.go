package importer

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/twpayne/go-geom"
	"github.com/twpayne/go-geom/encoding/ewkb"
	"github.com/twpayne/go-geom/encoding/geojson"
)

// srid is the spatial reference of every layer: WGS 84 longitude/latitude.
const srid = 4326

// Position locates a feature in its input. Index counts features from 0
// in input order; Line is the line number for newline-delimited GeoJSON
// and 0 otherwise.
type Position struct {
	Index int
	Line  int
}

func (p Position) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("line %d (feature %d)", p.Line, p.Index)
	}
	return fmt.Sprintf("feature %d", p.Index)
}

// FeatureError is a feature that cannot be loaded, with its position.
type FeatureError struct {
	Position
	Reason string
}

func (e *FeatureError) Error() string { return e.Position.String() + ": " + e.Reason }

// row is one feature ready for COPY.
type row struct {
	name  string
	props []byte // a JSON object
	geom  []byte // EWKB with SRID 4326
}

// converter turns input items into rows for one layer.
type converter struct {
	layer    Layer
	nameProp string
}

// convert fills r from it, or says why the item cannot be loaded.
func (c *converter) convert(it *item, r *row) error {
	if it.err != nil {
		return it.err
	}
	if it.feature == nil {
		return c.convertRecord(it.record, r)
	}
	return c.convertFeature(it.feature, r)
}

// convertRecord loads a flat record: "name" is the name, "lat" and "lng"
// (numbers or numeric strings) the point, every other member a property.
func (c *converter) convertRecord(rec []flatMember, r *row) error {
	if c.layer != Places {
		return fmt.Errorf("a record with lat and lng is a point; layer %s wants polygons", c.layer)
	}
	var lat, lng []byte
	r.name = ""
	p := append(r.props[:0], '{')
	for _, m := range rec {
		switch string(m.key) {
		case "name":
			r.name, _ = scalarText(m.value)
		case "lat":
			lat = m.value
		case "lng":
			lng = m.value
		default:
			if len(p) > 1 {
				p = append(p, ',')
			}
			p = appendKey(p, m.key)
			p = append(p, ':')
			p = append(p, m.value...)
		}
	}
	r.props = append(p, '}')
	if lat == nil || lng == nil || string(lat) == "null" || string(lng) == "null" {
		return errors.New(`record needs "lat" and "lng"`)
	}
	y, err := coord("lat", lat)
	if err != nil {
		return err
	}
	x, err := coord("lng", lng)
	if err != nil {
		return err
	}
	if err := checkLngLat(x, y); err != nil {
		return err
	}
	r.geom = appendPoint(r.geom[:0], x, y)
	return nil
}

// coord reads a coordinate given as a JSON number or a numeric string.
func coord(name string, v []byte) (float64, error) {
	s := string(v)
	if u, ok := unquote(v); ok {
		s = u
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0, fmt.Errorf("%s %s is not a number", name, v)
	}
	return f, nil
}

// appendKey appends key as a JSON string.
func appendKey(dst, key []byte) []byte {
	for _, c := range key {
		if c < 0x20 || c == '"' || c == '\\' {
			return appendString(dst, string(key))
		}
	}
	dst = append(dst, '"')
	dst = append(dst, key...)
	return append(dst, '"')
}

func (c *converter) convertFeature(f *geoFeature, r *row) error {
	if f.Type != "Feature" {
		return fmt.Errorf("type is %q, want \"Feature\"", f.Type)
	}
	props, err := parseProperties(f.Properties)
	if err != nil {
		return err
	}
	name, skip, err := c.name(props, f.ID)
	if err != nil {
		return err
	}
	g, err := decodeGeometry(f.Geometry)
	if err != nil {
		return err
	}
	if r.geom, err = c.encodeGeometry(r.geom[:0], g); err != nil {
		return err
	}
	r.name = name
	p := append(r.props[:0], '{')
	for i, kv := range props {
		if i == skip {
			continue
		}
		if len(p) > 1 {
			p = append(p, ',')
		}
		p = appendString(p, kv.key)
		p = append(p, ':')
		p = append(p, kv.value...)
	}
	r.props = append(p, '}')
	return nil
}

type member struct {
	key   string
	value json.RawMessage
}

// parseProperties returns the members of a properties object in input
// order; null or absent properties are an empty list.
func parseProperties(raw json.RawMessage) ([]member, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, errors.New("properties is not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.Token() // '{', checked above
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, syntaxError(err)
		}
		var m member
		m.key, _ = tok.(string)
		if err := dec.Decode(&m.value); err != nil {
			return nil, syntaxError(err)
		}
		out = append(out, m)
	}
	return out, nil
}

// name picks the feature's name and the index of the member it came from
// (-1 when none). With a name property set, that property must be present;
// otherwise "name", "NAME" or "Name", then the first string property, then
// the feature id, then "".
func (c *converter) name(props []member, id json.RawMessage) (string, int, error) {
	if c.nameProp != "" {
		for i, m := range props {
			if m.key == c.nameProp {
				s, ok := scalarText(m.value)
				if !ok {
					return "", -1, fmt.Errorf("name property %q is not a string or number", c.nameProp)
				}
				return s, i, nil
			}
		}
		return "", -1, fmt.Errorf("no name property %q", c.nameProp)
	}
	for _, key := range []string{"name", "NAME", "Name"} {
		for i, m := range props {
			if m.key == key {
				if s, ok := scalarText(m.value); ok {
					return s, i, nil
				}
			}
		}
	}
	for i, m := range props {
		if len(m.value) > 0 && m.value[0] == '"' {
			s, _ := scalarText(m.value)
			return s, i, nil
		}
	}
	if s, ok := scalarText(id); ok {
		return s, -1, nil
	}
	return "", -1, nil
}

// scalarText returns a JSON string's value or a number's text.
func scalarText(v json.RawMessage) (string, bool) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "", false
	}
	if v[0] == '"' {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", false
		}
		return s, true
	}
	if _, err := strconv.ParseFloat(string(v), 64); err == nil {
		return string(v), true
	}
	return "", false
}

func decodeGeometry(raw json.RawMessage) (geom.T, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, errors.New("feature has no geometry")
	}
	var g geom.T
	if err := geojson.Unmarshal(raw, &g); err != nil {
		return nil, fmt.Errorf("invalid geometry: %v", syntaxError(err))
	}
	if g == nil {
		return nil, errors.New("feature has no geometry")
	}
	return g, nil
}

// encodeGeometry checks g for the layer and appends it as EWKB. Extra
// dimensions (Z, M) are dropped: the layers are two-dimensional.
func (c *converter) encodeGeometry(dst []byte, g geom.T) ([]byte, error) {
	if err := checkCoords(g.FlatCoords(), g.Stride()); err != nil {
		return nil, err
	}
	switch g := g.(type) {
	case *geom.Point:
		if c.layer != Places {
			return nil, fmt.Errorf("geometry is a Point; layer %s wants Polygon or MultiPolygon", c.layer)
		}
		if g.Empty() {
			return nil, errors.New("geometry is an empty Point")
		}
		return appendPoint(dst, g.X(), g.Y()), nil
	case *geom.Polygon:
		if c.layer != Geofences {
			return nil, fmt.Errorf("geometry is a Polygon; layer %s wants Point", c.layer)
		}
		return appendMultiPolygon(dst, g.FlatCoords(), [][]int{g.Ends()}, g.Stride())
	case *geom.MultiPolygon:
		if c.layer != Geofences {
			return nil, fmt.Errorf("geometry is a MultiPolygon; layer %s wants Point", c.layer)
		}
		return appendMultiPolygon(dst, g.FlatCoords(), g.Endss(), g.Stride())
	}
	want := "Point"
	if c.layer == Geofences {
		want = "Polygon or MultiPolygon"
	}
	return nil, fmt.Errorf("geometry type %s is not allowed; layer %s wants %s", strings.TrimPrefix(fmt.Sprintf("%T", g), "*geom."), c.layer, want)
}

func appendMultiPolygon(dst []byte, flat []float64, endss [][]int, stride int) ([]byte, error) {
	if len(endss) == 0 {
		return nil, errors.New("geometry is empty")
	}
	xy := flat
	if stride != 2 {
		xy = make([]float64, 0, len(flat)/stride*2)
		for i := 0; i+1 < len(flat); i += stride {
			xy = append(xy, flat[i], flat[i+1])
		}
	}
	start := 0
	out := make([][]int, len(endss))
	for p, ends := range endss {
		if len(ends) == 0 {
			return nil, fmt.Errorf("polygon %d has no rings", p)
		}
		out[p] = make([]int, len(ends))
		for r, end := range ends {
			n := (end - start) / stride
			if n < 4 {
				return nil, fmt.Errorf("polygon %d ring %d has %d positions; a ring needs at least 4", p, r, n)
			}
			if flat[start] != flat[end-stride] || flat[start+1] != flat[end-stride+1] {
				return nil, fmt.Errorf("polygon %d ring %d is not closed: its first and last positions differ", p, r)
			}
			out[p][r] = end / stride * 2
			start = end
		}
	}
	mp := geom.NewMultiPolygonFlat(geom.XY, xy, out).SetSRID(srid)
	b, err := ewkb.Marshal(mp, binary.LittleEndian)
	if err != nil {
		return nil, fmt.Errorf("invalid geometry: %v", err)
	}
	return append(dst, b...), nil
}

func checkCoords(flat []float64, stride int) error {
	for i := 0; i+1 < len(flat); i += stride {
		if err := checkLngLat(flat[i], flat[i+1]); err != nil {
			return err
		}
	}
	return nil
}

func checkLngLat(lng, lat float64) error {
	switch {
	case math.IsNaN(lng) || math.IsInf(lng, 0) || math.IsNaN(lat) || math.IsInf(lat, 0):
		return errors.New("coordinates must be finite numbers")
	case lng < -180 || lng > 180:
		return fmt.Errorf("longitude %g is outside [-180, 180]", lng)
	case lat < -90 || lat > 90:
		return fmt.Errorf("latitude %g is outside [-90, 90]", lat)
	}
	return nil
}

// appendPoint appends a little-endian EWKB Point with SRID 4326.
func appendPoint(dst []byte, x, y float64) []byte {
	dst = append(dst, 1)                                      // little endian
	dst = binary.LittleEndian.AppendUint32(dst, 1|0x20000000) // Point with SRID
	dst = binary.LittleEndian.AppendUint32(dst, srid)
	dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(x))
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(y))
}

// appendString appends s as a JSON string.
func appendString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s)
	return append(dst, b...)
}
