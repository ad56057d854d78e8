package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/testenv"
)

// eventsCaller sends requests to the service as one API key.
type eventsCaller struct {
	t    *testing.T
	base string
	key  string
}

func (c eventsCaller) do(method, path, body string) (int, string) {
	c.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, c.base+path, r)
	req.Header.Set("Content-Type", "application/json")
	if c.key != "" {
		req.Header.Set("x-api-key", c.key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func positionsBody(device string, pts ...[2]float64) string {
	var ps []string
	start := time.Now().UTC().Add(-time.Minute)
	for i, p := range pts {
		ps = append(ps, fmt.Sprintf(`{"device":%q,"time":%q,"lng":%g,"lat":%g}`, device, start.Add(time.Duration(i)*time.Second).Format(time.RFC3339Nano), p[0], p[1]))
	}
	return "[" + strings.Join(ps, ",") + "]"
}

// TestEventsOverHTTP reports positions and pulls the events they make
// through the service, and tries every events route as callers with fewer
// rights than it needs: no scope, another layer, another owner, outside
// the spatial scope, and bad input.
func TestEventsOverHTTP(t *testing.T) {
	_, dbURL := testenv.DemoDBWithURL(t)
	env := map[string]string{"DATABASE_URL": dbURL, "AUTH_ANONYMOUS_SCOPES": "none"}
	id := "ev-" + testenv.Prefix(t)
	key := func(name string, args ...string) eventsCaller {
		secret := runCLI(t, env, append([]string{"keys", "create", "--name", id + "-" + name}, args...)...)
		return eventsCaller{t: t, key: strings.TrimSpace(secret)}
	}
	full := key("full", "--scopes", "all")
	other := key("other", "--scopes", "all")
	placesOnly := key("places", "--scopes", "all", "--layers", "places")
	reader := key("reader", "--scopes", "events:read,geofences:read")
	berlinOnly := key("berlin", "--scopes", "all", "--bbox", "13,52,14,53")
	base, _ := startService(t, env)
	for _, c := range []*eventsCaller{&full, &other, &placesOnly, &reader, &berlinOnly} {
		c.base = base
	}

	status, body := full.do("POST", "/subscriptions", `{"layer":"geofences","kinds":["enter","exit"]}`)
	if status != 201 {
		t.Fatalf("POST /subscriptions = %d %s, want 201", status, body)
	}
	var sub struct{ ID, Secret string }
	_ = json.Unmarshal([]byte(body), &sub)
	if sub.ID == "" || !strings.HasPrefix(sub.Secret, "whsec_") {
		t.Fatalf("subscription = %s, want an id and a whsec_ secret", body)
	}
	if status, body := full.do("POST", "/positions", positionsBody("truck", [2]float64{13.40, 52.52}, [2]float64{21.01, 52.23})); status != 202 || !strings.Contains(body, `"events":3`) {
		t.Fatalf("POST /positions = %d %s, want 202 with 3 events", status, body)
	}
	status, body = full.do("GET", "/events?subscription="+sub.ID, "")
	var page struct {
		Events []struct {
			SpecVersion, ID, Type, Subject string
			Data                           struct{ Kind, Fence, Layer string }
		}
		Next string
	}
	if err := json.Unmarshal([]byte(body), &page); status != 200 || err != nil {
		t.Fatalf("GET /events = %d %s", status, body)
	}
	var got []string
	for _, e := range page.Events {
		got = append(got, e.Type)
		if e.SpecVersion != "1.0" || e.ID == "" || e.Subject != "truck" || e.Data.Layer != "geofences" {
			t.Errorf("event %+v: want a CloudEvents 1.0 event about truck on geofences", e)
		}
	}
	if want := "io.geogate.geofence.enter io.geogate.geofence.exit io.geogate.geofence.enter"; strings.Join(got, " ") != want {
		t.Errorf("event types = %v, want %s", got, want)
	}
	if status, body := full.do("GET", "/events?subscription="+sub.ID+"&after="+page.Next, ""); status != 200 || !strings.Contains(body, `"events":[]`) {
		t.Errorf("GET /events after the last = %d %s, want an empty page", status, body)
	}

	// The device's track: both positions, in time order, then no more.
	status, body = full.do("GET", "/positions?device=truck&limit=1", "")
	var track struct {
		Device    string
		Positions []struct{ Lng, Lat float64 }
		Next      *string
	}
	var lngs []float64
	for status == 200 && json.Unmarshal([]byte(body), &track) == nil && len(track.Positions) > 0 && len(lngs) < 10 {
		lngs = append(lngs, track.Positions[0].Lng)
		status, body = full.do("GET", "/positions?device=truck&limit=1&after="+*track.Next, "")
	}
	if status != 200 || track.Device != "truck" || fmt.Sprint(lngs) != "[13.4 21.01]" {
		t.Errorf("GET /positions pages = %d %s, longitudes %v; want 13.4 then 21.01", status, body, lngs)
	}

	for _, tc := range []struct {
		name         string
		c            eventsCaller
		method, path string
		body         string
		want         int
		detail       string
	}{
		{"NoPositionsScope", reader, "POST", "/positions", positionsBody("x", [2]float64{13.4, 52.5}), 403, "positions:write"},
		{"NoEventsWrite", reader, "POST", "/subscriptions", `{"layer":"geofences","kinds":["enter"]}`, 403, "events:write"},
		{"LayerNotAllowed", placesOnly, "POST", "/subscriptions", `{"layer":"geofences","kinds":["enter"]}`, 403, `may not read layer`},
		{"UnknownLayerSameAnswer", placesOnly, "POST", "/subscriptions", `{"layer":"nosuch","kinds":["enter"]}`, 403, `may not read layer`},
		{"PlacesIsNoPolygonLayer", placesOnly, "POST", "/subscriptions", `{"layer":"places","kinds":["enter"]}`, 422, "polygon layer"},
		{"OtherOwnersSubscription", other, "GET", "/subscriptions/" + sub.ID, "", 404, "No such subscription"},
		{"OtherOwnersEvents", other, "GET", "/events?subscription=" + sub.ID, "", 404, "No such subscription"},
		{"OtherOwnersPatch", other, "PATCH", "/subscriptions/" + sub.ID, `{"kinds":["exit"]}`, 404, "No such subscription"},
		{"OtherOwnersDelete", other, "DELETE", "/subscriptions/" + sub.ID, "", 404, "No such subscription"},
		{"OtherOwnersSecret", other, "POST", "/subscriptions/" + sub.ID + "/secret", "", 404, "No such subscription"},
		{"MalformedID", full, "GET", "/subscriptions/not-a-uuid", "", 404, "No such subscription"},
		{"OutsideScope", berlinOnly, "POST", "/positions", positionsBody("x", [2]float64{21.01, 52.23}), 403, "spatial scope"},
		{"InsideScope", berlinOnly, "POST", "/positions", positionsBody("x", [2]float64{13.4, 52.5}), 202, ""},
		{"NoBody", full, "POST", "/positions", "", 422, "Body required"},
		{"NotJSON", full, "POST", "/positions", "{device", 422, "JSON"},
		{"EmptyBatch", full, "POST", "/positions", "[]", 422, "no position"},
		{"UnknownField", full, "POST", "/positions", `{"device":"a","time":"2026-01-01T00:00:00Z","lng":1,"lat":2,"alt":3}`, 422, "Unknown field"},
		{"MissingFields", full, "POST", "/positions", `{"device":"a"}`, 422, "Field required"},
		{"LatBeyondPole", full, "POST", "/positions", `{"device":"a","time":"2026-01-01T00:00:00Z","lng":1,"lat":91}`, 422, "between -90 and 90"},
		{"FutureTime", full, "POST", "/positions", `{"device":"a","time":"2999-01-01T00:00:00Z","lng":1,"lat":2}`, 422, "future"},
		{"BadTime", full, "POST", "/positions", `{"device":"a","time":"yesterday","lng":1,"lat":2}`, 422, "RFC 3339"},
		{"BadKind", full, "POST", "/subscriptions", `{"layer":"geofences","kinds":["roam"]}`, 422, "enter"},
		{"DwellWithoutTime", full, "POST", "/subscriptions", `{"layer":"geofences","kinds":["dwell"]}`, 422, "dwellSeconds"},
		{"BadFilter", full, "POST", "/subscriptions", `{"layer":"geofences","kinds":["enter"],"filter":"nosuch = 1"}`, 422, "nosuch"},
		{"RemoteHTTPWebhook", full, "POST", "/subscriptions", `{"layer":"geofences","kinds":["enter"],"webhook":"http://example.com/hook"}`, 422, "https"},
		{"CredentialsInWebhook", full, "POST", "/subscriptions", `{"layer":"geofences","kinds":["enter"],"webhook":"https://u:p@example.com/hook"}`, 422, "credentials"},
		{"EventsWithoutSubscription", full, "GET", "/events", "", 422, "subscription"},
		{"OtherOwnersTrack", other, "GET", "/positions?device=truck", "", 404, "No such device"},
		{"TrackWithoutDevice", full, "GET", "/positions", "", 422, "device"},
		{"BadCursor", full, "GET", "/events?subscription=" + sub.ID + "&after=x", "", 422, "cursor"},
		{"NoCredentials", eventsCaller{t: t, base: base}, "GET", "/subscriptions", "", 401, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := tc.c.do(tc.method, tc.path, tc.body)
			if status != tc.want || !strings.Contains(body, tc.detail) {
				t.Errorf("%s %s = %d %s, want %d with %q", tc.method, tc.path, status, body, tc.want, tc.detail)
			}
			if status >= 500 || strings.Contains(body, "SELECT") || strings.Contains(body, "pgx") {
				t.Errorf("answer leaks or fails: %d %s", status, body)
			}
		})
	}

	// The owner deletes its subscription: its events stop.
	if status, _ := full.do("DELETE", "/subscriptions/"+sub.ID, ""); status != 204 {
		t.Fatalf("DELETE = %d, want 204", status)
	}
	if status, _ := full.do("GET", "/events?subscription="+sub.ID, ""); status != 404 {
		t.Errorf("GET /events of a deleted subscription = %d, want 404", status)
	}
}

// TestEventsNeedAnIdentity: even where anonymous callers are granted the
// events scopes, devices and subscriptions belong to an identity, so an
// anonymous caller gets 401 with a challenge.
func TestEventsNeedAnIdentity(t *testing.T) {
	_, dbURL := testenv.DBWithURL(t)
	base, _ := startService(t, map[string]string{"DATABASE_URL": dbURL, "AUTH_ANONYMOUS_SCOPES": "events:read,positions:write"})
	for _, path := range []string{"/subscriptions", "/devices", "/positions?device=truck"} {
		code, header, body := callWith(t, "GET", base+path, "")
		if code != 401 || header.Get("WWW-Authenticate") == "" || !strings.Contains(string(body), "belong to an identity") {
			t.Errorf("anonymous GET %s = %d %q %s, want 401 with a challenge", path, code, header.Get("WWW-Authenticate"), body)
		}
	}
}

// TestDevicesPaged: GET /devices answers a page at a time by id, with
// the cursor of the next page until the last, and a bad limit is a 422.
func TestDevicesPaged(t *testing.T) {
	_, dbURL := testenv.DBWithURL(t)
	env := map[string]string{"DATABASE_URL": dbURL}
	key := "devices-" + testenv.Prefix(t)
	runCLI(t, env, "keys", "create", "--name", key, "--secret", key, "--scopes", "all")
	base, _ := startService(t, env)
	for _, d := range []string{"e", "c", "a", "d", "b"} {
		if status, _, body := call(t, "POST", base+"/positions", key, positionsBody(d, [2]float64{9.5, 50.5})); status != 202 {
			t.Fatalf("POST /positions = %d %s", status, body)
		}
	}
	var pages []string
	after := ""
	for range 5 {
		status, _, body := call(t, "GET", base+"/devices?limit=2&after="+after, key, "")
		var page struct {
			Devices []struct{ ID string }
			Next    *string
		}
		if err := json.Unmarshal(body, &page); status != 200 || err != nil {
			t.Fatalf("GET /devices after %q = %d %s", after, status, body)
		}
		var ids []string
		for _, d := range page.Devices {
			ids = append(ids, d.ID)
		}
		pages = append(pages, strings.Join(ids, ","))
		if page.Next == nil {
			break
		}
		after = *page.Next
	}
	if got, want := strings.Join(pages, " "), "a,b c,d e"; got != want {
		t.Errorf("pages of two devices: %q, want %q", got, want)
	}
	for _, bad := range []string{"0", "1001", "x"} {
		if status, _, body := call(t, "GET", base+"/devices?limit="+bad, key, ""); status != 422 || !strings.Contains(string(body), "limit") {
			t.Errorf("GET /devices?limit=%s = %d %s, want 422 naming limit", bad, status, body)
		}
	}
}
