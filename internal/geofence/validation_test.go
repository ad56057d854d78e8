package geofence

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// square is a valid GeoJSON Polygon ring around (lng, lat).
func square(lng, lat, half float64) string {
	return fmt.Sprintf(`[[[%[1]v,%[2]v],[%[3]v,%[2]v],[%[3]v,%[4]v],[%[1]v,%[4]v],[%[1]v,%[2]v]]]`,
		lng-half, lat-half, lng+half, lat+half)
}

func fenceJSON(geometry string) string {
	return `{"type":"Feature","properties":{"name":"f"},"geometry":` + geometry + `}`
}

// bigRing is a closed ring of n positions on a circle.
func bigRing(n int) string {
	var b strings.Builder
	b.WriteString(`{"type":"Polygon","coordinates":[[`)
	for i := 0; i < n-1; i++ {
		fmt.Fprintf(&b, "[%v,%v],", float64(i)/float64(n)*10, 5+float64(i%2)*0.0)
	}
	b.WriteString(`[0,5]]]}`)
	return b.String()
}

func TestValidation(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	_, h := newTestService(t, pool, testTimeouts)
	within := "/within?lng=1&lat=2&radius=100"
	tests := []struct {
		name         string
		method, path string
		body         string
		wantCode     int
		wantLoc      []any
	}{
		// /within query parameters
		{"lng missing", "GET", "/within?lat=1&radius=5", "", 422, []any{"query", "lng"}},
		{"lat missing", "GET", "/within?lng=1&radius=5", "", 422, []any{"query", "lat"}},
		{"radius missing", "GET", "/within?lng=1&lat=1", "", 422, []any{"query", "radius"}},
		{"lng not a number", "GET", "/within?lng=abc&lat=1&radius=5", "", 422, []any{"query", "lng"}},
		{"lng empty", "GET", "/within?lng=&lat=1&radius=5", "", 422, []any{"query", "lng"}},
		{"lat NaN", "GET", "/within?lng=1&lat=NaN&radius=5", "", 422, []any{"query", "lat"}},
		{"lng Inf", "GET", "/within?lng=Inf&lat=1&radius=5", "", 422, []any{"query", "lng"}},
		{"lng -Infinity", "GET", "/within?lng=-Infinity&lat=1&radius=5", "", 422, []any{"query", "lng"}},
		{"lng hexadecimal", "GET", "/within?lng=0x1.8p1&lat=1&radius=5", "", 422, []any{"query", "lng"}},
		{"lat with an underscore", "GET", "/within?lng=1&lat=1_0&radius=5", "", 422, []any{"query", "lat"}},
		{"radius with a space", "GET", "/within?lng=1&lat=1&radius=%205", "", 422, []any{"query", "radius"}},
		{"signs and exponents are numbers", "GET", "/within?lng=%2B1&lat=-1e0&radius=5E1", "", 200, nil},
		{"radius overflows", "GET", "/within?lng=1&lat=1&radius=1e400", "", 422, []any{"query", "radius"}},
		{"radius +Inf", "GET", "/within?lng=1&lat=1&radius=%2BInf", "", 422, []any{"query", "radius"}},
		{"lng above 180", "GET", "/within?lng=180.0001&lat=1&radius=5", "", 422, []any{"query", "lng"}},
		{"lng below -180", "GET", "/within?lng=-181&lat=1&radius=5", "", 422, []any{"query", "lng"}},
		{"lat above 90", "GET", "/within?lng=1&lat=90.5&radius=5", "", 422, []any{"query", "lat"}},
		{"lat below -90", "GET", "/within?lng=1&lat=-91&radius=5", "", 422, []any{"query", "lat"}},
		{"radius zero", "GET", "/within?lng=1&lat=1&radius=0", "", 422, []any{"query", "radius"}},
		{"radius negative", "GET", "/within?lng=1&lat=1&radius=-5", "", 422, []any{"query", "radius"}},
		{"radius above max", "GET", "/within?lng=1&lat=1&radius=100000.5", "", 422, []any{"query", "radius"}},
		{"radius at max", "GET", "/within?lng=1&lat=1&radius=100000", "", 200, nil},
		{"bounds are inclusive", "GET", "/within?lng=-180&lat=90&radius=1", "", 200, nil},
		{"limit zero", "GET", within + "&limit=0", "", 422, []any{"query", "limit"}},
		{"limit above max", "GET", within + "&limit=1001", "", 422, []any{"query", "limit"}},
		{"limit not an integer", "GET", within + "&limit=1.5", "", 422, []any{"query", "limit"}},
		{"limit at max", "GET", within + "&limit=1000", "", 200, nil},
		{"layer not an id", "GET", within + "&layer=a.b", "", 422, []any{"query", "layer"}},
		{"unknown layer", "GET", within + "&layer=users", "", 404, nil},
		{"layer injection", "GET", within + "&layer=places%3BDROP%20TABLE%20places", "", 422, []any{"query", "layer"}},
		{"bad cursor", "GET", within + "&cursor=abc", "", 422, []any{"query", "cursor"}},
		{"radius twice", "GET", within + "&radius=5", "", 422, []any{"query", "radius"}},
		{"empty properties", "GET", within + "&properties=", "", 422, []any{"query", "properties"}},
		{"properties with an empty name", "GET", within + "&properties=a,,b", "", 422, []any{"query", "properties"}},
		{"unknown parameters are ignored", "GET", within + "&colour=red", "", 200, nil},

		// ids and other queries
		{"id not a number", "GET", "/geofences/abc", "", 422, []any{"path", "id"}},
		{"id zero", "GET", "/geofences/0", "", 422, []any{"path", "id"}},
		{"id negative", "DELETE", "/geofences/-3", "", 422, []any{"path", "id"}},
		{"id with a sign", "GET", "/geofences/+1", "", 422, []any{"path", "id"}},
		{"id with a space", "GET", "/geofences/%201", "", 422, []any{"path", "id"}},
		{"PUT on contains", "PUT", "/geofences/contains", fenceJSON(`{"type":"Polygon","coordinates":` + square(1, 1, 1) + `}`), 405, nil},
		{"DELETE on contains", "DELETE", "/geofences/contains", "", 405, nil},
		{"id too large", "GET", "/geofences/99999999999999999999", "", 422, []any{"path", "id"}},
		{"no such fence", "GET", "/geofences/12345", "", 404, nil},
		{"delete no such fence", "DELETE", "/geofences/12345", "", 404, nil},
		{"put no such fence", "PUT", "/geofences/12345", fenceJSON(`{"type":"Polygon","coordinates":` + square(1, 1, 1) + `}`), 404, nil},
		{"contains lat missing", "GET", "/geofences/contains?lng=1", "", 422, []any{"query", "lat"}},
		{"contains lng out of range", "GET", "/geofences/contains?lng=200&lat=1", "", 422, []any{"query", "lng"}},
		{"bbox with three numbers", "GET", "/geofences?bbox=1,2,3", "", 422, []any{"query", "bbox"}},
		{"bbox not numbers", "GET", "/geofences?bbox=a,b,c,d", "", 422, []any{"query", "bbox"}},
		{"bbox south above north", "GET", "/geofences?bbox=0,10,1,5", "", 422, []any{"query", "bbox"}},
		{"bbox out of range", "GET", "/geofences?bbox=0,0,181,5", "", 422, []any{"query", "bbox"}},
		{"bbox across the antimeridian", "GET", "/geofences?bbox=170,-20,-170,20", "", 200, nil},
		{"list limit", "GET", "/geofences?limit=0", "", 422, []any{"query", "limit"}},
		{"list cursor", "GET", "/geofences?cursor=xyz", "", 422, []any{"query", "cursor"}},

		// geofence bodies
		{"malformed JSON", "POST", "/geofences", `{"type":`, 422, []any{"body"}},
		{"empty body", "POST", "/geofences", ``, 422, []any{"body"}},
		{"not an object", "POST", "/geofences", `[1,2]`, 422, []any{"body"}},
		{"type missing", "POST", "/geofences", `{"properties":{"name":"x"},"geometry":{"type":"Polygon","coordinates":` + square(1, 1, 1) + `}}`, 422, []any{"body", "type"}},
		{"type not Feature", "POST", "/geofences", `{"type":"Polygon","properties":{"name":"x"},"geometry":{"type":"Polygon","coordinates":` + square(1, 1, 1) + `}}`, 422, []any{"body", "type"}},
		{"type not a string", "POST", "/geofences", `{"type":5}`, 422, []any{"body", "type"}},
		{"properties missing", "POST", "/geofences", `{"type":"Feature","geometry":{"type":"Polygon","coordinates":` + square(1, 1, 1) + `}}`, 422, []any{"body", "properties"}},
		{"properties not an object", "POST", "/geofences", `{"type":"Feature","properties":[1],"geometry":{"type":"Polygon","coordinates":` + square(1, 1, 1) + `}}`, 422, []any{"body", "properties"}},
		{"name missing", "POST", "/geofences", `{"type":"Feature","properties":{"a":1},"geometry":{"type":"Polygon","coordinates":` + square(1, 1, 1) + `}}`, 422, []any{"body", "properties", "name"}},
		{"name blank", "POST", "/geofences", `{"type":"Feature","properties":{"name":"  "},"geometry":{"type":"Polygon","coordinates":` + square(1, 1, 1) + `}}`, 422, []any{"body", "properties", "name"}},
		{"name too long", "POST", "/geofences", `{"type":"Feature","properties":{"name":"` + strings.Repeat("x", 201) + `"},"geometry":{"type":"Polygon","coordinates":` + square(1, 1, 1) + `}}`, 422, []any{"body", "properties", "name"}},
		{"name too long with its spaces", "POST", "/geofences", `{"type":"Feature","properties":{"name":" ` + strings.Repeat("x", 199) + ` "},"geometry":{"type":"Polygon","coordinates":` + square(1, 1, 1) + `}}`, 422, []any{"body", "properties", "name"}},
		{"NUL in the name", "POST", "/geofences", `{"type":"Feature","properties":{"name":"a\u0000b"},"geometry":{"type":"Polygon","coordinates":` + square(1, 1, 1) + `}}`, 422, []any{"body", "properties", "name"}},
		{"NUL in a property", "POST", "/geofences", `{"type":"Feature","properties":{"name":"x","a":"b\u0000"},"geometry":{"type":"Polygon","coordinates":` + square(1, 1, 1) + `}}`, 422, []any{"body", "properties"}},
		{"huge number in a property", "POST", "/geofences", `{"type":"Feature","properties":{"name":"x","a":1e999},"geometry":{"type":"Polygon","coordinates":` + square(1, 1, 1) + `}}`, 422, []any{"body", "properties"}},
		{"geometry missing", "POST", "/geofences", `{"type":"Feature","properties":{"name":"x"}}`, 422, []any{"body", "geometry"}},
		{"geometry null", "POST", "/geofences", fenceJSON(`null`), 422, []any{"body", "geometry"}},
		// JSON member names are case-sensitive, as in the document:
		// encoding/json alone would take these for the fields.
		{"Geometry capitalised", "POST", "/geofences", `{"type":"Feature","properties":{"name":"x"},"Geometry":{"type":"Polygon","coordinates":` + square(1, 1, 1) + `}}`, 422, []any{"body", "geometry"}},
		{"TYPE in capitals", "POST", "/geofences", `{"TYPE":"Feature","properties":{"name":"x"},"geometry":{"type":"Polygon","coordinates":` + square(1, 1, 1) + `}}`, 422, []any{"body", "type"}},
		{"properties with a long s", "POST", "/geofences", "{\"type\":\"Feature\",\"propertie\u017f\":{\"name\":\"x\"},\"geometry\":{\"type\":\"Polygon\",\"coordinates\":" + square(1, 1, 1) + "}}", 422, []any{"body", "properties"}},
		{"geometry Type capitalised", "POST", "/geofences", fenceJSON(`{"Type":"Polygon","coordinates":` + square(1, 1, 1) + `}`), 422, []any{"body", "geometry", "type"}},
		{"geometry Coordinates capitalised", "POST", "/geofences", fenceJSON(`{"type":"Polygon","Coordinates":` + square(1, 1, 1) + `}`), 422, []any{"body", "geometry", "coordinates"}},
		{"wrong geometry type", "POST", "/geofences", fenceJSON(`{"type":"LineString","coordinates":[[0,0],[1,1]]}`), 422, []any{"body", "geometry", "type"}},
		{"point geometry", "POST", "/geofences", fenceJSON(`{"type":"Point","coordinates":[0,0]}`), 422, []any{"body", "geometry", "type"}},
		{"coordinates missing", "POST", "/geofences", fenceJSON(`{"type":"Polygon"}`), 422, []any{"body", "geometry", "coordinates"}},
		{"coordinates not arrays", "POST", "/geofences", fenceJSON(`{"type":"Polygon","coordinates":"x"}`), 422, []any{"body", "geometry", "coordinates"}},
		{"coordinates as strings", "POST", "/geofences", fenceJSON(`{"type":"Polygon","coordinates":[[["0","0"],["1","0"],["1","1"],["0","0"]]]}`), 422, []any{"body", "geometry", "coordinates"}},
		{"positions of one number", "POST", "/geofences", fenceJSON(`{"type":"Polygon","coordinates":[[[0],[1],[2],[0]]]}`), 422, []any{"body", "geometry", "coordinates"}},
		{"positions of mixed sizes", "POST", "/geofences", fenceJSON(`{"type":"Polygon","coordinates":[[[0,0],[1,0,5],[1,1],[0,0]]]}`), 422, []any{"body", "geometry", "coordinates"}},
		{"positions with measures", "POST", "/geofences", fenceJSON(`{"type":"Polygon","coordinates":[[[0,0,1,1],[1,0,1,1],[1,1,1,1],[0,0,1,1]]]}`), 422, []any{"body", "geometry", "coordinates"}},
		{"non-finite coordinate", "POST", "/geofences", fenceJSON(`{"type":"Polygon","coordinates":[[[0,0],[1e400,0],[1,1],[0,0]]]}`), 422, []any{"body", "geometry", "coordinates"}},
		{"no rings", "POST", "/geofences", fenceJSON(`{"type":"Polygon","coordinates":[]}`), 422, []any{"body", "geometry", "coordinates"}},
		{"no polygons", "POST", "/geofences", fenceJSON(`{"type":"MultiPolygon","coordinates":[]}`), 422, []any{"body", "geometry", "coordinates"}},
		{"too few points", "POST", "/geofences", fenceJSON(`{"type":"Polygon","coordinates":[[[0,0],[1,0],[0,0]]]}`), 422, []any{"body", "geometry", "coordinates", 0}},
		{"unclosed ring", "POST", "/geofences", fenceJSON(`{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,1]]]}`), 422, []any{"body", "geometry", "coordinates", 0}},
		{"unclosed hole", "POST", "/geofences", fenceJSON(`{"type":"Polygon","coordinates":[[[0,0],[4,0],[4,4],[0,4],[0,0]],[[1,1],[2,1],[2,2],[1,2]]]}`), 422, []any{"body", "geometry", "coordinates", 1}},
		{"unclosed ring in a multipolygon", "POST", "/geofences", fenceJSON(`{"type":"MultiPolygon","coordinates":[` + square(1, 1, 1) + `,[[[5,5],[6,5],[6,6],[5,6]]]]}`), 422, []any{"body", "geometry", "coordinates", 1, 0}},
		{"longitude out of range", "POST", "/geofences", fenceJSON(`{"type":"Polygon","coordinates":[[[0,0],[181,0],[1,1],[0,0]]]}`), 422, []any{"body", "geometry", "coordinates", 0, 1}},
		{"latitude out of range", "POST", "/geofences", fenceJSON(`{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,-91],[0,0]]]}`), 422, []any{"body", "geometry", "coordinates", 0, 2}},
		{"antipodal edge", "POST", "/geofences", fenceJSON(`{"type":"Polygon","coordinates":[[[180,90],[-180,90],[-180,-90],[180,90]]]}`), 422, []any{"body", "geometry", "coordinates", 0, 2}},
		{"self-intersection", "POST", "/geofences", fenceJSON(`{"type":"Polygon","coordinates":[[[0,0],[2,2],[2,0],[0,2],[0,0]]]}`), 422, []any{"body", "geometry"}},
		{"hole outside the shell", "POST", "/geofences", fenceJSON(`{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,1],[0,0]],[[5,5],[6,5],[6,6],[5,6],[5,5]]]}`), 422, []any{"body", "geometry"}},
		{"too many vertices", "POST", "/geofences", fenceJSON(bigRing(100_001)), 422, []any{"body", "geometry", "coordinates"}},
		{"body too large", "POST", "/geofences", fenceJSON(`{"type":"Polygon","coordinates":` + square(1, 1, 1) + `}`)[:10] + strings.Repeat(" ", 5<<20), 413, nil},
		{"valid polygon", "POST", "/geofences", fenceJSON(`{"type":"Polygon","coordinates":` + square(1, 1, 1) + `}`), 201, nil},
		{"valid with altitude", "POST", "/geofences", fenceJSON(`{"type":"Polygon","coordinates":[[[0,0,5],[1,0,5],[1,1,5],[0,0,5]]]}`), 201, nil},

		// batch containment bodies
		{"batch malformed", "POST", "/geofences/contains", `{"points":[[1,2]`, 422, []any{"body"}},
		{"batch points missing", "POST", "/geofences/contains", `{}`, 422, []any{"body", "points"}},
		{"batch Points capitalised", "POST", "/geofences/contains", `{"Points":[[1,2]]}`, 422, []any{"body", "points"}},
		{"batch Points escaped", "POST", "/geofences/contains", `{"\u0050oints":[[1,2]]}`, 422, []any{"body", "points"}},
		{"batch points with a long s", "POST", "/geofences/contains", "{\"point\u017f\":[[1,2]]}", 422, []any{"body", "points"}},
		{"batch points not an array", "POST", "/geofences/contains", `{"points":5}`, 422, []any{"body", "points"}},
		{"batch point not a pair", "POST", "/geofences/contains", `{"points":[[1,2],[1]]}`, 422, []any{"body", "points", 1}},
		{"batch point of strings", "POST", "/geofences/contains", `{"points":[["1","2"]]}`, 422, []any{"body", "points", 0}},
		{"batch point null", "POST", "/geofences/contains", `{"points":[null]}`, 422, []any{"body", "points", 0}},
		{"batch point out of range", "POST", "/geofences/contains", `{"points":[[0,0],[1,95]]}`, 422, []any{"body", "points", 1}},
		{"batch too many points", "POST", "/geofences/contains", `{"points":[` + strings.Repeat("[0,0],", 1000) + `[0,0]]}`, 422, []any{"body", "points"}},
		{"batch at the limit", "POST", "/geofences/contains", `{"points":[` + strings.Repeat("[0,0],", 999) + `[0,0]]}`, 200, nil},
		{"batch empty", "POST", "/geofences/contains", `{"points":[]}`, 200, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := do(t, h, tt.method, tt.path, tt.body)
			if code != tt.wantCode {
				t.Fatalf("%s %s = %d %.300s, want %d", tt.method, tt.path, code, body, tt.wantCode)
			}
			if code == http.StatusUnprocessableEntity {
				fields := detail422(t, body)
				if len(fields) == 0 || !locEqual(fields[0].Loc, tt.wantLoc...) || fields[0].Msg == "" {
					t.Errorf("detail = %+v, want first loc %v with a message", fields, tt.wantLoc)
				}
			}
			if code >= 400 && !strings.HasPrefix(string(body), `{"detail":`) {
				t.Errorf("body = %.200s, want {\"detail\": ...}", body)
			}
		})
	}
}

func TestValidationReportsEveryProblem(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	_, h := newTestService(t, pool, testTimeouts)
	code, body := do(t, h, "GET", "/within?lng=x&lat=100&radius=-1&limit=0&layer=no.pe", "")
	if code != 422 {
		t.Fatalf("code = %d, want 422", code)
	}
	var locs []string
	for _, f := range detail422(t, body) {
		locs = append(locs, fmt.Sprint(f.Loc))
	}
	want := "[[query lng] [query lat] [query radius] [query limit] [query layer]]"
	if got := fmt.Sprint(locs); got != want {
		t.Errorf("locs = %s, want %s", got, want)
	}
}

func TestSelfIntersectionReason(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	_, h := newTestService(t, pool, testTimeouts)
	code, body := do(t, h, "POST", "/geofences", fenceJSON(`{"type":"Polygon","coordinates":[[[0,0],[2,2],[2,0],[0,2],[0,0]]]}`))
	want := `Invalid geometry: Self-intersection[1 1].`
	if code != 422 || !strings.Contains(string(body), want) {
		t.Errorf("POST bow-tie = %d %s, want 422 with %q", code, body, want)
	}
}

// TestInvalidFenceShapes: every shape PostGIS calls invalid is a 422
// carrying its reason, whatever the fault.
func TestInvalidFenceShapes(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	_, h := newTestService(t, pool, testTimeouts)
	for _, tc := range []struct{ name, geometry, want string }{
		{"HoleOutsideShell", `{"type":"Polygon","coordinates":[[[0,0],[4,0],[4,4],[0,4],[0,0]],[[5,5],[6,5],[6,6],[5,6],[5,5]]]}`, "Invalid geometry: Hole lies outside shell[5 5]."},
		{"NestedPolygons", `{"type":"MultiPolygon","coordinates":[[[[0,0],[4,0],[4,4],[0,4],[0,0]]],[[[1,1],[2,1],[2,2],[1,2],[1,1]]]]}`, "Invalid geometry: Nested shells[1 1]."},
		{"OverlappingPolygons", `{"type":"MultiPolygon","coordinates":[[[[0,0],[2,0],[2,2],[0,2],[0,0]]],[[[1,1],[3,1],[3,3],[1,3],[1,1]]]]}`, "Invalid geometry: Self-intersection"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := do(t, h, "POST", "/geofences", fenceJSON(tc.geometry))
			if code != 422 || !strings.Contains(string(body), tc.want) {
				t.Errorf("POST = %d %s, want 422 with %q", code, body, tc.want)
			}
		})
	}
}

// failingReader yields some bytes of a body, then fails, as a client
// that breaks off mid-body does.
type failingReader struct{ r io.Reader }

func (f *failingReader) Read(p []byte) (int, error) {
	if n, _ := f.r.Read(p); n > 0 {
		return n, nil
	}
	return 0, errors.New("connection reset mid-body")
}

// TestUnreadableBody checks that a body that cannot be read is a 422 in
// FastAPI's shape naming the body. It drives the router without the
// contract check, which would have to read the failing body itself.
func TestUnreadableBody(t *testing.T) {
	t.Parallel()
	_, h := newRawService(t, newDB(t), testTimeouts)
	for _, tc := range []struct{ method, path string }{
		{"POST", "/geofences"},
		{"PUT", "/geofences/1"},
		{"POST", "/geofences/contains"},
	} {
		t.Run(tc.method+tc.path, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.path, &failingReader{r: strings.NewReader(`{"type":"Feature","prop`)})
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusUnprocessableEntity {
				t.Fatalf("%s %s with a failing body = %d %s, want 422", tc.method, tc.path, w.Code, w.Body)
			}
			fields := detail422(t, w.Body.Bytes())
			if len(fields) != 1 || !locEqual(fields[0].Loc, "body") || fields[0].Msg != "Could not read the request body." {
				t.Errorf("detail = %+v, want one entry with loc [body] and the read failure", fields)
			}
		})
	}
}
