package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/geogate/geogate/internal/testenv"
)

// TestWritesTellWatchedExits changes and deletes, through OGC API
// Features Part 4, the fences of a layer that subscriptions watch, with a
// device inside each: every write that leaves the device outside a fence
// (moved away, deleted, or no longer passing a subscription's filter)
// commits the device's exit with it, named by its cause, and a write that
// still holds it tells nothing. The layer has a subdivided copy, so the
// containment read in the writing transaction is the copy's, cut by its
// trigger.
func TestWritesTellWatchedExits(t *testing.T) {
	pool, dbURL := testenv.DemoDBWithURL(t)
	ctx := context.Background()
	for _, sql := range []string{
		`CREATE TABLE public.watch_zones (id int PRIMARY KEY, kind text NOT NULL, geom geometry(Polygon, 4326) NOT NULL)`,
		`CREATE INDEX ON public.watch_zones USING gist (geom)`,
		`INSERT INTO public.watch_zones SELECT i, 'depot', ST_MakeEnvelope(13.3, 52.4, 13.5, 52.6, 4326) FROM generate_series(1, 4) i`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(t.TempDir(), "layers.yaml")
	if err := os.WriteFile(file, []byte("layers:\n  watch_zones:\n    write: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"DATABASE_URL": dbURL, "LAYERS_CONFIG": file, "AUTH_ANONYMOUS_SCOPES": "none"}
	runCLI(t, env, "publish", "--contains", "watch_zones")
	key := strings.TrimSpace(runCLI(t, env, "keys", "create", "--name", "watch-"+testenv.Prefix(t), "--scopes", "all"))
	base, _ := startService(t, env)
	c := eventsCaller{t: t, base: base, key: key}

	subscribe := func(body string) string {
		status, got := c.do("POST", "/subscriptions", body)
		var sub struct{ ID string }
		if err := json.Unmarshal([]byte(got), &sub); status != 201 || err != nil {
			t.Fatalf("POST /subscriptions %s = %d %s", body, status, got)
		}
		return sub.ID
	}
	every := subscribe(`{"layer":"watch_zones","kinds":["enter","exit"]}`)
	depots := subscribe(`{"layer":"watch_zones","kinds":["exit"],"filter":"kind = 'depot'"}`)
	report := func(want string) {
		t.Helper()
		if status, got := c.do("POST", "/positions", positionsBody("van", [2]float64{13.4, 52.5})); status != 202 || !strings.Contains(got, want) {
			t.Fatalf("POST /positions = %d %s, want 202 with %s", status, got, want)
		}
	}
	report(`"events":4`) // four enters, for the subscription that asks for them

	items := base + "/collections/watch_zones/items/"
	writes := []struct{ method, fid, body string }{
		{"PATCH", "1", `{"geometry":{"type":"Polygon","coordinates":[[[13.6,52.4],[13.7,52.4],[13.7,52.6],[13.6,52.6],[13.6,52.4]]]}}`},
		{"DELETE", "2", ""},
		{"PATCH", "3", `{"properties":{"kind":"office"}}`},
		// Smaller, still holding the van: no exit.
		{"PUT", "4", `{"type":"Feature","geometry":{"type":"Polygon","coordinates":[[[13.35,52.45],[13.45,52.45],[13.45,52.55],[13.35,52.55],[13.35,52.45]]]},"properties":{"kind":"depot"}}`},
	}
	for _, w := range writes {
		if code, body, _ := send(t, w.method, items+w.fid, key, w.body); code != 204 {
			t.Fatalf("%s %s: %d %s, want 204", w.method, w.fid, code, body)
		}
	}
	// The van reports from where it was: it is told nothing again.
	report(`"events":0`)

	if got, want := exitsOf(t, c, every), []string{"exit 1 fence-changed", "exit 2 fence-deleted"}; !slices.Equal(got, want) {
		t.Errorf("exits of the subscription to every zone = %v, want %v", got, want)
	}
	if got, want := exitsOf(t, c, depots), []string{"exit 1 fence-changed", "exit 2 fence-deleted", "exit 3 fence-changed"}; !slices.Equal(got, want) {
		t.Errorf("exits of the subscription to depots = %v, want %v", got, want)
	}
}

// exitsOf lists the exits pulled from subscription sub, in order, as
// "exit <fence> <cause>".
func exitsOf(t *testing.T, c eventsCaller, sub string) []string {
	t.Helper()
	var out []string
	for _, e := range pulled(t, c, sub) {
		if e.Kind == "exit" {
			out = append(out, e.Kind+" "+e.Fence+" "+e.Cause)
		}
	}
	return out
}
