package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/geogate/geogate/internal/testenv"
)

// replicaCatchUp bounds the waits for the shared test replica to be
// within its lag bound. It also replays every other package's test
// databases (each a copy of a PostGIS template), so while they run on
// these 2 cores it can be seconds behind; a wait for it to catch up
// must outlast that, though it ends as soon as it has.
const replicaCatchUp = 60 * time.Second

// replicaEnv is the configuration of services that read from the test
// replica of dbURL's database.
func replicaEnv(t *testing.T, dbURL string) map[string]string {
	return map[string]string{
		"DATABASE_URL":          dbURL,
		"DATABASE_REPLICA_URLS": testenv.ReplicaURL(t, dbURL),
		// Long enough that a paused replica keeps getting reads for the
		// whole test: what it serves is then known to be old.
		"DB_REPLICA_MAX_LAG":    "60s",
		"AUTH_ANONYMOUS_SCOPES": "none",
		"RATELIMIT_GEOFENCE":    "100000/1s",
	}
}

// replicaReads is how many reads service base sent to replicas.
func replicaReads(t *testing.T, base string) string {
	return metricLine(t, base, "geogate_db_replica_reads_total")
}

// TestReadYourWritesOnReplica pauses the replica's replay, then has one
// caller create a fence through one geogate replica: that caller's next
// reads, through either geogate replica, see it (they go where the write
// has been replayed: the primary), while another caller's reads, served by
// the paused replica, still see the world without it, until replay
// resumes.
func TestReadYourWritesOnReplica(t *testing.T) {
	// First: a paused replica replays no other test's new database.
	pause, resume := testenv.HoldReplica(t)
	_, dbURL := testenv.DBWithURL(t)
	env := replicaEnv(t, dbURL)
	writer, other := "writer-"+testenv.Prefix(t), "other-"+testenv.Prefix(t)
	for _, k := range []string{writer, other} {
		runCLI(t, env, "keys", "create", "--name", k, "--secret", k, "--scopes", "geofences:read,geofences:write,proximity:read,tiles:read")
	}
	bases := []string{"", ""}
	for i := range bases {
		bases[i], _ = startService(t, env)
	}
	testenv.WaitFor(t, replicaCatchUp, "the replica healthy on both services", func() bool {
		for _, b := range bases {
			st, _, body := call(t, "GET", b+"/readyz", "", "")
			if st != http.StatusOK || !strings.Contains(string(body), `"healthy":true`) {
				return false
			}
		}
		return true
	})
	pause()
	const fence = `{"type":"Feature","properties":{"name":"paused"},"geometry":{"type":"Polygon","coordinates":[[[13.3,52.4],[13.5,52.4],[13.5,52.6],[13.3,52.6],[13.3,52.4]]]}}`
	st, _, body := call(t, "POST", bases[0]+"/geofences", writer, fence)
	var created struct{ ID int64 }
	if err := json.Unmarshal(body, &created); st != http.StatusCreated || err != nil {
		t.Fatalf("POST /geofences = %d %s", st, body)
	}
	one := fmt.Sprintf("/geofences/%d", created.ID)
	contains := "/geofences/contains?lng=13.4&lat=52.5"
	within := "/within?layer=geofences&lng=13.4&lat=52.5&radius=100"
	tile := "/tiles/geofences/4/8/5.mvt"
	for i, b := range bases {
		if st, _, body := call(t, "GET", b+one, writer, ""); st != http.StatusOK {
			t.Errorf("the writer's GET %s on service %d = %d %s, want its fence", one, i, st, body)
		}
		for _, path := range []string{contains, within, tile} {
			if st, _, body := call(t, "GET", b+path, writer, ""); st != http.StatusOK || !strings.Contains(string(body), "paused") {
				t.Errorf("the writer's GET %s on service %d = %d %.300s, want its fence", path, i, st, body)
			}
		}
	}
	before := replicaReads(t, bases[1])
	for i, b := range bases {
		if st, _, body := call(t, "GET", b+one, other, ""); st != http.StatusNotFound {
			t.Errorf("another caller's GET %s on service %d while replay is paused = %d %s, want 404 (the replica's older data)", one, i, st, body)
		}
		for _, path := range []string{contains, within} {
			if _, _, body := call(t, "GET", b+path, other, ""); strings.Contains(string(body), "paused") {
				t.Errorf("another caller's GET %s on service %d while replay is paused = %.300s, want no fence yet", path, i, body)
			}
		}
	}
	if after := replicaReads(t, bases[1]); after == before {
		t.Errorf("the other caller's reads did not reach the replica: %q", after)
	}
	resume()
	for i, b := range bases {
		testenv.WaitFor(t, 10*time.Second, fmt.Sprintf("the other caller seeing the fence on service %d", i), func() bool {
			st, _, _ := call(t, "GET", b+one, other, "")
			return st == http.StatusOK
		})
	}
}

// TestReplicaLagTurnsReadsAway: with replay paused and the primary
// moving on, a replica whose data grows older than DB_REPLICA_MAX_LAG stops
// getting reads (they go to the primary and see everything), /readyz says
// why while staying ready, and once replay resumes it gets reads again.
func TestReplicaLagTurnsReadsAway(t *testing.T) {
	pause, resume := testenv.HoldReplica(t)
	pool, dbURL := testenv.DBWithURL(t)
	env := replicaEnv(t, dbURL)
	env["DB_REPLICA_MAX_LAG"] = "1s"
	reader := "reader-" + testenv.Prefix(t)
	runCLI(t, env, "keys", "create", "--name", reader, "--secret", reader, "--scopes", "geofences:read")
	base, _ := startService(t, env)
	state := func() string {
		_, _, body := call(t, "GET", base+"/readyz", "", "")
		return string(body)
	}
	testenv.WaitFor(t, replicaCatchUp, "the replica healthy", func() bool { return strings.Contains(state(), `"healthy":true`) })
	pause()
	// A write by plain SQL: nobody's read floor, only the lag bound.
	if _, err := pool.Exec(t.Context(), `INSERT INTO geofences (name, geom) VALUES ('sql', ST_GeomFromText('MULTIPOLYGON(((0 0,1 0,1 1,0 1,0 0)))', 4326))`); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 5*time.Second, "the lagging replica turned away", func() bool {
		s := state()
		return strings.Contains(s, "lag above DB_REPLICA_MAX_LAG") && strings.Contains(s, `"status":"ok"`)
	})
	if _, _, body := call(t, "GET", base+"/geofences/contains?lng=0.5&lat=0.5", reader, ""); !strings.Contains(string(body), `"sql"`) {
		t.Errorf("a read while the replica lags = %s, want the primary's data", body)
	}
	resume()
	testenv.WaitFor(t, replicaCatchUp, "the replica healthy again", func() bool { return strings.Contains(state(), `"healthy":true`) })
}

// TestTileNeverOlderThanItsVersionOnReplica changes a published table with
// plain SQL while the replica's replay is paused: the tile, once geogate
// knows the layer's new version, is drawn from data that includes the
// change (the paused replica's drawing is refused and the tile drawn on
// the primary), and what the cache then holds under the new version is
// that tile, never the old one.
func TestTileNeverOlderThanItsVersionOnReplica(t *testing.T) {
	pause, resume := testenv.HoldReplica(t)
	pool, dbURL := placesDB(t)
	env := replicaEnv(t, dbURL)
	delete(env, "AUTH_ANONYMOUS_SCOPES")
	base, _ := startService(t, env)
	testenv.WaitFor(t, replicaCatchUp, "the replica healthy", func() bool {
		_, _, body := call(t, "GET", base+"/readyz", "", "")
		return strings.Contains(string(body), `"healthy":true`)
	})
	const tile = "/tiles/places/4/8/5.mvt"
	if st, _, body := call(t, "GET", base+tile, "", ""); st != http.StatusOK || !strings.Contains(string(body), "p1") {
		t.Fatalf("GET %s = %d, want the tile with p1", tile, st)
	}
	pause()
	if _, err := pool.Exec(t.Context(), "UPDATE places SET name = 'renamed' WHERE name = 'p1'"); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the tile with the change", func() bool {
		_, _, body := call(t, "GET", base+tile, "", "")
		return strings.Contains(string(body), "renamed")
	})
	for range 3 {
		st, h, body := call(t, "GET", base+tile, "", "")
		if st != http.StatusOK || h.Get("X-Cache") != "HIT" || !strings.Contains(string(body), "renamed") || strings.Contains(string(body), "p1") {
			t.Fatalf("GET %s after the change = %d %s, renamed %v; want the cached new tile", tile, st, h.Get("X-Cache"), strings.Contains(string(body), "renamed"))
		}
	}
	if got := metricLine(t, base, "geogate_tiles_replica_stale_renders_total"); got == "" || strings.HasSuffix(got, " 0") {
		t.Errorf("stale renders = %q, want the paused replica's drawing refused at least once", got)
	}
	resume()
}

// TestReplicaCrashAndPromotion crashes a private replica under a steady
// load of reads: reads already running on it are the only ones that may
// fail (at most the workers' count, and none in practice: a read that
// finds it gone before its statement was sent runs on the primary), every
// read from a second after the crash on is a 200 from the primary, and the
// replica gets reads again once it is back. Then the primary is stopped
// and the replica promoted: it is no standby any more and gets no reads,
// and writes resume once DATABASE_URL points at it.
func TestReplicaCrashAndPromotion(t *testing.T) {
	primary := testenv.StartPostgres(t)
	replica := primary.StartReplica(t)
	env := map[string]string{
		"DATABASE_URL": primary.URL(), "DATABASE_REPLICA_URLS": replica.URL(),
		"DB_REPLICA_MAX_LAG": "2s", "DB_REPLICA_CHECK": "100ms", "RATELIMIT_GEOFENCE": "100000/1s",
		// Statements cut off by the crash count as database time; the
		// recovery is under test, not the budget.
		"RATELIMIT_DATABASE": "1000000000ms/1s",
	}
	base, _ := startService(t, env)
	healthy := func() bool {
		_, _, body := call(t, "GET", base+"/readyz", "", "")
		return strings.Contains(string(body), `"healthy":true`)
	}
	testenv.WaitFor(t, replicaCatchUp, "the replica healthy", healthy)

	const workers = 4
	type answer struct {
		at     time.Time
		status int
	}
	var mu sync.Mutex
	var answers []answer
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			client := &http.Client{Timeout: 10 * time.Second}
			for {
				select {
				case <-stop:
					return
				default:
				}
				st := 0
				if resp, err := client.Get(base + "/geofences?limit=1"); err == nil {
					st = resp.StatusCode
					resp.Body.Close()
				}
				mu.Lock()
				answers = append(answers, answer{time.Now(), st})
				mu.Unlock()
			}
		})
	}
	time.Sleep(500 * time.Millisecond) // load before the crash
	crashed := time.Now()
	replica.Crash()
	testenv.WaitFor(t, 5*time.Second, "the replica seen down", func() bool { return !healthy() })
	time.Sleep(1500 * time.Millisecond) // load after the crash
	close(stop)
	wg.Wait()
	failed, late := 0, 0
	for _, a := range answers {
		if a.status != http.StatusOK {
			failed++
			if a.at.After(crashed.Add(time.Second)) {
				late++
			}
		}
	}
	t.Logf("%d reads around the crash, %d failed", len(answers), failed)
	if failed > workers || late > 0 {
		t.Errorf("of %d reads around the crash, %d failed (%d more than a second after it); want at most %d, none late", len(answers), failed, late, workers)
	}

	if err := replica.Start(); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 20*time.Second, "the replica back", healthy)
	before := replicaReads(t, base)
	for range 5 {
		call(t, "GET", base+"/geofences?limit=1", "", "")
	}
	if after := replicaReads(t, base); after == before {
		t.Errorf("reads did not return to the replica: %q", after)
	}

	primary.Stop()
	conn, err := pgx.Connect(t.Context(), replica.URL())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), "SELECT pg_promote()"); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(t.Context())
	testenv.WaitFor(t, 10*time.Second, "the promoted replica turned away", func() bool {
		_, _, body := call(t, "GET", base+"/readyz", "", "")
		return strings.Contains(string(body), "not a standby in recovery")
	})
	env["DATABASE_URL"], env["DATABASE_REPLICA_URLS"] = replica.URL(), ""
	runCLI(t, env, "keys", "create", "--name", "after", "--secret", "after", "--scopes", "geofences:write")
	promoted, _ := startService(t, env)
	const fence = `{"type":"Feature","properties":{"name":"after"},"geometry":{"type":"Polygon","coordinates":[[[1,1],[2,1],[2,2],[1,2],[1,1]]]}}`
	if st, _, body := call(t, "POST", promoted+"/geofences", "after", fence); st != http.StatusCreated {
		t.Errorf("a write on the promoted replica = %d %s, want 201", st, body)
	}
}

// TestKeyChangesOnPausedReplica looks keys up on a replica, and pauses its
// replay: a key revoked through one service is refused by both within a
// second, and a key created meanwhile works on both at once, although the
// replica knows neither change (key look-ups after a change go where the
// change has been replayed).
func TestKeyChangesOnPausedReplica(t *testing.T) {
	pause, _ := testenv.HoldReplica(t)
	_, dbURL := testenv.DBWithURL(t)
	env := replicaEnv(t, dbURL)
	env["API_KEY_CACHE_TTL"] = "1h"
	ops, target := "ops-"+testenv.Prefix(t), "target-"+testenv.Prefix(t)
	runCLI(t, env, "keys", "create", "--name", ops, "--secret", ops, "--scopes", "admin")
	runCLI(t, env, "keys", "create", "--name", target, "--secret", target, "--scopes", "geofences:read")
	bases := []string{"", ""}
	for i := range bases {
		bases[i], _ = startService(t, env)
	}
	status := func(i int, key string) int {
		st, _, _ := call(t, "GET", bases[i]+"/geofences?limit=1", key, "")
		return st
	}
	for i := range bases {
		testenv.WaitFor(t, 10*time.Second, fmt.Sprintf("service %d reading the key on a healthy replica", i), func() bool {
			_, _, body := call(t, "GET", bases[i]+"/readyz", "", "")
			return strings.Contains(string(body), `"healthy":true`) && status(i, target) == http.StatusOK
		})
	}
	pause()
	if st, _, body := call(t, "DELETE", bases[0]+"/admin/keys/"+target, ops, ""); st != http.StatusOK {
		t.Fatalf("revoke = %d %s", st, body)
	}
	st, _, body := call(t, "POST", bases[1]+"/admin/keys", ops, `{"id":"fresh-`+testenv.Prefix(t)+`","scopes":["geofences:read"]}`)
	var created struct{ Secret string }
	if err := json.Unmarshal(body, &created); st != http.StatusCreated || err != nil {
		t.Fatalf("create = %d %s", st, body)
	}
	for i := range bases {
		testenv.WaitFor(t, time.Second, fmt.Sprintf("service %d refusing the revoked key", i), func() bool {
			return status(i, target) == http.StatusUnauthorized
		})
		if got := status(i, created.Secret); got != http.StatusOK {
			t.Errorf("service %d: the key created while replay is paused = %d, want 200", i, got)
		}
	}
}
