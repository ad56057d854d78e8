package geofence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/geogate/geogate/internal/apperr"
	geom "github.com/twpayne/go-geom"
	"github.com/twpayne/go-geom/encoding/geojson"
	"github.com/twpayne/go-geom/encoding/wkb"
)

const (
	maxNameRunes = 200
	// maxFieldErrors caps a 422 body for a geometry with many faults.
	maxFieldErrors = 20
)

// fenceBody is the request body of POST /geofences and PUT
// /geofences/{id}: a GeoJSON Feature whose properties hold a name.
type fenceBody struct {
	Type       *string          `json:"type"`
	Geometry   *json.RawMessage `json:"geometry"`
	Properties *json.RawMessage `json:"properties"`
}

// parseFence checks a geofence body and returns it ready to store, with
// its decoded geometry. Every problem is a 422 naming where it is.
func parseFence(body []byte, r Rules) (FenceInput, geom.T, error) {
	var fb fenceBody
	if err := decodeJSON(body, &fb, "type", "geometry", "properties"); err != nil {
		return FenceInput{}, nil, err
	}
	errs := &apperr.ValidationError{}
	if fb.Type == nil {
		errs.Add("Field required.", "missing", "body", "type")
	} else if *fb.Type != "Feature" {
		errs.Add(`Must be "Feature".`, "literal_error", "body", "type")
	}
	var in FenceInput
	in.Name, in.Props = parseProperties(fb.Properties, errs)
	g := parseGeometry(fb.Geometry, r, errs)
	if err := errs.Err(); err != nil {
		return FenceInput{}, nil, err
	}
	b, err := wkb.Marshal(g, wkb.NDR)
	if err != nil {
		return FenceInput{}, nil, apperr.InvalidField("Geometry cannot be encoded.", "value_error", "body", "geometry")
	}
	in.WKB = b
	return in, g, nil
}

// decodeJSON unmarshals a whole body into the struct v, whose JSON fields
// are named, describing malformed JSON without echoing it.
func decodeJSON(body []byte, v any, fields ...string) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return apperr.InvalidField("Body required: a JSON document.", "missing", "body")
	}
	err := json.Unmarshal(exactMembers(body, fields...), v)
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return apperr.InvalidField(fmt.Sprintf("Malformed JSON at byte %d.", se.Offset), "json_invalid", "body")
	case errors.As(err, &te) && te.Field == "":
		return apperr.InvalidField("Body must be a JSON object.", "model_type", "body")
	case errors.As(err, &te):
		loc := []any{"body"}
		for _, f := range strings.Split(te.Field, ".") {
			loc = append(loc, f)
		}
		return apperr.InvalidField("Wrong JSON type.", "type_error", loc...)
	}
	return apperr.InvalidField("Malformed JSON.", "json_invalid", "body")
}

// exactMembers returns the JSON object b without the members whose names
// differ from one of names only in letter case (the name encoding/json
// would otherwise match whatever its case), so that "Type" or "POINTS" is
// an unknown member, as in JSON and the OpenAPI document. Anything but an
// object, or an object without such members, is returned as it is.
func exactMembers(b []byte, names ...string) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil || m == nil {
		return b
	}
	dropped := false
	for k := range m {
		if !slices.Contains(names, k) && slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(k, n) }) {
			delete(m, k)
			dropped = true
		}
	}
	if !dropped {
		return b
	}
	out, err := json.Marshal(m)
	if err != nil {
		return b
	}
	return out
}

// parseProperties returns the fence name and the other properties as a
// JSON object.
func parseProperties(raw *json.RawMessage, errs *apperr.ValidationError) (string, []byte) {
	if raw == nil || string(*raw) == "null" {
		errs.Add("Field required: an object with at least a name.", "missing", "body", "properties")
		return "", nil
	}
	dec := json.NewDecoder(bytes.NewReader(*raw))
	dec.UseNumber()
	var props map[string]any
	if err := dec.Decode(&props); err != nil {
		errs.Add("Must be a JSON object.", "model_type", "body", "properties")
		return "", nil
	}
	sent, ok := props["name"].(string)
	name := strings.TrimSpace(sent)
	switch {
	case !ok:
		errs.Add("Field required: a string.", "missing", "body", "properties", "name")
	case name == "" || utf8.RuneCountInString(sent) > maxNameRunes:
		// The length is the name as sent, as the document's maxLength
		// counts it; the stored name is trimmed.
		errs.Add(fmt.Sprintf("Must be 1 to %d characters.", maxNameRunes), "string_length", "body", "properties", "name")
	case strings.ContainsRune(name, 0):
		errs.Add("Must not contain NUL characters.", "value_error", "body", "properties", "name")
	}
	delete(props, "name")
	if msg := storable(props); msg != "" {
		errs.Add(msg, "value_error", "body", "properties")
	}
	out, err := json.Marshal(props)
	if err != nil {
		errs.Add("Cannot be stored.", "value_error", "body", "properties")
	}
	return name, out
}

// storable reports why a decoded JSON value cannot go into jsonb (NUL
// characters, numbers beyond float64), or "".
func storable(v any) string {
	switch v := v.(type) {
	case string:
		if strings.ContainsRune(v, 0) {
			return "Strings must not contain NUL characters."
		}
	case json.Number:
		if f, err := strconv.ParseFloat(string(v), 64); err != nil || math.IsInf(f, 0) {
			return "Numbers must be finite 64-bit floating point values."
		}
	case []any:
		for _, e := range v {
			if m := storable(e); m != "" {
				return m
			}
		}
	case map[string]any:
		for k, e := range v {
			if m := storable(k); m != "" {
				return m
			}
			if m := storable(e); m != "" {
				return m
			}
		}
	}
	return ""
}

// parseGeometry decodes a Polygon or MultiPolygon with go-geom and checks
// what PostGIS would otherwise reject or silently accept: ring closure,
// ring size, coordinate ranges and the vertex limit. Validity in the
// plane (self-intersections and so on) is left to PostGIS.
func parseGeometry(raw *json.RawMessage, r Rules, errs *apperr.ValidationError) geom.T {
	loc := []any{"body", "geometry"}
	if raw == nil || string(*raw) == "null" {
		errs.Add("Field required: a GeoJSON Polygon or MultiPolygon.", "missing", loc...)
		return nil
	}
	var gj geojson.Geometry
	if err := json.Unmarshal(exactMembers(*raw, "type", "coordinates"), &gj); err != nil {
		errs.Add("Must be a GeoJSON geometry object.", "model_type", loc...)
		return nil
	}
	if gj.Type != "Polygon" && gj.Type != "MultiPolygon" {
		errs.Add("Geometry type must be Polygon or MultiPolygon.", "literal_error", "body", "geometry", "type")
		return nil
	}
	cloc := append(loc, "coordinates")
	if gj.Coordinates == nil || string(*gj.Coordinates) == "null" {
		errs.Add("Field required.", "missing", cloc...)
		return nil
	}
	g, err := gj.Decode()
	if err != nil || g == nil {
		errs.Add(fmt.Sprintf("Must be nested arrays of [lng, lat] positions, as a GeoJSON %s.", gj.Type), "value_error", cloc...)
		return nil
	}
	if l := g.Layout(); l != geom.XY && l != geom.XYZ {
		errs.Add("Positions must be [lng, lat] or [lng, lat, altitude].", "value_error", cloc...)
		return nil
	}
	if n := len(g.FlatCoords()) / g.Stride(); n > r.MaxVertices {
		errs.Add(fmt.Sprintf("Too many vertices: %d, at most %d.", n, r.MaxVertices), "too_long", cloc...)
		return nil
	}
	before := len(errs.Fields)
	switch g := g.(type) {
	case *geom.Polygon:
		checkPolygon(g, cloc, errs)
	case *geom.MultiPolygon:
		if g.NumPolygons() == 0 {
			errs.Add("At least one polygon.", "too_short", cloc...)
		}
		for i := range g.NumPolygons() {
			checkPolygon(g.Polygon(i), appendLoc(cloc, i), errs)
		}
	}
	if len(errs.Fields) > before+maxFieldErrors {
		errs.Fields = errs.Fields[:before+maxFieldErrors]
	}
	return g
}

func checkPolygon(p *geom.Polygon, loc []any, errs *apperr.ValidationError) {
	if p.NumLinearRings() == 0 {
		errs.Add("A polygon needs at least an outer ring.", "too_short", loc...)
		return
	}
	for i := range p.NumLinearRings() {
		checkRing(p.LinearRing(i).Coords(), appendLoc(loc, i), errs)
	}
}

func checkRing(cs []geom.Coord, loc []any, errs *apperr.ValidationError) {
	if len(cs) < 4 {
		errs.Add(fmt.Sprintf("A ring needs at least 4 positions (the last repeating the first), got %d.", len(cs)), "too_short", loc...)
		return
	}
	for j, c := range cs {
		if math.IsNaN(c[0]) || math.IsNaN(c[1]) || c[0] < -180 || c[0] > 180 || c[1] < -90 || c[1] > 90 {
			errs.Add("Longitude must be in [-180, 180] and latitude in [-90, 90].", "out_of_range", appendLoc(loc, j)...)
			return
		}
	}
	first, last := cs[0], cs[len(cs)-1]
	if first[0] != last[0] || first[1] != last[1] {
		errs.Add("Ring is not closed: the last position must repeat the first.", "value_error", loc...)
		return
	}
	for j := 1; j < len(cs); j++ {
		if antipodal(cs[j-1], cs[j]) {
			errs.Add("An edge joins two antipodal points, so its path on the globe is undefined; add a vertex between them.", "value_error", appendLoc(loc, j)...)
			return
		}
	}
}

// antipodal reports whether a and b are (within PostGIS's tolerance)
// opposite points on the globe: the geography index cannot take such an
// edge.
func antipodal(a, b geom.Coord) bool {
	rad := math.Pi / 180
	unit := func(c geom.Coord) [3]float64 {
		sinLat, cosLat := math.Sincos(c[1] * rad)
		sinLng, cosLng := math.Sincos(c[0] * rad)
		return [3]float64{cosLat * cosLng, cosLat * sinLng, sinLat}
	}
	p, q := unit(a), unit(b)
	cross := math.Sqrt(sq(p[1]*q[2]-p[2]*q[1]) + sq(p[2]*q[0]-p[0]*q[2]) + sq(p[0]*q[1]-p[1]*q[0]))
	dot := p[0]*q[0] + p[1]*q[1] + p[2]*q[2]
	return math.Pi-math.Atan2(cross, dot) < 1e-9
}

func sq(f float64) float64 { return f * f }

func appendLoc(loc []any, i int) []any {
	out := make([]any, len(loc), len(loc)+1)
	copy(out, loc)
	return append(out, i)
}

// batchBody is the request body of POST /geofences/contains.
type batchBody struct {
	Points *[]json.RawMessage `json:"points"`
}

// parseBatch reads {"points": [[lng, lat], ...]}.
func parseBatch(body []byte, r Rules) ([]Point, error) {
	var bb batchBody
	if err := decodeJSON(body, &bb, "points"); err != nil {
		return nil, err
	}
	if bb.Points == nil {
		return nil, apperr.InvalidField("Field required: an array of [lng, lat] pairs.", "missing", "body", "points")
	}
	if n := len(*bb.Points); n > r.MaxBatchPoints {
		return nil, apperr.InvalidField(fmt.Sprintf("Too many points: %d, at most %d.", n, r.MaxBatchPoints), "too_long", "body", "points")
	}
	errs := &apperr.ValidationError{}
	pts := make([]Point, 0, len(*bb.Points))
	for i, raw := range *bb.Points {
		var c []float64
		err := json.Unmarshal(raw, &c)
		switch {
		case err != nil || len(c) != 2:
			errs.Add("Must be a [lng, lat] pair of numbers.", "value_error", "body", "points", i)
		case c[0] < -180 || c[0] > 180 || c[1] < -90 || c[1] > 90:
			errs.Add("Longitude must be in [-180, 180] and latitude in [-90, 90].", "out_of_range", "body", "points", i)
		}
		if len(errs.Fields) >= maxFieldErrors {
			break
		}
		if len(c) == 2 {
			pts = append(pts, Point{Lng: c[0], Lat: c[1]})
		}
	}
	return pts, errs.Err()
}
