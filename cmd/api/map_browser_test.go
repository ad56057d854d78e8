package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/testenv"
)

// mapFixtures are a few cities around Berlin and a fence over them.
const mapFixtures = `
INSERT INTO places (name, properties, geom) VALUES
  ('Berlin',  '{"country":"DE"}', ST_SetSRID(ST_MakePoint(13.41053, 52.52437), 4326)),
  ('Potsdam', '{"country":"DE"}', ST_SetSRID(ST_MakePoint(13.06566, 52.39886), 4326)),
  ('Spandau', '{"country":"DE"}', ST_SetSRID(ST_MakePoint(13.19921, 52.55214), 4326)),
  ('Sydney',  '{"country":"AU"}', ST_SetSRID(ST_MakePoint(151.20732, -33.86785), 4326));
INSERT INTO geofences (name, properties, geom) VALUES
  ('berlin-box', '{"A3":"BER"}', ST_Multi(ST_MakeEnvelope(13.0, 52.3, 13.8, 52.7, 4326)));`

// TestMapInBrowser opens the map page in Chromium, enters an API key (the
// service grants anonymous callers nothing, so the style, tiles and
// /within only work with it), finds Berlin among the rendered tile
// features, drawn from the OGC tiles of /styles/default, clicks next to it
// and finds it among the nearest cities listed.
func TestMapInBrowser(t *testing.T) {
	pool, dbURL := testenv.DBWithURL(t)
	if _, err := pool.Exec(context.Background(), mapFixtures); err != nil {
		t.Fatal(err)
	}
	const secret = "map-browser-test-secret"
	_, err := auth.NewStore(pool).Create(context.Background(), auth.CreateOptions{
		Key:    auth.Key{ID: "map", Scopes: []string{"proximity:read", "geofences:read", "tiles:read"}},
		Secret: secret,
	})
	if err != nil {
		t.Fatal(err)
	}
	// The tile policy gets a minute's window beside its second's: on a
	// busy machine the panel may first be read after the second in which
	// the tiles were drawn, which the minute's window still shows.
	served, _ := startService(t, map[string]string{"DATABASE_URL": dbURL, "AUTH_ANONYMOUS_SCOPES": "none",
		"RATELIMIT_TILES": "100/1s,6000/1m"})
	// The page is served through a proxy that notes every answer, as
	// "status path", its workers' tile requests included (the page's own
	// network events in the browser leave those out).
	base, answered := recordingProxy(t, served)
	ctx, problems := newBrowser(t, false, mapBrowser)
	dir := artifactDir(t)
	defer func() {
		for _, p := range problems() {
			t.Errorf("browser: %s", p)
		}
	}()

	err = chromedp.Do(ctx,
		signIn(base, secret),
		jumpTo(13.35, 52.5, 8),
	)
	if err != nil {
		screenshot(t, ctx, dir, "map-0-failed")
		t.Fatalf("opening the map: %v", err)
	}

	// Features as the map rendered them, not as the network carried them.
	var names []string
	deadline := time.Now().Add(60 * time.Second)
	for {
		var err error
		names, err = chromedp.Run(ctx, chromedp.Evaluate[[]string](`(geogateMap.getLayer('places-points') && geogateMap.getLayer('geofences-fill'))
			? geogateMap.queryRenderedFeatures({layers: ['places-points', 'geofences-fill']}).map(f => f.layer.id + ':' + f.properties.name)
			: []`))
		if err != nil {
			t.Fatalf("querying rendered features: %v", err)
		}
		if contains(names, "places-points:Berlin") && contains(names, "geofences-fill:berlin-box") {
			break
		}
		if time.Now().After(deadline) {
			screenshot(t, ctx, dir, "map-1-no-features")
			status, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#status")))
			t.Fatalf("after 60s the map renders %v (status %q), want Berlin and berlin-box", names, status)
		}
		time.Sleep(250 * time.Millisecond) // polling interval
	}
	screenshot(t, ctx, dir, "map-1-features")

	// The quota panel shows numbers: /rate_limit's, and the tile policies'
	// as the tiles' own RateLimit headers left them (some spent).
	var lines []string
	spent := func() bool {
		for _, l := range lines {
			if m := quotaLine.FindStringSubmatch(l); m != nil && m[1] != m[2] {
				return true
			}
		}
		return false
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		lines, err = chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#quota li')].map(li => li.dataset.window + ': ' + li.textContent)`))
		if err != nil {
			t.Fatalf("reading the quota panel: %v", err)
		}
		if spent() && slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "geofence: 10 of 10 left per 1 s") }) {
			break
		}
		if time.Now().After(deadline) {
			screenshot(t, ctx, dir, "map-1-no-quota")
			t.Fatalf("after 30s the quota panel shows %q; want the geofence policy untouched and a tile policy spent", lines)
		}
		time.Sleep(250 * time.Millisecond) // polling interval
	}

	// The map drew the style document's sources: the layers' OGC tiles,
	// fetched with the key, and no TileJSON.
	got := answered()
	for _, want := range []string{"200 /styles/default", "200 /collections/places/tiles/WebMercatorQuad/", "200 /collections/geofences/tiles/WebMercatorQuad/"} {
		if !slices.ContainsFunc(got, func(a string) bool { return strings.HasPrefix(a, want) }) {
			t.Errorf("the page got no %q answer; it got %v", want, got)
		}
	}
	if slices.ContainsFunc(got, func(a string) bool { return strings.Contains(a, " /tiles") }) {
		t.Errorf("the page asked for /tiles routes: %v", got)
	}
	source, err := chromedp.Run(ctx, chromedp.Evaluate[string](`geogateMap.getStyle().sources.places.tiles[0]`))
	if err != nil || !strings.HasSuffix(source, "/collections/places/tiles/WebMercatorQuad/{z}/{y}/{x}") {
		t.Errorf("the places source's tiles = %q (%v), want the OGC template of /styles/default", source, err)
	}

	px, err := chromedp.Run(ctx, chromedp.Evaluate[struct{ X, Y float64 }](`geogateMap.project([13.42, 52.53])`))
	if err != nil {
		t.Fatal(err)
	}
	err = chromedp.Do(ctx,
		chromedp.MouseClickXY(px.X, px.Y),
		chromedp.WaitVisible(chromedp.CSS("#nearest li")),
	)
	nearest, err2 := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#nearest")))
	screenshot(t, ctx, dir, "map-2-nearest")
	if err != nil || err2 != nil {
		t.Fatalf("clicking the map: %v %v", err, err2)
	}
	if !strings.HasPrefix(strings.TrimSpace(nearest), "Berlin") || !strings.Contains(nearest, "Spandau") || strings.Contains(nearest, "Sydney") {
		t.Errorf("nearest cities = %q, want Berlin first, then Spandau, no Sydney", nearest)
	}
}

// quotaLine is a window of a tile policy in the quota panel: remaining
// of limit.
var quotaLine = regexp.MustCompile(`^tiles(?:-cached)?(?:-1m)?: (\d+) of (\d+) left`)

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// recordingProxy serves target through a proxy that keeps the Host its
// clients send (URLs the service builds point back at the proxy) and
// returns the proxy's URL and a func listing its answers so far as
// "status path".
func recordingProxy(t *testing.T, target string) (string, func() []string) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var answers []string
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(resp *http.Response) error {
		mu.Lock()
		answers = append(answers, fmt.Sprintf("%d %s", resp.StatusCode, resp.Request.URL.Path))
		mu.Unlock()
		return nil
	}
	front := httptest.NewServer(rp)
	t.Cleanup(front.Close)
	return front.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(answers)
	}
}

// TestMapShowsTileRefusals: with tile budgets too small for one view, the
// map's quota panel says plainly that tiles were refused, and why.
func TestMapShowsTileRefusals(t *testing.T) {
	pool, dbURL := testenv.DBWithURL(t)
	if _, err := pool.Exec(context.Background(), mapFixtures); err != nil {
		t.Fatal(err)
	}
	const secret = "map-refusal-test-secret"
	_, err := auth.NewStore(pool).Create(context.Background(), auth.CreateOptions{
		// Its own id per run: the windows are an hour long and outlive
		// the test in the shared test Redis.
		Key:    auth.Key{ID: "map-refused-" + testenv.Prefix(t), Scopes: []string{"tiles:read"}},
		Secret: secret,
	})
	if err != nil {
		t.Fatal(err)
	}
	// The style costs one unit of tiles-cached; two renders at most.
	base, _ := startService(t, map[string]string{"DATABASE_URL": dbURL, "AUTH_ANONYMOUS_SCOPES": "none",
		"RATELIMIT_TILES": "2/1h", "RATELIMIT_TILES_CACHED": "3/1h"})
	ctx, problems := newBrowser(t, false, mapBrowser)
	dir := artifactDir(t)
	defer func() {
		for _, p := range problems() {
			t.Errorf("browser: %s", p)
		}
	}()
	err = chromedp.Do(ctx,
		signIn(base, secret),
	)
	if err != nil {
		t.Fatalf("opening the map: %v", err)
	}
	var note string
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(note, "Tiles refused (429)") {
		if time.Now().After(deadline) {
			screenshot(t, ctx, dir, "refused-0-no-note")
			t.Fatalf("after 60s the quota note says %q, want tiles refused", note)
		}
		time.Sleep(250 * time.Millisecond) // polling interval
		if note, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#quota-note"))); err != nil {
			t.Fatal(err)
		}
	}
	screenshot(t, ctx, dir, "refused-1-note")
	if !strings.Contains(note, "tiles") || !strings.Contains(note, "Retry in") {
		t.Errorf("quota note %q, want the refusing policy and when to retry", note)
	}
	panel, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#quota li.out')].map(li => li.dataset.window)`))
	if err != nil || len(panel) == 0 {
		t.Errorf("no window shown as spent (%v): %v", err, panel)
	}
}

// signIn opens the map page at base and gives it the API key secret.
func signIn(base, secret string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		return chromedp.Do(ctx,
			chromedp.Navigate(base+"/"),
			chromedp.WaitVisible(chromedp.CSS("#apikey")),
			chromedp.SendKeys(chromedp.CSS("#apikey"), secret),
			chromedp.Click(chromedp.CSS("#keyform button")),
		)
	})
}

// jumpTo moves the map page's map to lng, lat at zoom.
func jumpTo(lng, lat float64, zoom int) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`(geogateMap.jumpTo({center: [%g, %g], zoom: %d}), true)`, lng, lat, zoom)))
		return err
	})
}
