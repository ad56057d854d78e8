package tiles

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/geogate/geogate/internal/testenv"
)

func TestMemCacheKeepsTheRecentWithinItsBudget(t *testing.T) {
	tile := func(n int) entry { return entry{ETag: `"e"`, Gzip: make([]byte, n)} }
	tests := []struct {
		name     string
		puts     []string // keys, each a tile of 100 bytes, 168 with overheads (key "big": 1000); 9 fit
		touch    string   // read between the puts and the checks
		wantKept []string
		wantGone []string
	}{
		{"fits", []string{"a", "b"}, "", []string{"a", "b"}, nil},
		{"oldest goes first", strings.Split("abcdefghijk", ""), "", strings.Split("cdefghijk", ""), []string{"a", "b"}},
		{"a read keeps it", strings.Split("abcdefghijk", ""), "a", strings.Split("adefghijk", ""), []string{"b", "c"}},
		{"too big to keep", []string{"a", "big"}, "", []string{"a"}, []string{"big"}},
		{"replaced, not doubled", []string{"a", "a", "a", "b", "c"}, "", []string{"a", "b", "c"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMemCache(8 * 200) // an eighth: 200 bytes per tile at most
			if got := int64(len("a") + len(`"e"`) + 100 + 64); got != 168 {
				t.Fatalf("entry size = %d, the cases assume 168", got)
			}
			for i, k := range tt.puts {
				if k == "big" {
					m.put(k, tile(1000))
				} else {
					m.put(k, tile(100))
				}
				if tt.touch != "" && i == 8 { // the cache is full
					m.get(tt.touch)
				}
			}
			for _, k := range tt.wantKept {
				if _, ok := m.get(k); !ok {
					t.Errorf("get(%q) missed, want it kept", k)
				}
			}
			for _, k := range tt.wantGone {
				if _, ok := m.get(k); ok {
					t.Errorf("get(%q) hit, want it evicted or never kept", k)
				}
			}
			if got := m.bytes(); got > m.max {
				t.Errorf("bytes() = %d, above the budget %d", got, m.max)
			}
		})
	}
	var off *memCache = newMemCache(0)
	off.put("a", tile(10))
	if _, ok := off.get("a"); ok || off.bytes() != 0 {
		t.Errorf("a cache of 0 bytes kept a tile")
	}
}

// TestMemoryCopyAnswersOnlyAtTheSharedVersion: a hot tile is served from
// process memory without its bytes in Redis, until another replica
// publishes a newer version of its layer.
func TestMemoryCopyAnswersOnlyAtTheSharedVersion(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t)
	rdb := testenv.Redis(t)
	rp := newReplica(t, db, rdb, testenv.Prefix(t)+":", replicaOptions{})
	ctx := context.Background()
	path := tilePath("geofences", tileOf(13.41, 52.52, 6))
	if w := rp.get(t, path); w.Code != 200 || w.Header().Get("X-Cache") != "MISS" {
		t.Fatalf("first GET = %d %s, want 200 MISS", w.Code, w.Header().Get("X-Cache"))
	}
	// Drop the Redis copy: only the process still has the tile.
	c := rp.cache(t)
	keys, err := rdb.Keys(ctx, c.prefix+"t:geofences~*").Result()
	if err != nil || len(keys) != 1 || strings.HasSuffix(keys[0], ":lock") {
		t.Fatalf("tile keys = %v, %v; want the one tile", keys, err)
	}
	rdb.Del(ctx, keys[0])
	if w := rp.get(t, path); w.Code != 200 || w.Header().Get("X-Cache") != "HIT" {
		t.Fatalf("GET after the Redis copy was dropped = %d %s, want 200 HIT from memory", w.Code, w.Header().Get("X-Cache"))
	}
	// Another replica has seen a write: the memory copy is outdated. A
	// write through the API waits the version window out before it
	// answers; this one waits until the replica's last read of the
	// version no longer vouches for its copy.
	v := rp.svc.versions
	local := v.Local("public.geofences")
	if err := rdb.Set(ctx, v.key("public.geofences"), local+1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 10*time.Second, "the last version read to stop vouching for the memory copy", func() bool {
		return !v.current("public.geofences", local)
	})
	if w := rp.get(t, path); w.Code != 200 || w.Header().Get("X-Cache") != "MISS" {
		t.Errorf("GET after a newer shared version = %d %s, want 200 MISS (rendered again)", w.Code, w.Header().Get("X-Cache"))
	}
	if got := rp.svc.versions.Local("public.geofences"); got != local+1 {
		t.Errorf("local version = %d, want it raised to %d", got, local+1)
	}
}

// TestHotTilesSkipRedisWithinTheWindow: within the version window after a
// read of the shared version, tiles in memory are served without any Redis
// command; with the window off, each costs one read of the version.
func TestHotTilesSkipRedisWithinTheWindow(t *testing.T) {
	t.Parallel()
	path := tilePath("geofences", tileOf(13.41, 52.52, 6))
	tests := []struct {
		window time.Duration
		want   func(n int64) bool
		what   string
	}{
		{time.Minute, func(n int64) bool { return n == 0 }, "none"},
		{0, func(n int64) bool { return n == 50 }, "one read of the version per tile (50)"},
	}
	for _, tt := range tests {
		rp, commands, _ := countedReplica(t, withWindow(tt.window))
		// The first GET renders or reads the tile, and reads the version.
		if w := rp.get(t, path); w.Code != 200 {
			t.Fatalf("warming GET = %d", w.Code)
		}
		commands.Store(0)
		for range 50 {
			if w := rp.get(t, path); w.Code != 200 || w.Header().Get("X-Cache") != "HIT" {
				t.Fatalf("window %v: GET = %d %s, want 200 HIT", tt.window, w.Code, w.Header().Get("X-Cache"))
			}
		}
		if got := commands.Load(); !tt.want(got) {
			t.Errorf("window %v: 50 hot tiles sent %d Redis commands, want %s", tt.window, got, tt.what)
		}
	}
}

// countedReplica is a replica on a Redis client of its own whose commands
// and round trips are counted.
func countedReplica(t *testing.T, tweaks ...func(*Settings)) (rp replica, commands, trips *atomic.Int64) {
	t.Helper()
	db := fixtureDB(t)
	rdb := testenv.Redis(t)
	commands, trips = new(atomic.Int64), new(atomic.Int64)
	rdb.AddHook(countingHook{commands, trips})
	return newReplica(t, db, rdb, testenv.Prefix(t)+":", replicaOptions{}, tweaks...), commands, trips
}

// countingHook counts the commands a client sends, pipelined ones each,
// and its round trips, a pipeline as one.
type countingHook struct{ commands, trips *atomic.Int64 }

func (h countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.commands.Add(1)
		h.trips.Add(1)
		return next(ctx, cmd)
	}
}

func (h countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.commands.Add(int64(len(cmds)))
		h.trips.Add(1)
		return next(ctx, cmds)
	}
}

// TestMissCostsThreeRoundTrips: a tile in neither cache costs three Redis
// round trips: the version and the tile read together, the render lock,
// and the tile stored with the version raised and the lock released.
func TestMissCostsThreeRoundTrips(t *testing.T) {
	t.Parallel()
	rp, _, trips := countedReplica(t)
	// A first miss opens the client's connections (their set-up commands
	// are round trips too, once).
	rp.get(t, tilePath("geofences", tileOf(2.35, 48.85, 6)))
	trips.Store(0)
	if w := rp.get(t, tilePath("geofences", tileOf(13.41, 52.52, 6))); w.Code != 200 || w.Header().Get("X-Cache") != "MISS" {
		t.Fatalf("GET = %d %s, want 200 MISS", w.Code, w.Header().Get("X-Cache"))
	}
	if got := trips.Load(); got != 3 {
		t.Errorf("a miss took %d Redis round trips, want 3", got)
	}
	locks, err := rp.cache(t).rdb.Keys(context.Background(), rp.cache(t).prefix+"t:*:lock").Result()
	if err != nil || len(locks) != 0 {
		t.Errorf("render locks left = %v (%v), want none", locks, err)
	}
}
