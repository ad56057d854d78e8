package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/geogate/geogate/internal/openapi/contract"
	"github.com/geogate/geogate/internal/testenv"
)

// call makes one request and returns its status, headers and body.
func call(t *testing.T, method, url, key, body string) (int, http.Header, []byte) {
	t.Helper()
	if key != "" {
		return callWith(t, method, url, body, "x-api-key", key)
	}
	return callWith(t, method, url, body)
}

// callWith sends one request with the given header names and values,
// alternating, and returns the answer; a body is sent as JSON.
func callWith(t *testing.T, method, url, body string, header ...string) (int, http.Header, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return resp.StatusCode, resp.Header, b
}

// TestContractTour calls every documented operation, with good and bad
// input, through the checking proxy of startService: each answer must be
// one the document describes. It also checks that validation failures name
// where the bad value was, as FastAPI does.
func TestContractTour(t *testing.T) {
	_, dbURL := testenv.DemoDBWithURL(t)
	env := map[string]string{
		"DATABASE_URL":          dbURL,
		"AUTH_ANONYMOUS_SCOPES": "proximity:read,geofences:read,tiles:read",
		"RATELIMIT_GEOFENCE":    "100000/1s",
		// Each refused look-up of a subscription is charged too.
		"RATELIMIT_EVENTS": "100000/1s",
	}
	key := "tour-" + testenv.Prefix(t)
	runCLI(t, env, "keys", "create", "--name", key, "--secret", key, "--scopes", "all")
	readOnly := key + "-ro"
	runCLI(t, env, "keys", "create", "--name", readOnly, "--secret", readOnly, "--scopes", "geofences:read")
	base, _ := startService(t, env)

	const fence = `{"type":"Feature","properties":{"name":"Tiergarten","zone":"park"},"geometry":{"type":"Polygon",
		"coordinates":[[[13.335,52.509],[13.375,52.509],[13.375,52.521],[13.335,52.521],[13.335,52.509]]]}}`

	// Writes first: the reads below use the fence.
	status, h, body := call(t, "POST", base+"/geofences", key, fence)
	if status != 201 {
		t.Fatalf("POST /geofences = %d %s, want 201", status, body)
	}
	var created struct{ ID int64 }
	if err := json.Unmarshal(body, &created); err != nil || created.ID < 1 || h.Get("Location") == "" {
		t.Fatalf("POST /geofences body %s, Location %q: want an id and a Location", body, h.Get("Location"))
	}

	// A subscription to the fences, before the positions below, so
	// that they make events to page through.
	status, _, body = call(t, "POST", base+"/subscriptions", key, `{"layer":"geofences","kinds":["enter","exit","dwell"],"dwellSeconds":60}`)
	var sub struct{ ID string }
	if err := json.Unmarshal(body, &sub); status != 201 || err != nil {
		t.Fatalf("POST /subscriptions = %d %s, want 201", status, body)
	}
	subPath := "/subscriptions/" + sub.ID
	const noSub = "/subscriptions/00000000-0000-4000-8000-000000000000"
	position := func(lng float64, ago time.Duration) string {
		return fmt.Sprintf(`{"device":"tour","time":%q,"lng":%v,"lat":52.515}`, time.Now().Add(-ago).UTC().Format(time.RFC3339Nano), lng)
	}

	tests := []struct {
		name, method, path, key, body string
		wantStatus                    int
		wantLoc                       []any // for 422: the loc of the first entry
	}{
		{"WithinBerlin", "GET", "/within?lng=13.4&lat=52.5&radius=500", "", "", 200, nil},
		{"WithinPaged", "GET", "/within?lng=13.4&lat=52.5&radius=20000&limit=2&properties=country", key, "", 200, nil},
		{"WithinFences", "GET", "/within?lng=13.4&lat=52.5&radius=1000&layer=geofences&properties=none", key, "", 200, nil},
		{"WithinMissingLng", "GET", "/within?lat=52.5&radius=500", key, "", 422, []any{"query", "lng"}},
		{"WithinBadRadius", "GET", "/within?lng=13.4&lat=52.5&radius=-1", key, "", 422, []any{"query", "radius"}},
		{"WithinHugeRadius", "GET", "/within?lng=13.4&lat=52.5&radius=1e9", key, "", 422, []any{"query", "radius"}},
		{"WithinNaN", "GET", "/within?lng=NaN&lat=52.5&radius=5", key, "", 422, []any{"query", "lng"}},
		{"WithinLatOut", "GET", "/within?lng=13.4&lat=91&radius=5", key, "", 422, []any{"query", "lat"}},
		{"WithinLimit", "GET", "/within?lng=13.4&lat=52.5&radius=5&limit=100000", key, "", 422, []any{"query", "limit"}},
		{"WithinUnknownLayer", "GET", "/within?lng=13.4&lat=52.5&radius=5&layer=nope", key, "", 404, nil},
		{"WithinMalformedLayer", "GET", "/within?lng=13.4&lat=52.5&radius=5&layer=no%20pe", key, "", 422, []any{"query", "layer"}},
		{"WithinCursor", "GET", "/within?lng=13.4&lat=52.5&radius=5&cursor=forged", key, "", 422, []any{"query", "cursor"}},
		{"WithinBadKey", "GET", "/within?lng=13.4&lat=52.5&radius=5", "no-such-key", "", 401, nil},
		{"WithinNoScope", "GET", "/within?lng=13.4&lat=52.5&radius=5", readOnly, "", 403, nil},
		{"List", "GET", "/geofences?limit=5", key, "", 200, nil},
		{"ListBBox", "GET", "/geofences?bbox=13,52,14,53", "", "", 200, nil},
		{"ListBadBBox", "GET", "/geofences?bbox=1,2,3", key, "", 422, []any{"query", "bbox"}},
		{"Get", "GET", fmt.Sprintf("/geofences/%d", created.ID), key, "", 200, nil},
		{"GetMissing", "GET", "/geofences/999999999", key, "", 404, nil},
		{"GetBadID", "GET", "/geofences/abc", key, "", 422, []any{"path", "id"}},
		{"Contains", "GET", "/geofences/contains?lng=13.35&lat=52.515", key, "", 200, nil},
		{"ContainsBad", "GET", "/geofences/contains?lng=200&lat=1", key, "", 422, []any{"query", "lng"}},
		{"ContainsBatch", "POST", "/geofences/contains", key, `{"points":[[13.35,52.515],[2.35,48.85],[0,0]]}`, 200, nil},
		{"ContainsBatchBad", "POST", "/geofences/contains", key, `{"points":[[13.35,52.515],[500,1]]}`, 422, []any{"body", "points", 1.0}},
		{"ContainsBatchNotJSON", "POST", "/geofences/contains", key, `{"points":`, 422, []any{"body"}},
		{"ContainsLayer", "GET", "/geofences/contains?lng=13.35&lat=52.515&layer=geofences", key, "", 200, nil},
		{"ContainsUnknownLayer", "GET", "/geofences/contains?lng=13.35&lat=52.515&layer=nope", key, "", 404, nil},
		{"ContainsMalformedLayer", "GET", "/geofences/contains?lng=13.35&lat=52.515&layer=no%20pe", key, "", 422, []any{"query", "layer"}},
		{"ContainsPointLayer", "GET", "/geofences/contains?lng=13.35&lat=52.515&layer=places", key, "", 422, []any{"query", "layer"}},
		{"ContainsBatchLayer", "POST", "/geofences/contains?layer=geofences", key, `{"points":[[13.35,52.515],[0,0]]}`, 200, nil},
		{"ContainsBatchUnknownLayer", "POST", "/geofences/contains?layer=nope", key, `{"points":[[13.35,52.515]]}`, 404, nil},
		{"ContainsBatchPointLayer", "POST", "/geofences/contains?layer=places", key, `{"points":[[13.35,52.515]]}`, 422, []any{"query", "layer"}},
		{"CreateNoScope", "POST", "/geofences", readOnly, fence, 403, nil},
		{"CreateOpenRing", "POST", "/geofences", key, `{"type":"Feature","properties":{"name":"x"},"geometry":{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,0.5]]]}}`, 422, []any{"body", "geometry", "coordinates", 0.0}},
		{"CreatePoint", "POST", "/geofences", key, `{"type":"Feature","properties":{"name":"x"},"geometry":{"type":"Point","coordinates":[0,0]}}`, 422, []any{"body", "geometry", "type"}},
		{"CreateSelfIntersecting", "POST", "/geofences", key, `{"type":"Feature","properties":{"name":"x"},"geometry":{"type":"Polygon","coordinates":[[[0,0],[1,1],[1,0],[0,1],[0,0]]]}}`, 422, []any{"body", "geometry"}},
		{"CreateNoName", "POST", "/geofences", key, `{"type":"Feature","properties":{},"geometry":{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,0]]]}}`, 422, []any{"body", "properties", "name"}},
		{"Replace", "PUT", fmt.Sprintf("/geofences/%d", created.ID), key, strings.Replace(fence, "Tiergarten", "Großer Tiergarten", 1), 200, nil},
		{"ReplaceMissing", "PUT", "/geofences/999999999", key, fence, 404, nil},
		{"TileLayers", "GET", "/tiles", "", "", 200, nil},
		{"TileJSON", "GET", "/tiles/places.json", "", "", 200, nil},
		{"TileJSONMissing", "GET", "/tiles/nope.json", "", "", 404, nil},
		{"Tile", "GET", "/tiles/places/4/8/5.mvt", "", "", 200, nil},
		{"TilePBF", "GET", "/tiles/geofences/4/8/5.pbf", key, "", 200, nil},
		{"TileEmpty", "GET", "/tiles/places/10/0/0.mvt", "", "", 204, nil},
		{"TileOutOfRange", "GET", "/tiles/places/4/16/0.mvt", "", "", 404, nil},
		{"TileMatrixSets", "GET", "/tileMatrixSets", "", "", 200, nil},
		{"TileMatrixSet", "GET", "/tileMatrixSets/WebMercatorQuad", key, "", 200, nil},
		{"TileMatrixSetUnknown", "GET", "/tileMatrixSets/WorldCRS84Quad", "", "", 404, nil},
		{"TileSets", "GET", "/collections/places/tiles", "", "", 200, nil},
		{"TileSetsUnknown", "GET", "/collections/nope/tiles", "", "", 404, nil},
		{"TileSet", "GET", "/collections/geofences/tiles/WebMercatorQuad", key, "", 200, nil},
		{"TileSetUnknownTMS", "GET", "/collections/places/tiles/WorldCRS84Quad", "", "", 404, nil},
		{"OGCTile", "GET", "/collections/places/tiles/WebMercatorQuad/4/5/8", "", "", 200, nil},
		{"OGCTileEmpty", "GET", "/collections/places/tiles/WebMercatorQuad/10/0/0", "", "", 204, nil},
		{"OGCTileOutOfRange", "GET", "/collections/places/tiles/WebMercatorQuad/4/0/16", "", "", 404, nil},
		{"OGCTileNotInteger", "GET", "/collections/places/tiles/WebMercatorQuad/4/a/8", "", "", 404, nil},
		{"OGCTileBeyondSet", "GET", "/collections/places/tiles/WebMercatorQuad/25/0/0", "", "", 404, nil},
		{"OGCTileUnknownCollection", "GET", "/collections/nope/tiles/WebMercatorQuad/0/0/0", "", "", 404, nil},
		{"OGCTileNoScope", "GET", "/collections/places/tiles/WebMercatorQuad/0/0/0", readOnly, "", 403, nil},
		{"Styles", "GET", "/styles", "", "", 200, nil},
		{"Style", "GET", "/styles/default", key, "", 200, nil},
		{"StyleUnknown", "GET", "/styles/night", "", "", 404, nil},
		{"RateLimit", "GET", "/rate_limit", key, "", 200, nil},
		{"RateLimitAnonymous", "GET", "/rate_limit", "", "", 200, nil},
		{"RateLimitBadKey", "GET", "/rate_limit", "no-such-key", "", 401, nil},
		{"Healthz", "GET", "/healthz", "", "", 200, nil},
		{"Readyz", "GET", "/readyz", "", "", 200, nil},
		{"Metrics", "GET", "/metrics", "", "", 200, nil},
		{"OpenAPI", "GET", "/openapi.json", "", "", 200, nil},
		{"AdminCreate", "POST", "/admin/keys", key, `{"id":"made","scopes":["tiles:read"],"tier":"gold","notes":"from the tour",
			"spatial_scope":{"type":"Polygon","coordinates":[[[13,52],[14,52],[14,53],[13,53],[13,52]]]},"layers":["places"],
			"expires_at":"2999-01-01T00:00:00Z","overrides":{"geofence":"10/1s,600/1m"}}`, 201, nil},
		{"AdminCreateExists", "POST", "/admin/keys", key, `{"id":"made","scopes":["tiles:read"]}`, 409, nil},
		{"AdminCreateNoScopes", "POST", "/admin/keys", key, `{"id":"other"}`, 422, []any{"body", "scopes"}},
		{"AdminCreateUnknownScope", "POST", "/admin/keys", key, `{"id":"other","scopes":["root"]}`, 422, []any{"body", "scopes", 0.0}},
		{"AdminCreateSecret", "POST", "/admin/keys", key, `{"id":"other","scopes":["admin"],"secret":"guessable"}`, 422, []any{"body", "secret"}},
		{"AdminCreateUnknownPolicy", "POST", "/admin/keys", key, `{"id":"other","scopes":["admin"],"overrides":{"nope":"1/1s"}}`, 422, []any{"body", "overrides", "nope"}},
		{"AdminCreateNotJSON", "POST", "/admin/keys", key, `{"id":`, 422, []any{"body"}},
		{"AdminList", "GET", "/admin/keys", key, "", 200, nil},
		{"AdminGet", "GET", "/admin/keys/made", key, "", 200, nil},
		{"AdminGetMissing", "GET", "/admin/keys/missing", key, "", 404, nil},
		{"AdminGetBadID", "GET", "/admin/keys/-x", key, "", 422, []any{"path", "id"}},
		{"AdminPatch", "PATCH", "/admin/keys/made", key, `{"tier":null,"spatial_scope":[13,52,14,53],"layers":null,"expires_at":null,"overrides":null}`, 200, nil},
		{"AdminPatchEmpty", "PATCH", "/admin/keys/made", key, `{}`, 422, []any{"body"}},
		{"AdminPatchBadExpiry", "PATCH", "/admin/keys/made", key, `{"expires_at":"yesterday"}`, 422, []any{"body", "expires_at"}},
		{"AdminPatchMissing", "PATCH", "/admin/keys/missing", key, `{"notes":"x"}`, 404, nil},
		{"AdminRotate", "POST", "/admin/keys/made/rotate", key, `{"grace":"2h"}`, 200, nil},
		{"AdminRotateDefault", "POST", "/admin/keys/made/rotate", key, "", 200, nil},
		{"AdminRotateBadGrace", "POST", "/admin/keys/made/rotate", key, `{"grace":"8d"}`, 422, []any{"body", "grace"}},
		{"AdminRotateMissing", "POST", "/admin/keys/missing/rotate", key, "", 404, nil},
		{"AdminRevoke", "DELETE", "/admin/keys/made", key, "", 200, nil},
		{"AdminRevokeMissing", "DELETE", "/admin/keys/missing", key, "", 404, nil},
		{"AdminRotateRevoked", "POST", "/admin/keys/made/rotate", key, "", 409, nil},
		{"AdminAudit", "GET", "/admin/audit?limit=2", key, "", 200, nil},
		{"AdminAuditKey", "GET", "/admin/audit?key_id=made", key, "", 200, nil},
		{"AdminAuditBadLimit", "GET", "/admin/audit?limit=5000", key, "", 422, []any{"query", "limit"}},
		{"AdminNoScope", "GET", "/admin/keys", readOnly, "", 403, nil},
		{"AdminAnonymous", "GET", "/admin/audit", "", "", 401, nil},
		{"AdminWrongMethod", "PUT", "/admin/keys/made", key, `{"notes":"x"}`, 405, nil},
		{"Positions", "POST", "/positions", key, position(13.35, time.Minute), 202, nil},
		{"PositionsBatch", "POST", "/positions", key, "[" + position(13.36, 50*time.Second) + "," + position(13.2, 40*time.Second) + "]", 202, nil},
		{"PositionsLate", "POST", "/positions", key, position(13.35, time.Hour), 202, nil},
		{"PositionsBadLng", "POST", "/positions", key, `{"device":"tour","time":"2025-01-01T00:00:00Z","lng":181,"lat":0}`, 422, []any{"body", "lng"}},
		{"PositionsUnknownField", "POST", "/positions", key, `[{"device":"tour","time":"2025-01-01T00:00:00Z","lng":1,"lat":0,"alt":3}]`, 422, []any{"body", 0.0}},
		{"PositionsFuture", "POST", "/positions", key, `{"device":"tour","time":"2999-01-01T00:00:00Z","lng":1,"lat":0}`, 422, []any{"body", "time"}},
		{"PositionsEmpty", "POST", "/positions", key, `[]`, 422, []any{"body"}},
		{"PositionsNoScope", "POST", "/positions", readOnly, position(13.35, 0), 403, nil},
		{"PositionsAnonymous", "POST", "/positions", "", position(13.35, 0), 401, nil},
		{"Track", "GET", "/positions?device=tour&limit=2", key, "", 200, nil},
		{"TrackRange", "GET", "/positions?device=tour&from=2025-01-01T00:00:00Z&to=2999-01-01T00:00:00Z", key, "", 200, nil},
		{"TrackNoDevice", "GET", "/positions", key, "", 422, []any{"query", "device"}},
		{"TrackBadCursor", "GET", "/positions?device=tour&after=x", key, "", 422, []any{"query", "after"}},
		{"TrackBadFrom", "GET", "/positions?device=tour&from=yesterday", key, "", 422, []any{"query", "from"}},
		{"TrackBadLimit", "GET", "/positions?device=tour&limit=0", key, "", 422, []any{"query", "limit"}},
		{"TrackUnknownDevice", "GET", "/positions?device=nosuch", key, "", 404, nil},
		{"TrackNoScope", "GET", "/positions?device=tour", readOnly, "", 403, nil},
		{"Devices", "GET", "/devices", key, "", 200, nil},
		{"DevicesNoScope", "GET", "/devices", readOnly, "", 403, nil},
		{"Subscriptions", "GET", "/subscriptions", key, "", 200, nil},
		{"SubscriptionCreateBadKind", "POST", "/subscriptions", key, `{"layer":"geofences","kinds":["leave"]}`, 422, []any{"body", "kinds", 0.0}},
		{"SubscriptionCreateUnknownField", "POST", "/subscriptions", key, `{"layer":"geofences","kinds":["enter"],"color":"red"}`, 422, []any{"body"}},
		{"SubscriptionCreatePointLayer", "POST", "/subscriptions", key, `{"layer":"places","kinds":["enter"]}`, 422, []any{"body", "layer"}},
		{"SubscriptionCreateHTTPWebhook", "POST", "/subscriptions", key, `{"layer":"geofences","kinds":["enter"],"webhook":"http://example.com/hook"}`, 422, []any{"body", "webhook"}},
		{"SubscriptionCreateDwellless", "POST", "/subscriptions", key, `{"layer":"geofences","kinds":["dwell"]}`, 422, []any{"body", "dwellSeconds"}},
		{"Subscription", "GET", subPath, key, "", 200, nil},
		{"SubscriptionMissing", "GET", noSub, key, "", 404, nil},
		{"SubscriptionMalformedID", "GET", "/subscriptions/1", key, "", 404, nil},
		{"SubscriptionPatch", "PATCH", subPath, key, `{"kinds":["enter","exit"],"filter":"name = 'Tiergarten'"}`, 200, nil},
		{"SubscriptionPatchBad", "PATCH", subPath, key, `{"dwellSeconds":-1}`, 422, []any{"body", "dwellSeconds"}},
		{"SubscriptionPatchMissing", "PATCH", noSub, key, `{"kinds":["enter"]}`, 404, nil},
		{"SubscriptionSecret", "POST", subPath + "/secret", key, "", 200, nil},
		{"SubscriptionSecretMissing", "POST", noSub + "/secret", key, "", 404, nil},
		{"Events", "GET", "/events?subscription=" + sub.ID, key, "", 200, nil},
		{"EventsAfter", "GET", "/events?subscription=" + sub.ID + "&after=1&limit=1", key, "", 200, nil},
		{"EventsBadAfter", "GET", "/events?subscription=" + sub.ID + "&after=x", key, "", 422, []any{"query", "after"}},
		{"EventsBadLimit", "GET", "/events?subscription=" + sub.ID + "&limit=0", key, "", 422, []any{"query", "limit"}},
		{"EventsNoSubscription", "GET", "/events", key, "", 422, []any{"query", "subscription"}},
		{"EventsMissing", "GET", "/events?subscription=00000000-0000-4000-8000-000000000000", key, "", 404, nil},
		{"StreamHead", "HEAD", "/events/stream?subscription=" + sub.ID, key, "", 200, nil},
		{"StreamNoSubscription", "GET", "/events/stream", key, "", 422, []any{"query", "subscription"}},
		{"StreamBadAfter", "GET", "/events/stream?subscription=" + sub.ID + "&after=-1", key, "", 422, []any{"query", "after"}},
		{"StreamMissing", "GET", "/events/stream?subscription=00000000-0000-4000-8000-000000000000", key, "", 404, nil},
		{"StreamNoScope", "GET", "/events/stream?subscription=" + sub.ID, readOnly, "", 403, nil},
		{"SubscriptionDelete", "DELETE", subPath, key, "", 204, nil},
		{"SubscriptionDeleteAgain", "DELETE", subPath, key, "", 404, nil},
		{"Delete", "DELETE", fmt.Sprintf("/geofences/%d", created.ID), key, "", 204, nil},
		{"DeleteAgain", "DELETE", fmt.Sprintf("/geofences/%d", created.ID), key, "", 404, nil},
		{"UnknownRoute", "GET", "/no/such/route", "", "", 404, nil},
		{"WrongMethod", "PATCH", "/within", "", "", 405, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := call(t, tt.method, base+tt.path, tt.key, tt.body)
			if status != tt.wantStatus {
				t.Fatalf("%s %s = %d %.300s, want %d", tt.method, tt.path, status, body, tt.wantStatus)
			}
			if tt.wantLoc == nil {
				return
			}
			var got struct {
				Detail []struct{ Loc []any } `json:"detail"`
			}
			if err := json.Unmarshal(body, &got); err != nil || len(got.Detail) == 0 {
				t.Fatalf("422 body %s is not a FastAPI validation error: %v", body, err)
			}
			if diff := cmp.Diff(tt.wantLoc, got.Detail[0].Loc); diff != "" {
				t.Errorf("loc mismatch (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("NextPageLink", func(t *testing.T) {
		_, _, body := call(t, "GET", base+"/within?lng=13.4&lat=52.5&radius=20000&limit=2", key, "")
		var page struct {
			Links []struct{ Rel, Href string }
		}
		if err := json.Unmarshal(body, &page); err != nil || len(page.Links) == 0 {
			t.Fatalf("page %.300s has no next link: %v", body, err)
		}
		if status, _, body := call(t, "GET", base+page.Links[0].Href, key, ""); status != 200 {
			t.Errorf("following the next link = %d %.300s, want 200", status, body)
		}
	})

	t.Run("TileNotModified", func(t *testing.T) {
		_, h, _ := call(t, "GET", base+"/tiles/places/4/8/5.mvt", "", "")
		req, _ := http.NewRequest("GET", base+"/tiles/places/4/8/5.mvt", nil)
		req.Header.Set("If-None-Match", h.Get("ETag"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotModified {
			t.Errorf("tile with If-None-Match = %d, want 304", resp.StatusCode)
		}
	})

	// Both routes serve one tile: the ETag of either is good for the other.
	t.Run("OGCTileNotModified", func(t *testing.T) {
		_, h, _ := call(t, "GET", base+"/tiles/places/4/8/5.mvt", "", "")
		status, _, _ := callWith(t, "GET", base+"/collections/places/tiles/WebMercatorQuad/4/5/8", "", "If-None-Match", h.Get("ETag"))
		if status != http.StatusNotModified {
			t.Errorf("OGC tile with the /tiles ETag = %d, want 304", status)
		}
	})
}

// TestContractTourRateLimited checks the documented 429: body, headers and
// Retry-After (the proxy of startService checks them against the document).
func TestContractTourRateLimited(t *testing.T) {
	base, _ := startService(t, map[string]string{"RATELIMIT_GEOFENCE": "2/1m"})
	url := base + "/within?lng=13.4&lat=52.5&radius=500&layer=places"
	for i, want := range []int{200, 200, 429} {
		status, h, body := call(t, "GET", url, "", "")
		if status != want {
			t.Fatalf("request %d = %d %.200s, want %d", i+1, status, body, want)
		}
		if h.Get("RateLimit-Policy") == "" {
			t.Errorf("request %d lacks RateLimit-Policy", i+1)
		}
		if want == 429 && h.Get("Retry-After") == "" {
			t.Errorf("429 lacks Retry-After")
		}
	}
}

// TestDocumentedRangesAreEnforced reads every numeric query parameter's
// range from the document the service serves and tries its edges: a value
// on the edge must not be refused as invalid, one just past it must be a
// 422 naming that parameter. The document's ranges are thus the code's.
func TestDocumentedRangesAreEnforced(t *testing.T) {
	base, _ := startService(t, map[string]string{"RATELIMIT_GEOFENCE": "100000/1s"})
	_, _, data := call(t, "GET", base+"/openapi.json", "", "")
	doc, err := contract.LoadData(context.Background(), data)
	if err != nil {
		t.Fatal(err)
	}
	valid := map[string]string{"lng": "13.4", "lat": "52.5", "radius": "500"}
	checked := 0
	for _, path := range []string{"/within", "/geofences", "/geofences/contains"} {
		op := doc.Paths.Value(path).Get
		for _, ref := range op.Parameters {
			p := ref.Value
			if p.In != "query" || p.Schema == nil || !p.Schema.Value.Type.Includes("number") && !p.Schema.Value.Type.Includes("integer") {
				continue
			}
			s := p.Schema.Value
			var edges, past []float64
			if s.Min != nil {
				edges, past = append(edges, *s.Min), append(past, *s.Min-1)
			}
			if s.ExclusiveMin.Value != nil {
				edges, past = append(edges, *s.ExclusiveMin.Value+1e-6), append(past, *s.ExclusiveMin.Value)
			}
			if s.Max != nil {
				edges, past = append(edges, *s.Max), append(past, *s.Max+1)
			}
			for _, v := range append(edges, past...) {
				isEdge := len(edges) > 0 && v >= edges[0] && v <= edges[len(edges)-1]
				q := url.Values{}
				for name, val := range valid {
					if op.Parameters.GetByInAndName("query", name) != nil {
						q.Set(name, val)
					}
				}
				q.Set(p.Name, strconv.FormatFloat(v, 'f', -1, 64))
				status, _, body := call(t, "GET", base+path+"?"+q.Encode(), "", "")
				checked++
				loc := fmt.Sprintf(`"loc":["query",%q]`, p.Name)
				switch {
				case isEdge && status == 422 && strings.Contains(string(body), loc):
					t.Errorf("GET %s?%s = 422 %s; the document allows %s=%v", path, q.Encode(), body, p.Name, v)
				case !isEdge && (status != 422 || !strings.Contains(string(body), loc)):
					t.Errorf("GET %s?%s = %d %.200s; want 422 naming %s, the document forbids %v", path, q.Encode(), status, body, p.Name, v)
				}
			}
		}
	}
	if checked < 12 {
		t.Errorf("checked %d values; the document's ranges were not found", checked)
	}
}
