package features

import (
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/geogate/geogate/internal/apperr"
)

// itemsParams are the query parameters /items takes; any other is a 400,
// as OGC API – Features asks, so that a misspelt filter never silently
// selects everything.
var itemsParams = []string{"f", "bbox", "bbox-crs", "crs", "limit", "datetime", "properties", "sortby",
	"filter", "filter-lang", "filter-crs", "cursor"}

// itemParams are those a single feature takes.
var itemParams = []string{"f", "crs", "properties"}

func bad(format string, args ...any) error { return apperr.Errorf(apperr.BadRequest, format, args...) }

// checkParams refuses parameters outside allowed and repeated ones.
func checkParams(v url.Values, allowed []string) error {
	for name, vals := range v {
		if !slices.Contains(allowed, name) {
			return bad("Unknown query parameter %q; this route takes %s.", name, strings.Join(allowed, ", "))
		}
		if len(vals) > 1 {
			return bad("Query parameter %q is given %d times; give it once.", name, len(vals))
		}
	}
	return nil
}

// checkFormat accepts f=json (and geojson), the only encodings served.
func checkFormat(v url.Values) error {
	switch f := v.Get("f"); f {
	case "", "json", "geojson":
		return nil
	default:
		return bad("f: %q is not served; use f=json.", f)
	}
}

func parseLimit(v string, def, max int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, bad("limit: %q must be a whole number from 1 to %d.", v, max)
	}
	return n, nil
}

// parseBBox reads bbox in crs: four numbers (or six, whose heights are
// ignored), lower corner first, in the CRS's axis order. A
// longitude/latitude box may cross the antimeridian (west > east).
func parseBBox(v string, c CRS) (*bbox, error) {
	parts := strings.Split(v, ",")
	if len(parts) != 4 && len(parts) != 6 {
		return nil, bad("bbox: %q must be four comma-separated numbers: minx,miny,maxx,maxy.", v)
	}
	nums := make([]float64, len(parts))
	for i, p := range parts {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, bad("bbox: %q is not a finite number.", p)
		}
		nums[i] = f
	}
	if len(nums) == 6 {
		nums = []float64{nums[0], nums[1], nums[3], nums[4]}
	}
	if c.LatFirst {
		nums = []float64{nums[1], nums[0], nums[3], nums[2]}
	}
	b := &bbox{w: nums[0], s: nums[1], e: nums[2], n: nums[3], srid: c.SRID}
	switch {
	case b.s > b.n:
		return nil, bad("bbox: the lower corner must not lie above the upper one.")
	case c.SRID == 3857:
		return mercatorToLonLat(b)
	case c.SRID == 4326:
		if b.w < -180 || b.e > 180 || b.w > 180 || b.e < -180 || b.s < -90 || b.n > 90 {
			return nil, bad("bbox: longitudes must lie within [-180, 180] and latitudes within [-90, 90].")
		}
	case b.w > b.e:
		return nil, bad("bbox: the lower corner must lie left of the upper one.")
	}
	return b, nil
}

// mercatorLimit is Web Mercator's half width in metres.
const mercatorLimit = 20037508.342789244

// mercatorToLonLat turns a Web Mercator box into the longitude/latitude
// box it covers: its edges are meridians and parallels in both.
func mercatorToLonLat(b *bbox) (*bbox, error) {
	if b.w > b.e {
		return nil, bad("bbox: the lower corner must lie left of the upper one.")
	}
	clamp := func(x float64) float64 { return max(-mercatorLimit, min(mercatorLimit, x)) }
	lon := func(x float64) float64 { return clamp(x) / mercatorLimit * 180 }
	lat := func(y float64) float64 {
		return math.Atan(math.Sinh(clamp(y)/mercatorLimit*math.Pi)) * 180 / math.Pi
	}
	return &bbox{w: lon(b.w), s: lat(b.s), e: lon(b.e), n: lat(b.n), srid: 4326}, nil
}

// parseDatetime reads an RFC 3339 instant, a date, or an interval of two
// with ".." (or nothing) for an open end.
func parseDatetime(v string) (*interval, error) {
	start, end, isInterval := strings.Cut(v, "/")
	parse := func(s string) (*time.Time, error) {
		if s == "" || s == ".." {
			if !isInterval {
				return nil, bad("datetime: %q must be an RFC 3339 date-time, a date, or an interval a/b.", v)
			}
			return nil, nil
		}
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02"} {
			if t, err := time.Parse(layout, s); err == nil {
				return &t, nil
			}
		}
		return nil, bad("datetime: %q is not an RFC 3339 date-time (2024-05-01T12:00:00Z) or a date (2024-05-01).", s)
	}
	a, err := parse(start)
	if err != nil {
		return nil, err
	}
	if !isInterval {
		if len(start) == len("2006-01-02") { // a whole day
			e := a.AddDate(0, 0, 1).Add(-time.Nanosecond)
			return &interval{start: a, end: &e}, nil
		}
		return &interval{start: a, end: a}, nil
	}
	b, err := parse(end)
	if err != nil {
		return nil, err
	}
	if a != nil && b != nil && b.Before(*a) {
		return nil, bad("datetime: the interval %q ends before it starts.", v)
	}
	return &interval{start: a, end: b}, nil
}

// parseProperties reads a properties list; known, when not nil, holds the
// names a layer has. Names are split on commas and taken exactly as
// given: a column may be called " name " (martin's SpacesAndQuotes), and
// trimming would make it unreachable. Empty names are skipped, so that
// properties= asks for none.
func parseProperties(v string, known []string, collection string) ([]string, error) {
	names := []string{}
	for _, n := range strings.Split(v, ",") {
		if n == "" {
			continue
		}
		if known != nil && !slices.Contains(known, n) {
			return nil, bad("properties: collection %s has no property %q; /collections/%s/schema lists them.", collection, n, collection)
		}
		names = append(names, n)
	}
	return names, nil
}

// parseSortby reads sortby: queryables, each with an optional + or -.
func (s *layerSQL) parseSortby(v string) ([]sortKey, error) {
	var keys []sortKey
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		desc := false
		switch {
		case strings.HasPrefix(part, "-"):
			desc, part = true, part[1:]
		case strings.HasPrefix(part, "+"):
			part = part[1:]
		}
		q, ok := s.queryable(part)
		if !ok {
			return nil, bad("sortby: collection %s has no sortable property %q; /collections/%s/queryables lists them.", s.l.ID, part, s.l.ID)
		}
		if slices.ContainsFunc(keys, func(k sortKey) bool { return k.q.Name == q.Name }) {
			return nil, bad("sortby: %q is named twice.", part)
		}
		keys = append(keys, sortKey{q: q, desc: desc})
	}
	if len(keys) > 8 {
		return nil, bad("sortby: at most 8 properties.")
	}
	return keys, nil
}
