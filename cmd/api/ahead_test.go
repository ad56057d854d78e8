package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/testenv"
)

// berlinWalk is the first page of a walk through the places in a box
// around Berlin, a few dozen of them, 7 a page.
const berlinWalk = "/collections/places/items?limit=7&bbox=13,52.3,13.8,52.7"

// walkPage asks for url and returns its feature ids, properties and next
// link (on base).
func walkPage(t *testing.T, base, url, key string) (ids []string, props []map[string]any, next string) {
	t.Helper()
	status, _, body := call(t, "GET", url, key, "")
	var p ogcPage
	if status != 200 || json.Unmarshal(body, &p) != nil {
		t.Fatalf("GET %s = %d %.300s", url, status, body)
	}
	for _, f := range p.Features {
		ids = append(ids, string(f.ID))
		props = append(props, f.Properties)
	}
	if n := p.next(); n != "" {
		next = base + n[strings.Index(n, "/collections"):]
	}
	return ids, props, next
}

// aheadCount is the count of pages read ahead with outcome at base
// ("read" for the reads ended).
func aheadCount(t *testing.T, base, outcome string) int {
	t.Helper()
	prefix := `geogate_features_pages_ahead_total{outcome="` + outcome + `"} `
	if outcome == "read" {
		prefix = "geogate_features_pages_read_ahead_total "
	}
	l := metricLine(t, base, prefix)
	if l == "" {
		return 0
	}
	n, err := strconv.ParseFloat(strings.TrimPrefix(l, prefix), 64)
	if err != nil {
		t.Fatalf("metric line %q", l)
	}
	return int(n)
}

// TestWalkIsServedFromPagesReadAhead: a client walking next links gets
// the features SQL gives, in order, each once; every page after the
// second comes from the page read ahead while it read the one before.
func TestWalkIsServedFromPagesReadAhead(t *testing.T) {
	pool, dbURL := testenv.DemoDBWithURL(t)
	base, _ := startService(t, map[string]string{"DATABASE_URL": dbURL, "RATELIMIT_FEATURES": "100000/1s"})
	want := sqlStrings(t, pool, `SELECT id::text FROM places
		WHERE ST_Intersects(geom, ST_MakeEnvelope(13, 52.3, 13.8, 52.7, 4326)) ORDER BY id`)
	if len(want) < 30 {
		t.Fatalf("SQL gave %d ids; want a few dozen", len(want))
	}
	var got []string
	pages := 0
	for next := base + berlinWalk; next != ""; pages++ {
		var ids []string
		ids, _, next = walkPage(t, base, next, "")
		got = append(got, ids...)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("walked ids differ from SQL's:\ngot  %v\nwant %v", got, want)
	}
	if served := aheadCount(t, base, "served"); served != pages-2 {
		t.Errorf("%d of %d pages served from pages read ahead, want all but the first two", served, pages)
	}
	if stale := aheadCount(t, base, "stale"); stale != 0 {
		t.Errorf("%d pages read ahead were stale with no write", stale)
	}
}

// TestPageReadAheadIsNeverOlderThanAWrite: a write that commits after the
// next page was read ahead, and before the client asks for it, is in the
// page the client gets: the page read ahead is dropped as stale.
func TestPageReadAheadIsNeverOlderThanAWrite(t *testing.T) {
	pool, dbURL := testenv.DemoDBWithURL(t)
	base, _ := startService(t, map[string]string{"DATABASE_URL": dbURL, "RATELIMIT_FEATURES": "100000/1s"})
	_, _, next := walkPage(t, base, base+berlinWalk, "")
	_, _, next = walkPage(t, base, next, "") // a walk: the third page is read ahead
	testenv.WaitFor(t, 10*time.Second, "the third page read ahead", func() bool { return aheadCount(t, base, "read") == 1 })
	var first string
	if err := pool.QueryRow(context.Background(), `SELECT id::text FROM places
		WHERE ST_Intersects(geom, ST_MakeEnvelope(13, 52.3, 13.8, 52.7, 4326)) ORDER BY id OFFSET 14 LIMIT 1`).Scan(&first); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), "UPDATE places SET name = 'renamed after the read' WHERE id = $1::bigint", first); err != nil {
		t.Fatal(err)
	}
	ids, props, _ := walkPage(t, base, next, "")
	if len(ids) == 0 || ids[0] != first || props[0]["name"] != "renamed after the read" {
		t.Fatalf("third page starts with %v %v, want feature %s renamed", ids, props, first)
	}
	if stale, served := aheadCount(t, base, "stale"), aheadCount(t, base, "served"); stale != 1 || served != 0 {
		t.Errorf("pages read ahead: %d stale, %d served; want the one stale", stale, served)
	}
}

// TestPagesReadAheadOnlyForWalks: first pages, and cursors asked for
// long after they were handed out, read nothing ahead; a page read ahead
// that nobody asks for is dropped after FEATURES_PREFETCH_KEEP, and its
// database time is charged to nobody.
func TestPagesReadAheadOnlyForWalks(t *testing.T) {
	_, dbURL := testenv.DemoDBWithURL(t)
	env := map[string]string{
		"DATABASE_URL": dbURL, "RATELIMIT_FEATURES": "100000/1s", "RATELIMIT_RATE_LIMIT": "100000/1h",
		"RATELIMIT_DATABASE": "1000000ms/1m", "FEATURES_PREFETCH_KEEP": "300ms",
	}
	key := "walker-" + testenv.Prefix(t)
	runCLI(t, env, "keys", "create", "--name", key, "--secret", key, "--scopes", "all")
	base, _ := startService(t, env)
	var later string
	for _, box := range []string{"13,52.3,13.8,52.7", "2,48.7,2.6,49", "-0.4,51.3,0.2,51.7"} {
		_, _, later = walkPage(t, base, base+"/collections/places/items?limit=5&bbox="+box, key)
	}
	_, _, next := walkPage(t, base, base+berlinWalk, key)
	_, _, _ = walkPage(t, base, next, key) // a walk: its next page is read ahead
	testenv.WaitFor(t, 10*time.Second, "the page read ahead", func() bool { return aheadCount(t, base, "read") == 1 })
	_, used := windowLimit(t, base, key, "database")
	testenv.WaitFor(t, 10*time.Second, "the page nobody asked for dropped", func() bool { return aheadCount(t, base, "unasked") == 1 })
	if _, after := windowLimit(t, base, key, "database"); after != used {
		t.Errorf("database time used went from %d to %d ms with a page read ahead and never asked for", used, after)
	}
	// A cursor handed out longer ago than the keep time is no walk.
	time.Sleep(400 * time.Millisecond) // past FEATURES_PREFETCH_KEEP of the last link handed out
	walkPage(t, base, later, key)
	if reads := aheadCount(t, base, "read"); reads != 1 {
		t.Errorf("%d pages read ahead, want only the walk's one", reads)
	}
}

// TestPageReadAheadHeldToTheCallersScopeNow: a key whose spatial scope
// is narrowed while its next page is read ahead gets the 400 of a cursor
// bound to its former scope, not the page read under it.
func TestPageReadAheadHeldToTheCallersScopeNow(t *testing.T) {
	_, dbURL := testenv.DemoDBWithURL(t)
	env := map[string]string{"DATABASE_URL": dbURL, "RATELIMIT_FEATURES": "100000/1s"}
	ops, id := "ops-"+testenv.Prefix(t), "walker-"+testenv.Prefix(t)
	runCLI(t, env, "keys", "create", "--name", ops, "--secret", ops, "--scopes", "admin")
	base, _ := startService(t, env)
	st, _, body := call(t, "POST", base+"/admin/keys", ops, `{"id":"`+id+`","scopes":["features:read"],"spatial_scope":[12,52,14,53]}`)
	var created struct{ Secret string }
	if st != 201 || json.Unmarshal(body, &created) != nil || created.Secret == "" {
		t.Fatalf("POST /admin/keys = %d %s", st, body)
	}
	key := created.Secret
	_, _, next := walkPage(t, base, base+berlinWalk, key)
	_, _, next = walkPage(t, base, next, key) // a walk: the third page is read ahead
	testenv.WaitFor(t, 10*time.Second, "the third page read ahead", func() bool { return aheadCount(t, base, "read") == 1 })
	if st, _, body := call(t, "PATCH", base+"/admin/keys/"+id, ops, `{"spatial_scope":[13.3,52.4,13.5,52.6]}`); st != 200 {
		t.Fatalf("PATCH /admin/keys = %d %s", st, body)
	}
	// A box inside the former scope and outside the new one.
	testenv.WaitFor(t, 10*time.Second, "the narrower scope in force", func() bool {
		st, _, b := call(t, "GET", base+"/collections/places/items?limit=1&bbox=13.0,52.3,13.1,52.35", key, "")
		return st == 200 && strings.Contains(string(b), `"numberReturned":0`)
	})
	if st, _, body := call(t, "GET", next, key, ""); st != 400 {
		t.Errorf("the walk's next page after the scope narrowed = %d %.300s, want 400 (a cursor of the former scope)", st, body)
	}
	if served := aheadCount(t, base, "served"); served != 0 {
		t.Errorf("%d pages read ahead served after the scope narrowed", served)
	}
}
