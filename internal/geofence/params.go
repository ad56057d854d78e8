package geofence

import (
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/openapi"
)

// Rules are the request limits the HTTP layer enforces.
type Rules struct {
	// Limits are the bounds the API description states too: the largest
	// /within radius, the default and largest page size and the largest
	// containment batch.
	openapi.Limits
	// MaxVertices bounds the vertices of one geofence.
	MaxVertices int
	// MaxBodyBytes bounds request bodies (413 beyond).
	MaxBodyBytes int
	// MaxPageBytes bounds the encoded features of one page of /within or
	// of the fence listing: a page ends early, with its next link, before
	// the feature that would pass it. 0 means no bound.
	MaxPageBytes int
}

const (
	maxPropNames   = 64
	maxPropNameLen = 128
)

// param returns the single value of a query parameter; a parameter given
// more than once is an error, since silently picking one hides mistakes.
func param(v url.Values, name string, errs *apperr.ValidationError) (string, bool) {
	vals, ok := v[name]
	if !ok {
		return "", false
	}
	if len(vals) > 1 {
		errs.Add("Given more than once.", "duplicate", "query", name)
		return "", false
	}
	return vals[0], true
}

// parseNumber parses a finite decimal number. Go float literals that are
// not decimal numbers (0x1p4, 1_000) and surrounding spaces are refused,
// as the OpenAPI document's number type does.
func parseNumber(s string) (float64, string) {
	f, err := strconv.ParseFloat(s, 64)
	switch {
	case s == "":
		return 0, "Input should be a valid number, got an empty string."
	case err != nil && strings.Contains(err.Error(), "range"):
		return 0, "Input should be a finite number."
	case err == nil && (math.IsNaN(f) || math.IsInf(f, 0)):
		return 0, "Input should be a finite number."
	case err != nil || !isDecimal(s):
		return 0, "Input should be a valid number."
	}
	return f, ""
}

// isDecimal reports whether s holds only the characters of a decimal
// number (sign, digits, point, exponent).
func isDecimal(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return !strings.ContainsRune("+-.0123456789eE", r) })
}

// number reads a required finite number in [lo, hi] from the query.
func number(v url.Values, name string, lo, hi float64, errs *apperr.ValidationError) (float64, bool) {
	s, ok := param(v, name, errs)
	if !ok {
		if _, dup := v[name]; !dup {
			errs.Add("Field required.", "missing", "query", name)
		}
		return 0, false
	}
	f, msg := parseNumber(s)
	if msg != "" {
		errs.Add(msg, "float_parsing", "query", name)
		return 0, false
	}
	if f < lo || f > hi {
		errs.Add(fmt.Sprintf("Input should be between %g and %g.", lo, hi), "out_of_range", "query", name)
		return 0, false
	}
	return f, true
}

func radius(v url.Values, r Rules, errs *apperr.ValidationError) (float64, bool) {
	s, ok := param(v, "radius", errs)
	if !ok {
		if _, dup := v["radius"]; !dup {
			errs.Add("Field required.", "missing", "query", "radius")
		}
		return 0, false
	}
	f, msg := parseNumber(s)
	if msg != "" {
		errs.Add(msg, "float_parsing", "query", "radius")
		return 0, false
	}
	if f <= 0 || f > r.MaxRadius {
		errs.Add(fmt.Sprintf("Radius must be greater than 0 and at most %g metres.", r.MaxRadius), "out_of_range", "query", "radius")
		return 0, false
	}
	return f, true
}

// limit reads the optional page size.
func limit(v url.Values, r Rules, errs *apperr.ValidationError) int {
	s, ok := param(v, "limit", errs)
	if !ok {
		return r.DefaultLimit
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		errs.Add("Input should be a valid integer.", "int_parsing", "query", "limit")
		return r.DefaultLimit
	}
	if n < 1 || n > r.MaxLimit {
		errs.Add(fmt.Sprintf("Input should be between 1 and %d.", r.MaxLimit), "out_of_range", "query", "limit")
		return r.DefaultLimit
	}
	return n
}

// props reads the properties parameter: nil for all (absent), empty for
// "none", or the listed names.
func props(v url.Values, errs *apperr.ValidationError) []string {
	s, ok := param(v, "properties", errs)
	if !ok {
		return nil
	}
	if s == "none" {
		return []string{}
	}
	names := strings.Split(s, ",")
	if len(names) > maxPropNames {
		errs.Add(fmt.Sprintf("At most %d property names.", maxPropNames), "too_long", "query", "properties")
		return nil
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		// Taken exactly as given, spaces included: a column may be called
		// " name ". PostgreSQL refuses text that is not UTF-8, so such a name is the
		// client's error, not a database failure.
		if n == "" || len(n) > maxPropNameLen || strings.ContainsRune(n, 0) || !utf8.ValidString(n) {
			errs.Add("A comma-separated list of property names, or none.", "value_error", "query", "properties")
			return nil
		}
		out = append(out, n)
	}
	return out
}

// withinRequest is a parsed GET /within.
type withinRequest struct {
	WithinQuery
	Cursor string
}

// layerID is what a layer id may be (see catalog.LayerID); a well-formed id
// that names no layer is a 404, not a 422.
var layerID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,200}$`)

// layer reads the optional layer parameter.
func layer(v url.Values, errs *apperr.ValidationError) (string, bool) {
	s, ok := param(v, "layer", errs)
	if ok && !layerID.MatchString(s) {
		errs.Add("A layer id is 1 to 200 letters, digits, _ and -: GET /layers lists them.", "string_pattern_mismatch", "query", "layer")
	}
	return s, ok
}

// parseWithin reads every /within parameter and reports every problem at
// once. Unknown parameters are ignored.
func parseWithin(v url.Values, r Rules) (withinRequest, error) {
	errs := &apperr.ValidationError{}
	var q withinRequest
	q.Lng, _ = number(v, "lng", -180, 180, errs)
	q.Lat, _ = number(v, "lat", -90, 90, errs)
	q.Radius, _ = radius(v, r, errs)
	q.Limit = limit(v, r, errs)
	q.MaxBytes = r.MaxPageBytes
	q.Props = props(v, errs)
	q.Layer = "places"
	if s, ok := layer(v, errs); ok {
		q.Layer = s
	}
	q.Cursor, _ = param(v, "cursor", errs)
	return q, errs.Err()
}

// withinScope identifies a /within query for its cursors: the layer and
// the circle, exactly. Limit and properties may change between pages.
func withinScope(q WithinQuery) string {
	return fmt.Sprintf("within|%s|%x|%x|%x", q.Layer, math.Float64bits(q.Lng), math.Float64bits(q.Lat), math.Float64bits(q.Radius))
}

// parseID reads a positive integer path id: digits only, no sign.
func parseID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 || strings.ContainsFunc(s, func(r rune) bool { return r < '0' || r > '9' }) {
		return 0, apperr.InvalidField("Geofence ids are positive integers.", "int_parsing", "path", "id")
	}
	return id, nil
}

// parseContains reads the lng, lat and layer parameters of GET
// /geofences/contains; no layer is the built-in fences ("").
func parseContains(v url.Values) (Point, string, error) {
	errs := &apperr.ValidationError{}
	var p Point
	p.Lng, _ = number(v, "lng", -180, 180, errs)
	p.Lat, _ = number(v, "lat", -90, 90, errs)
	l, _ := layer(v, errs)
	return p, l, errs.Err()
}

// parseLayer reads the layer parameter of POST /geofences/contains.
func parseLayer(v url.Values) (string, error) {
	errs := &apperr.ValidationError{}
	l, _ := layer(v, errs)
	return l, errs.Err()
}

// listRequest is a parsed GET /geofences.
type listRequest struct {
	ListQuery
	Cursor string
}

func parseList(v url.Values, r Rules) (listRequest, error) {
	errs := &apperr.ValidationError{}
	var q listRequest
	q.Limit = limit(v, r, errs)
	q.MaxBytes = r.MaxPageBytes
	if s, ok := param(v, "bbox", errs); ok {
		q.BBox = parseBBox(s, errs)
	}
	q.Cursor, _ = param(v, "cursor", errs)
	return q, errs.Err()
}

// parseBBox reads minLng,minLat,maxLng,maxLat; minLng > maxLng is a box
// across the antimeridian.
func parseBBox(s string, errs *apperr.ValidationError) *BBox {
	parts := strings.Split(s, ",")
	const msg = "Expected minLng,minLat,maxLng,maxLat with lng in [-180, 180], lat in [-90, 90] and minLat <= maxLat."
	if len(parts) != 4 {
		errs.Add(msg, "value_error", "query", "bbox")
		return nil
	}
	var f [4]float64
	for i, p := range parts {
		var m string
		if f[i], m = parseNumber(p); m != "" {
			errs.Add(msg, "value_error", "query", "bbox")
			return nil
		}
	}
	b := BBox{West: f[0], South: f[1], East: f[2], North: f[3]}
	if math.Abs(b.West) > 180 || math.Abs(b.East) > 180 || math.Abs(b.South) > 90 || math.Abs(b.North) > 90 || b.South > b.North {
		errs.Add(msg, "value_error", "query", "bbox")
		return nil
	}
	return &b
}

func listScope(q ListQuery) string {
	if q.BBox == nil {
		return "list"
	}
	b := q.BBox
	return fmt.Sprintf("list|%x|%x|%x|%x", math.Float64bits(b.West), math.Float64bits(b.South), math.Float64bits(b.East), math.Float64bits(b.North))
}
