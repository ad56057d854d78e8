package tiles

import (
	"context"
	"strings"
	"testing"

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
	rp := newReplica(t, db, rdb, testenv.Prefix(t)+":", Options{})
	ctx := context.Background()
	path := tilePath("geofences", tileOf(13.41, 52.52, 6))
	if w := rp.get(t, path); w.Code != 200 || w.Header().Get("X-Cache") != "MISS" {
		t.Fatalf("first GET = %d %s, want 200 MISS", w.Code, w.Header().Get("X-Cache"))
	}
	// Drop the Redis copy: only the process still has the tile.
	c := rp.h.o.Cache
	keys, err := rdb.Keys(ctx, c.prefix+"t:geofences:*").Result()
	if err != nil || len(keys) != 1 || strings.HasSuffix(keys[0], ":lock") {
		t.Fatalf("tile keys = %v, %v; want the one tile", keys, err)
	}
	rdb.Del(ctx, keys[0])
	if w := rp.get(t, path); w.Code != 200 || w.Header().Get("X-Cache") != "HIT" {
		t.Fatalf("GET after the Redis copy was dropped = %d %s, want 200 HIT from memory", w.Code, w.Header().Get("X-Cache"))
	}
	// Another replica has seen a write: the memory copy is outdated.
	local := rp.h.versions.Local("geofences")
	if err := rdb.Set(ctx, rp.h.versions.key("geofences"), local+1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if w := rp.get(t, path); w.Code != 200 || w.Header().Get("X-Cache") != "MISS" {
		t.Errorf("GET after a newer shared version = %d %s, want 200 MISS (rendered again)", w.Code, w.Header().Get("X-Cache"))
	}
	if got := rp.h.versions.Local("geofences"); got != local+1 {
		t.Errorf("local version = %d, want it raised to %d", got, local+1)
	}
}
