package ratelimit

import (
	"context"
	"testing"

	"github.com/geogate/geogate/internal/testenv"
)

// TestDatabaseTimeGrowsWithRequests: a policy of database time, even one
// that names the log algorithm, keeps a few fields per identity, not an
// entry per millisecond: ten requests of a minute and ten thousand of 50
// ms leave Redis holding what one request does, and settling a minute
// costs what settling a millisecond does.
func TestDatabaseTimeGrowsWithRequests(t *testing.T) {
	rdb := testenv.Redis(t)
	l := newLimiter(t, rdb, Log, "100000000ms/1h")
	if got := l.policies()["p"].Algorithm; got != Counter {
		t.Fatalf("a policy of database time counts with %q, want counter", got)
	}
	ctx := context.Background()
	id := testenv.Prefix(t)
	spend := func(ms, times int) {
		t.Helper()
		for range times {
			d, err := l.Allow(ctx, "p", id, 1)
			if err != nil || !d.Allowed {
				t.Fatalf("Allow = %+v, %v", d, err)
			}
			if err := l.Settle(ctx, d, ms); err != nil {
				t.Fatal(err)
			}
		}
	}
	memory := func() int64 {
		t.Helper()
		n, err := rdb.MemoryUsage(ctx, counterKey("p", id)).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	spend(60_000, 1)
	one := memory()
	spend(60_000, 9)
	spend(50, 10_000)
	all := memory()
	t.Logf("Redis memory of one identity's policy: %d bytes after one request of 60 s, %d after 10 of 60 s and 10,000 of 50 ms", one, all)
	if all > 2*one || all > 1024 {
		t.Errorf("memory grew from %d to %d bytes", one, all)
	}
	u, err := l.Usage(ctx, Request{Policy: "p", Identity: id})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := u.Windows[0].Used, 10*60_000+10_000*50; got != want {
		t.Errorf("used %d ms, want %d", got, want)
	}
	if n := rdb.Exists(ctx, logKey("p", id)).Val(); n != 0 {
		t.Errorf("a log key exists for a policy of database time")
	}
}
