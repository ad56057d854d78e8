package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/testenv"
)

// TestMapDevicesInBrowser turns on the map's devices layer: the device
// reported before shows on the map and its enter event in the list, with
// the fence's name; a position reported while the page is open moves the
// device and its exit arrives through the live stream.
func TestMapDevicesInBrowser(t *testing.T) {
	pool, dbURL := testenv.DBWithURL(t)
	if _, err := pool.Exec(context.Background(), mapFixtures); err != nil {
		t.Fatal(err)
	}
	const secret = "devices-browser-test-secret"
	_, err := auth.NewStore(pool).Create(context.Background(), auth.CreateOptions{
		Key: auth.Key{ID: "devmap", Scopes: []string{"proximity:read", "geofences:read", "tiles:read",
			"positions:write", "events:read", "events:write"}},
		Secret: secret,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Straight to the service: the contract proxy reads whole answers,
	// and a stream never ends.
	base, _, _ := startServiceWithStop(t, map[string]string{"DATABASE_URL": dbURL, "AUTH_ANONYMOUS_SCOPES": "none"})
	if status, _, body := call(t, "POST", base+"/subscriptions", secret, `{"layer":"geofences","kinds":["enter","exit"]}`); status != 201 {
		t.Fatalf("POST /subscriptions = %d %s", status, body)
	}
	report := func(lng float64) {
		t.Helper()
		p := fmt.Sprintf(`{"device":"van","time":%q,"lng":%v,"lat":52.5}`, time.Now().UTC().Format(time.RFC3339Nano), lng)
		if status, _, body := call(t, "POST", base+"/positions", secret, p); status != 202 {
			t.Fatalf("POST /positions = %d %s", status, body)
		}
	}
	report(13.4) // inside berlin-box

	ctx, problems := newBrowser(t, false, mapBrowser)
	dir := artifactDir(t)
	defer func() {
		for _, p := range problems() {
			t.Errorf("browser: %s", p)
		}
	}()
	// The layer list fills in above the toggle once the key's style
	// arrives and pushes it down: a click measured before that lands
	// beside it. Wait for the list, then for the box to be ticked.
	opening, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	err = chromedp.Do(opening,
		signIn(base, secret),
		chromedp.WaitVisible(chromedp.CSS("#layers li")),
		jumpTo(13.8, 52.5, 7),
		chromedp.Click(chromedp.CSS("#devices-toggle")),
		chromedp.WaitReady(chromedp.CSS("#devices-toggle:checked")),
	)
	if err != nil {
		screenshot(t, ctx, dir, "devices-0-failed")
		t.Fatalf("opening the map: %v", err)
	}

	// waitFor polls the page's state (js, a string) until want holds.
	waitFor := func(what, js string, want func(string) bool) string {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			got, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if want(got) {
				return got
			}
			if time.Now().After(deadline) {
				screenshot(t, ctx, dir, "devices-failed")
				status, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#devices-status")))
				t.Fatalf("after 60s, %s: %q (status %q)", what, got, status)
			}
			time.Sleep(250 * time.Millisecond) // polling interval
		}
	}
	const events = `[...document.querySelectorAll('#events li')].map(li => li.textContent).join('\n')`
	const vanAt = `(geogateMap.getLayer('devices-points') ? geogateMap.queryRenderedFeatures({layers: ['devices-points']}) : [])
		.filter(f => f.properties.id === 'van').map(f => f.geometry.coordinates[0].toFixed(1)).join(',')`

	waitFor("the enter event in the list", events, func(s string) bool { return strings.Contains(s, "van enter berlin-box") })
	waitFor("the van on the map", vanAt, func(s string) bool { return s == "13.4" })
	screenshot(t, ctx, dir, "devices-1-inside")

	report(14.5) // out of the box, while the page follows the stream
	got := waitFor("the exit event, first in the list", events, func(s string) bool { return strings.Contains(s, "van exit berlin-box") })
	if !strings.Contains(strings.SplitN(got, "\n", 2)[0], "exit") {
		t.Errorf("events listed %q, want the newest (exit) first", got)
	}
	waitFor("the van moved on the map", vanAt, func(s string) bool { return s == "14.5" })
	screenshot(t, ctx, dir, "devices-2-outside")
}
