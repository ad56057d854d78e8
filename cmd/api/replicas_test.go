package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/paulmach/orb"
	"github.com/paulmach/orb/encoding/mvt"
	"github.com/paulmach/orb/maptile"

	"github.com/geogate/geogate/internal/testenv"
)

// TestReplicas runs the service as three OS processes on one database
// and one Redis, as three replicas would be, and hits each directly (no
// balancer): between them they hold one exact limit per API key and one
// tile cache, and a write through any of them retires the cached tile on
// all of them before it answers.
func TestReplicas(t *testing.T) {
	_, dbURL := testenv.DBWithURL(t)
	env := map[string]string{
		"DATABASE_URL":       dbURL,
		"REDIS_URL":          testenv.Getenv(t, "TEST_REDIS_URL"),
		"RATELIMIT_GEOFENCE": "30/1m",
		// Under test is the geofence policy's count. A burst of 75 at once
		// may also meet the database budget, which would refund a request
		// geofence admitted: give the budget room.
		"RATELIMIT_DATABASE":     "1000000000ms/1s",
		"RATELIMIT_TILES":        "100000/1s",
		"RATELIMIT_TILES_CACHED": "100000/1s",
		// Exactness is under test, not latency: on a loaded machine a short
		// Redis deadline would switch replicas to their local fallback,
		// and a short pool wait would turn admitted requests into 503s.
		"REDIS_TIMEOUT":      "3s",
		"DB_ACQUIRE_TIMEOUT": "10s",
		"DB_QUERY_TIMEOUT":   "10s",
	}
	procs := make([]*apiProcess, 3)
	for i := range procs {
		procs[i] = launchProcess(t, env)
	}
	bases := make([]string, len(procs))
	for i, p := range procs {
		p.waitHealthy(t)
		bases[i] = p.base
	}
	t.Run("OneLimit", func(t *testing.T) { replicasShareOneLimit(t, env, bases) })
	t.Run("OneTileCache", func(t *testing.T) { replicasShareTileCache(t, env, bases) })
	if t.Failed() {
		for i, p := range procs {
			t.Logf("replica %d logs (tail):\n%s", i, tail(p.logs.String(), 2000))
		}
	}
}

// replicasShareOneLimit fires concurrent requests for one API key at all
// replicas at once: between them they admit exactly the limit (30/1m),
// and the Redis log holds exactly that many.
func replicasShareOneLimit(t *testing.T, env map[string]string, bases []string) {
	rc := testenv.Redis(t)
	for trial := range 3 {
		id := fmt.Sprintf("rep%d-%s", trial, testenv.Prefix(t))
		secret := runCLI(t, env, "keys", "create", "--name", id, "--scopes", "proximity:read")
		if !strings.HasPrefix(secret, "gg_") {
			t.Fatalf("keys create printed %q, want a secret", secret)
		}
		const perReplica = 25
		got := burstWithin(t, bases, secret, perReplica)
		if want429 := len(bases)*perReplica - 30; got[200] != 30 || got[429] != want429 {
			t.Errorf("trial %d: statuses %v from %d replicas, want exactly 30 200s and %d 429s", trial, got, len(bases), want429)
		}
		key := "rl:geofence:key:" + id
		if n := rc.ZCard(context.Background(), key).Val(); n != 30 {
			t.Errorf("trial %d: ZCARD %s = %d, want 30", trial, key, n)
		}
	}
}

// replicasShareTileCache checks the shared tile cache and its
// invalidation. A tile rendered by replica 0 is a HIT on the others. Then,
// round after round, a fence is moved by fenceStep through replica
// round%3, and the next tile from every replica shows it at its new place
// (within fenceTolerance): the first replica asked renders it (MISS), the
// others get that render (HIT).
func replicasShareTileCache(t *testing.T, env map[string]string, bases []string) {
	const (
		z              = 8     // a tile unit is about 0.0003 deg here
		fenceSize      = 0.1   // deg
		fenceStep      = 0.05  // deg per round
		fenceTolerance = 0.003 // deg
		rounds         = 6
	)
	secret := runCLI(t, env, "keys", "create", "--name", "tiles-"+testenv.Prefix(t),
		"--scopes", "geofences:read,geofences:write,tiles:read")
	mt := maptile.At(orb.Point{13.4, 52.5}, z)
	tb := mt.Bound()
	south := tb.Min.Lat() + 0.2
	fenceAt := func(west float64) orb.Bound {
		return orb.Bound{Min: orb.Point{west, south}, Max: orb.Point{west + fenceSize, south + fenceSize}}
	}
	firstWest := tb.Min.Lon() + 0.1
	if last := fenceAt(firstWest + rounds*fenceStep); !tb.Contains(last.Min) || !tb.Contains(last.Max) {
		t.Fatalf("the fence's last place %v leaves tile %v", last, tb)
	}
	path := fmt.Sprintf("/tiles/geofences/%d/%d/%d.mvt", z, mt.X, mt.Y)

	want := fenceAt(firstWest)
	code, _, body := call(t, "POST", bases[0]+"/geofences", secret, fenceJSON(want))
	if code != http.StatusCreated {
		t.Fatalf("POST /geofences = %d %s, want 201", code, body)
	}
	var created struct{ ID int64 }
	if err := json.Unmarshal(body, &created); err != nil || created.ID == 0 {
		t.Fatalf("POST /geofences answered %s, want a fence with an id", body)
	}

	// Before any write: replica 0 renders, the others share its render.
	for i, wantCache := range []string{"MISS", "HIT", "HIT"} {
		checkFenceTile(t, bases[i], path, secret, mt, want, fenceTolerance, wantCache, fmt.Sprintf("before writes, replica %d", i))
	}
	for round := range rounds {
		writer := round % len(bases)
		want = fenceAt(firstWest + float64(round+1)*fenceStep)
		url := fmt.Sprintf("%s/geofences/%d", bases[writer], created.ID)
		if code, _, body := call(t, "PUT", url, secret, fenceJSON(want)); code != http.StatusOK {
			t.Fatalf("round %d: PUT through replica %d = %d %s, want 200", round, writer, code, body)
		}
		// Ask every replica, starting with the one after the writer.
		for k := range bases {
			i := (writer + 1 + k) % len(bases)
			wantCache := "HIT"
			if k == 0 {
				wantCache = "MISS"
			}
			what := fmt.Sprintf("round %d (written through replica %d), replica %d", round, writer, i)
			checkFenceTile(t, bases[i], path, secret, mt, want, fenceTolerance, wantCache, what)
		}
	}
}

// fenceJSON is a GeoJSON Feature named "moving" whose polygon is b.
func fenceJSON(b orb.Bound) string {
	w, s, e, n := b.Min.Lon(), b.Min.Lat(), b.Max.Lon(), b.Max.Lat()
	return fmt.Sprintf(`{"type":"Feature","properties":{"name":"moving"},"geometry":{"type":"Polygon","coordinates":[[[%g,%g],[%g,%g],[%g,%g],[%g,%g],[%g,%g]]]}}`,
		w, s, e, s, e, n, w, n, w, s)
}

// checkFenceTile fetches the tile at path from base and checks its
// X-Cache and that the fence named "moving" in it spans want, each edge
// within tol degrees.
func checkFenceTile(t *testing.T, base, path, secret string, mt maptile.Tile, want orb.Bound, tol float64, wantCache, what string) {
	t.Helper()
	code, header, body := call(t, "GET", base+path, secret, "")
	if code != http.StatusOK {
		t.Fatalf("%s: GET %s = %d %.200s, want 200", what, path, code, body)
	}
	if got := header.Get("X-Cache"); got != wantCache {
		t.Errorf("%s: X-Cache %q, want %s", what, got, wantCache)
	}
	layers, err := mvt.Unmarshal(body)
	if err != nil {
		t.Fatalf("%s: the tile does not decode: %v", what, err)
	}
	layers.ProjectToWGS84(mt)
	var found []orb.Bound
	for _, l := range layers {
		for _, f := range l.Features {
			if f.Properties["name"] == "moving" {
				found = append(found, f.Geometry.Bound())
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d features named moving in the tile, want 1", what, len(found))
	}
	got := found[0]
	if math.Abs(got.Min.Lon()-want.Min.Lon()) > tol || math.Abs(got.Max.Lon()-want.Max.Lon()) > tol ||
		math.Abs(got.Min.Lat()-want.Min.Lat()) > tol || math.Abs(got.Max.Lat()-want.Max.Lat()) > tol {
		t.Errorf("%s: the fence in the tile spans %v, want %v (within %g deg)", what, got, want, tol)
	}
}

// burstWithin fires perBase concurrent /within requests with one API key at
// each base URL at once and counts the answers by status.
func burstWithin(t *testing.T, bases []string, secret string, perBase int) map[int]int {
	t.Helper()
	var mu sync.Mutex
	got := map[int]int{}
	var wg sync.WaitGroup
	for _, base := range bases {
		for range perBase {
			wg.Go(func() {
				req, _ := http.NewRequest("GET", base+"/within?lng=13.4&lat=52.5&radius=500", nil)
				req.Header.Set("x-api-key", secret)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				mu.Lock()
				got[resp.StatusCode]++
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	return got
}
