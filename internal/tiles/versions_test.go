package tiles

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/paulmach/orb"
	"github.com/paulmach/orb/encoding/mvt"
	"github.com/redis/go-redis/v9"

	"github.com/geogate/geogate/internal/testenv"
)

// fenceBound returns the WGS84 bounds of feature name in a geofences tile.
func fenceBound(t *testing.T, ls mvt.Layers, name string) (orb.Bound, bool) {
	t.Helper()
	for _, l := range ls {
		for _, f := range l.Features {
			if f.Properties["name"] == name {
				return f.Geometry.Bound(), true
			}
		}
	}
	return orb.Bound{}, false
}

func near(a, b float64) bool { return math.Abs(a-b) < 0.01 }

// moveBerlinBox is a write route's handler: it commits berlin-box as a
// half-degree box whose west edge is the :west parameter.
func moveBerlinBox(db *pgxpool.Pool, committed func(context.Context) error) gin.HandlerFunc {
	return func(c *gin.Context) {
		var west float64
		fmt.Sscan(c.Param("west"), &west)
		_, err := db.Exec(c.Request.Context(),
			"UPDATE geofences SET geom = ST_Multi(ST_MakeEnvelope($1::float8, 52.3, $1::float8 + 0.5, 52.7, 4326)) WHERE name = 'berlin-box'", west)
		if err != nil {
			c.AbortWithStatus(500)
			return
		}
		if err := committed(c.Request.Context()); err != nil {
			c.AbortWithStatus(500)
			return
		}
		c.Status(http.StatusNoContent)
	}
}

// TestWriteThenReadEveryReplica moves a fence through a write route on one
// replica and reads its tile from the others straight after the answer:
// every read must show the new geometry, never a cached older one.
func TestWriteThenReadEveryReplica(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t)
	rdb := testenv.Redis(t)
	// A window long enough that a write answering without waiting it out
	// would leave the warmed replicas serving their memory copies.
	const window = 150 * time.Millisecond
	replicas := make([]replica, 3)
	for i := range replicas {
		// The default key prefix; the database id in every key keeps this
		// test's keys apart from others'.
		replicas[i] = newReplica(t, db, rdb, "", replicaOptions{}, withWindow(window))
		// Without NOTIFY, a reader learns of the write through Redis only.
		replicas[i].stop()
	}
	// The write routes, as the geofence API wires them: a handler that
	// commits the change and then calls Commit, on two different replicas.
	writer := gin.New()
	writer.PUT("/a/:west", moveBerlinBox(db, replicas[0].svc.Commit))
	writer.PUT("/b/:west", moveBerlinBox(db, replicas[1].svc.Commit))
	tl := tileOf(13.41, 52.52, 6)
	path := tilePath("geofences", tl)
	for round := range 15 {
		// Warm every replica's view of the tile at the current version.
		for _, rp := range replicas {
			rp.get(t, path)
		}
		west := 12.6 + float64(round%5)*0.1 + float64(round)*0.001
		w := httptest.NewRecorder()
		route := []string{"a", "b"}[round%2]
		start := time.Now()
		writer.ServeHTTP(w, httptest.NewRequest(http.MethodPut, fmt.Sprintf("/%s/%v", route, west), nil))
		if w.Code != http.StatusNoContent {
			t.Fatalf("write = %d", w.Code)
		}
		if took := time.Since(start); took < window {
			t.Fatalf("write answered after %v, before the version window (%v) passed", took, window)
		}
		for i, rp := range replicas {
			r := rp.get(t, path)
			b, ok := fenceBound(t, decode(t, r.Body.Bytes(), tl), "berlin-box")
			if !ok || !near(b.Min[0], west) {
				t.Fatalf("round %d replica %d (%s): berlin-box west edge = %v (found %v), want %v", round, i, r.Header().Get("X-Cache"), b.Min[0], ok, west)
			}
		}
	}
}

// TestWriteOutwaitsMemoryCopies: a replica that does not hear NOTIFY (its
// listener is stopped, as when its connection is slow or broken) and has
// just vouched for its memory copy still serves the new tile once a write
// on another replica has answered: the write waited out the version window.
func TestWriteOutwaitsMemoryCopies(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t)
	rdb := testenv.Redis(t)
	const window = 300 * time.Millisecond
	reader := newReplica(t, db, rdb, "", replicaOptions{}, withWindow(window))
	writer := newReplica(t, db, rdb, "", replicaOptions{}, withWindow(window))
	reader.stop()
	routes := gin.New()
	routes.PUT("/:west", moveBerlinBox(db, writer.svc.Commit))
	tl := tileOf(13.41, 52.52, 6)
	path := tilePath("geofences", tl)
	for round := range 3 {
		reader.get(t, path)
		if w := reader.get(t, path); w.Header().Get("X-Cache") != "HIT" {
			t.Fatalf("round %d: warm GET = %s, want HIT", round, w.Header().Get("X-Cache"))
		}
		west := 12.7 + float64(round)*0.1
		w := httptest.NewRecorder()
		routes.ServeHTTP(w, httptest.NewRequest(http.MethodPut, fmt.Sprintf("/%v", west), nil))
		if w.Code != http.StatusNoContent {
			t.Fatalf("write = %d", w.Code)
		}
		r := reader.get(t, path)
		b, ok := fenceBound(t, decode(t, r.Body.Bytes(), tl), "berlin-box")
		if !ok || !near(b.Min[0], west) {
			t.Fatalf("round %d (%s): berlin-box west edge = %v (found %v), want %v", round, r.Header().Get("X-Cache"), b.Min[0], ok, west)
		}
	}
}

// TestVersionCheckCountsFromItsSending: a read of the shared version
// vouches from the moment it was sent, not from when its answer came. The
// reader's read of the old version is held up in its client, after Redis
// answered it, while a write on another replica publishes, waits the
// window out and answers; the reader's next tile must not rest on that
// held-up read.
func TestVersionCheckCountsFromItsSending(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t)
	const window = 200 * time.Millisecond
	slow := testenv.Redis(t)
	var hold atomic.Bool
	held, release := make(chan struct{}, 1), make(chan struct{})
	releaseHeld := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseHeld) // should the test end early
	slow.AddHook(slowVersionReads{hold: &hold, held: held, release: release})
	reader := newReplica(t, db, slow, "", replicaOptions{}, withWindow(window))
	writer := newReplica(t, db, testenv.Redis(t), "", replicaOptions{}, withWindow(window))
	reader.stop()
	routes := gin.New()
	routes.PUT("/:west", moveBerlinBox(db, writer.svc.Commit))
	tl := tileOf(13.41, 52.52, 6)
	path := tilePath("geofences", tl)
	reader.get(t, path)
	if w := reader.get(t, path); w.Header().Get("X-Cache") != "HIT" {
		t.Fatalf("warm GET = %s, want HIT", w.Header().Get("X-Cache"))
	}
	// The warm read no longer vouches: the next GET reads the version.
	v := reader.svc.versions
	testenv.WaitFor(t, 10*time.Second, "the warm read to stop vouching for the memory copy", func() bool {
		return !v.current("public.geofences", v.Local("public.geofences"))
	})
	hold.Store(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		reader.get(t, path) // reads the old version; its answer is held up
	}()
	// The reader's read has been answered by Redis with the old version
	// and is now held up in its client.
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the reader's version read never reached Redis")
	}
	w := httptest.NewRecorder()
	routes.ServeHTTP(w, httptest.NewRequest(http.MethodPut, "/12.9", nil))
	if w.Code != http.StatusNoContent {
		t.Fatalf("write = %d", w.Code)
	}
	// Only now, after the write has answered, does the held-up answer
	// reach the reader.
	hold.Store(false)
	releaseHeld()
	<-done
	r := reader.get(t, path)
	b, ok := fenceBound(t, decode(t, r.Body.Bytes(), tl), "berlin-box")
	if !ok || !near(b.Min[0], 12.9) {
		t.Errorf("after the write answered (%s): berlin-box west edge = %v (found %v), want 12.9", r.Header().Get("X-Cache"), b.Min[0], ok)
	}
}

// slowVersionReads holds up the answer of each plain GET of a tile version
// key while hold is set: once Redis has answered, it says so on held (if
// there is room) and keeps the answer until release is closed.
type slowVersionReads struct {
	hold    *atomic.Bool
	held    chan<- struct{}
	release <-chan struct{}
}

func (h slowVersionReads) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h slowVersionReads) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if args := cmd.Args(); h.hold.Load() && cmd.Name() == "get" && len(args) == 2 && strings.Contains(fmt.Sprint(args[1]), ":v:") {
			select {
			case h.held <- struct{}{}:
			default:
			}
			<-h.release
		}
		return err
	}
}

func (h slowVersionReads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestCurrentNeedsARecentCheckAtOrBelowTheVersion: a version read vouches
// only for versions at or above what it found, and only within the window
// after it was sent.
func TestCurrentNeedsARecentCheckAtOrBelowTheVersion(t *testing.T) {
	v := newVersions(nil, nil, "", 0, time.Hour, nil, `"geogate"`)
	if v.current("places", 5) {
		t.Fatal("current before any check = true, want false")
	}
	v.confirm("places", 5, v.now())
	v.confirm("places", 3, v.now()-time.Second) // older: ignored
	tests := []struct {
		table   string
		version int64
		want    bool
	}{
		{"places", 4, false}, // a replica that has not raised its version yet
		{"places", 5, true},
		{"places", 6, true},
		{"geofences", 5, false}, // never checked
	}
	for _, tt := range tests {
		if got := v.current(tt.table, tt.version); got != tt.want {
			t.Errorf("current(%s, %d) = %v, want %v", tt.table, tt.version, got, tt.want)
		}
	}
	v.confirm("geofences", 1, v.now()-2*time.Hour) // sent longer ago than the window
	if v.current("geofences", 1) {
		t.Error("current after a check older than the window = true, want false")
	}
	off := newVersions(nil, nil, "", 0, 0, nil, `"geogate"`)
	off.confirm("places", 5, off.now())
	if off.current("places", 5) {
		t.Error("current with the window off = true, want false")
	}
}

// TestPlainSQLInvalidates changes a place with plain SQL, which reaches
// the replicas through NOTIFY: the tile shows the change shortly after.
func TestPlainSQLInvalidates(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t)
	rp := newReplica(t, db, testenv.Redis(t), testenv.Prefix(t)+":", replicaOptions{})
	tl := tileOf(13.41, 52.52, 10)
	path := tilePath("places", tl)
	for i, want := range []string{"MISS", "HIT"} {
		if w := rp.get(t, path); w.Header().Get("X-Cache") != want {
			t.Fatalf("GET #%d X-Cache = %q, want %q", i, w.Header().Get("X-Cache"), want)
		}
	}
	if _, err := db.Exec(context.Background(), "UPDATE places SET name = 'Berlin-Mitte' WHERE name = 'Berlin'"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		w := rp.get(t, path)
		names := featureNames(decode(t, w.Body.Bytes(), tl), "places")
		if names["Berlin-Mitte"] != nil && names["Berlin"] == nil {
			if w.Header().Get("X-Cache") != "MISS" {
				t.Errorf("first fresh tile X-Cache = %q, want MISS", w.Header().Get("X-Cache"))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 5s the tile still shows %v", names)
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
}

// TestListenerCatchesUp checks the versions a replica learns: through
// NOTIFY, and by re-reading them all after its connection is cut.
func TestListenerCatchesUp(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t)
	rp := newReplica(t, db, nil, "", replicaOptions{})
	v := rp.svc.versions
	start := v.Local("public.places")
	if _, err := db.Exec(context.Background(), "INSERT INTO places (name, geom) VALUES ('x', ST_SetSRID(ST_MakePoint(1, 1), 4326))"); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, v, "public.places", start+1)
	// Cut the listener and write while it is away.
	if _, err := db.Exec(context.Background(), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'LISTEN geogate_tiles' AND datname = current_database()"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(context.Background(), "DELETE FROM places WHERE name = 'x'"); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, v, "public.places", start+2)
}

func waitVersion(t *testing.T, v *Versions, table string, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for v.Local(table) < want {
		if time.Now().After(deadline) {
			t.Fatalf("version of %s = %d after 10s, want %d", table, v.Local(table), want)
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
}

// TestSingleflight holds the table locked while many requests for one
// uncached tile arrive, then lets them go: one render serves them all.
func TestSingleflight(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t)
	var arrived atomic.Int64 // requests about to render
	rp := newReplica(t, db, nil, "", replicaOptions{Gate: hooks{miss: func(context.Context, []string) (func(), error) { arrived.Add(1); return nil, nil }}})
	unlock := testenv.LockPlaces(t, db)
	defer unlock()
	const n = 20
	path := tilePath("places", tileOf(13.41, 52.52, 8))
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = rp.get(t, path).Code
		}()
	}
	// Wait until every request is accounted for: rendering or waiting for
	// the flight of its tile.
	waitFor(t, func() bool {
		return arrived.Load() == n && rp.svc.renders.Load()+int64(flightWaiters(&rp.svc.flights)) == n && blockedRenders(t, db) >= 1
	})
	if got := rp.svc.renders.Load(); got != 1 {
		t.Errorf("renders started for %d concurrent requests = %d, want 1", n, got)
	}
	unlock()
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("request %d = %d, want 200", i, c)
		}
	}
	if got := rp.svc.renders.Load(); got != 1 {
		t.Errorf("renders = %d for %d concurrent requests, want 1", got, n)
	}
}

// TestDisconnectCancelsRender: a client that goes away while its tile is
// blocked in PostgreSQL leaves no query behind.
func TestDisconnectCancelsRender(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t)
	rp := newReplica(t, db, nil, "", replicaOptions{})
	ctx := context.Background()
	unlock := testenv.LockPlaces(t, db)
	defer unlock()
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan int)
	go func() {
		req := httptest.NewRequest(http.MethodGet, tilePath("places", Tile{4, 8, 5}), nil).WithContext(rctx)
		w := httptest.NewRecorder()
		rp.checked.ServeHTTP(w, req)
		done <- w.Code
	}()
	waitFor(t, func() bool { return blockedRenders(t, db) == 1 })
	cancel()
	<-done
	waitFor(t, func() bool { return blockedRenders(t, db) == 0 })
}

// blockedRenders counts tile queries waiting for a lock in db's database.
func blockedRenders(t *testing.T, db *pgxpool.Pool) int {
	t.Helper()
	var n int
	err := db.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%ST_AsMVT%'`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met after 10s")
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
}

// TestSingleRenderAcrossReplicas holds the table locked while requests for
// one uncached tile reach two replicas sharing Redis: one query runs, the
// other replica waits for its result.
func TestSingleRenderAcrossReplicas(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t)
	prefix := testenv.Prefix(t) + ":"
	var arrived atomic.Int64
	count := replicaOptions{Gate: hooks{miss: func(context.Context, []string) (func(), error) { arrived.Add(1); return nil, nil }}}
	// Each replica has a Redis client of its own, as a service instance
	// has, on which a lost claim on the render lock is counted.
	var lost [2]atomic.Int64
	replicas := make([]replica, 2)
	for i := range replicas {
		c := testenv.Redis(t)
		c.AddHook(lostClaims{n: &lost[i]})
		replicas[i] = newReplica(t, db, c, prefix, count)
	}
	unlock := testenv.LockPlaces(t, db)
	defer unlock()
	const perReplica = 5
	path := tilePath("places", tileOf(13.41, 52.52, 8))
	var wg sync.WaitGroup
	codes := make([]int, 2*perReplica)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = replicas[i%2].get(t, path).Code
		}()
	}
	// Wait until every request is accounted for: rendering, waiting for
	// its replica's flight, or (the other replica's leader) having lost
	// the claim to the render lock, after which it only polls for the
	// tile while the lock is held.
	rendering := func() int64 { return replicas[0].svc.renders.Load() + replicas[1].svc.renders.Load() }
	waitFor(t, func() bool {
		waiting := int64(flightWaiters(&replicas[0].svc.flights) + flightWaiters(&replicas[1].svc.flights))
		return arrived.Load() == int64(len(codes)) && rendering()+waiting+lost[0].Load()+lost[1].Load() == int64(len(codes)) && blockedRenders(t, db) >= 1
	})
	if got := rendering(); got != 1 {
		t.Errorf("renders started across replicas = %d, want 1", got)
	}
	if n := blockedRenders(t, db); n != 1 {
		t.Errorf("%d tile queries wait in PostgreSQL, want 1", n)
	}
	unlock()
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("request %d = %d, want 200", i, c)
		}
	}
	if got := replicas[0].svc.renders.Load() + replicas[1].svc.renders.Load(); got != 1 {
		t.Errorf("renders across replicas = %d, want 1", got)
	}
}

// flightWaiters counts the callers waiting for flights in f.
func flightWaiters(f *flights) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, fl := range f.m {
		n += fl.waiters
	}
	return n
}

// lostClaims counts the claims on a render lock (SET ... NX on a key
// ending in ":lock") that another replica already held.
type lostClaims struct{ n *atomic.Int64 }

func (h lostClaims) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h lostClaims) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if b, ok := cmd.(*redis.BoolCmd); ok && !b.Val() && (err == nil || errors.Is(err, redis.Nil)) {
			if args := cmd.Args(); cmd.Name() == "set" && len(args) > 1 && strings.HasSuffix(fmt.Sprint(args[1]), ":lock") {
				h.n.Add(1)
			}
		}
		return err
	}
}

func (h lostClaims) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
