package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/testenv"
)

// heavyTable makes public.heavy: n point features whose note property
// is size bytes long.
func heavyTable(t *testing.T, pool *pgxpool.Pool, n, size int) {
	t.Helper()
	_, err := pool.Exec(context.Background(), fmt.Sprintf(`
CREATE TABLE public.heavy (id integer PRIMARY KEY, note text, geom geometry(Point, 4326));
INSERT INTO public.heavy
SELECT g, repeat(md5(g::text), %d), ST_SetSRID(ST_MakePoint(g * 0.001, 0), 4326) FROM generate_series(1, %d) g`, size/32, n))
	if err != nil {
		t.Fatal(err)
	}
}

// TestItemsPageByteBudget: a page asking for more than
// FEATURES_MAX_PAGE_BYTES ends early with a next link, and following the
// links reads every feature once.
func TestItemsPageByteBudget(t *testing.T) {
	pool, dbURL := testenv.DBWithURL(t)
	heavyTable(t, pool, 40, 100<<10)
	// Every match counted: a page cut short by its bytes still says how
	// many there are.
	base, _ := startService(t, map[string]string{"DATABASE_URL": dbURL, "FEATURES_MAX_PAGE_BYTES": "1048576",
		"RATELIMIT_FEATURES": "100000/1s", "RATELIMIT_DATABASE": "1000000ms/1s", "FEATURES_COUNT_MAX": "-1"})
	seen := map[string]int{}
	url := base + "/collections/heavy/items?limit=1000"
	pages := 0
	for url != "" && pages < 40 {
		pages++
		status, _, body := call(t, "GET", url, "", "")
		var p ogcPage
		if err := json.Unmarshal(body, &p); status != 200 || err != nil {
			t.Fatalf("GET %s = %d, %v", url, status, err)
		}
		if p.NumberReturned != len(p.Features) || len(p.Features) == 0 || len(p.Features) > 11 {
			t.Errorf("page %d: %d features (numberReturned %d), want 1 to 11 of 100 KiB within 1 MiB", pages, len(p.Features), p.NumberReturned)
		}
		if pages == 1 && p.NumberMatched != 40 {
			t.Errorf("numberMatched = %d, want 40", p.NumberMatched)
		}
		for _, f := range p.Features {
			seen[string(f.ID)]++
		}
		url = p.next()
	}
	if len(seen) != 40 {
		t.Errorf("%d features read over %d pages, want all 40", len(seen), pages)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("feature %s read %d times", id, n)
		}
	}
}

// TestItemsSQLStopsAtTheBudget: the database sends a page of large
// features only up to the row after the one that spends the byte budget,
// not the thousand the limit allows: 40 rows of 100 KiB, 1 MiB a page.
func TestItemsSQLStopsAtTheBudget(t *testing.T) {
	pool, dbURL := testenv.DBWithURL(t)
	heavyTable(t, pool, 40, 100<<10)
	ctx, svc := featuresService(t, pool, map[string]string{"DATABASE_URL": dbURL, "FEATURES_MAX_PAGE_BYTES": "1048576"})
	stmts, err := svc.ItemsSQL(ctx, "heavy", url.Values{"limit": {"1000"}})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, stmts[0].SQL, stmts[0].Args...)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v[0].(string))
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	// The page holds 11 (the 11th spends the budget) and the 12th says
	// more follow.
	if len(ids) != 12 {
		t.Errorf("the page's statement sent %d rows %v, want 12", len(ids), ids)
	}
	for i, id := range ids {
		if id != strconv.Itoa(i+1) {
			t.Fatalf("rows %v, want 1 to %d in order", ids, len(ids))
		}
	}
}

// heapInUse reads the process's Go heap in use from its metrics.
func heapInUse(t *testing.T, base string) float64 {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	t.Fatal("no go_memstats_heap_inuse_bytes in /metrics")
	return 0
}

// TestItemsStreamedWithinMemory: an items page is written as its rows
// arrive. One client reads a page of 200 features of 1 MiB properties
// (200 MiB) while ten others read it at the same time, in a service
// given 128 MiB (GOMEMLIMIT, as a container would be), and its heap stays
// within a quarter over that soft limit (it held 108 MiB at its peak, 118
// under the race detector): each request holds the driver's buffer of
// one row (2 MiB for a row of 1 MiB) and 64 KiB of answer. Held whole,
// the pages would take over 2 GiB, and no collector could keep near the
// limit.
func TestItemsStreamedWithinMemory(t *testing.T) {
	const memLimit = 128 << 20
	pool, dbURL := testenv.DBWithURL(t)
	heavyTable(t, pool, 200, 1<<20)
	p := startProcess(t, map[string]string{
		"DATABASE_URL": dbURL, "REDIS_URL": testenv.Getenv(t, "TEST_REDIS_URL"),
		"FEATURES_MAX_PAGE_BYTES": strconv.Itoa(1 << 30), "DB_QUERY_TIMEOUT": "2m", "HTTP_WRITE_TIMEOUT": "5m",
		"GOMEMLIMIT":         strconv.Itoa(memLimit),
		"RATELIMIT_FEATURES": "100000/1s", "RATELIMIT_DATABASE": "100000000ms/1s", "AUTH_ANONYMOUS_SCOPES": "features:read",
	})
	url := p.base + "/collections/heavy/items?limit=1000"
	// A page first, so that pools and caches are as they will stay.
	if resp, err := http.Get(p.base + "/collections/heavy/items?limit=1"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET a first page: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	before := heapInUse(t, p.base)
	var peak float64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			peak = max(peak, heapInUse(t, p.base))
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond): // a sample's period: the heap moves slower
			}
		}
	}()
	var wg sync.WaitGroup
	sizes := make([]int64, 11)
	errs := make([]error, 11)
	for i := range sizes {
		wg.Go(func() {
			resp, err := http.Get(url)
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 500))
				errs[i] = fmt.Errorf("status %d %s", resp.StatusCode, b)
				return
			}
			sizes[i], errs[i] = io.Copy(io.Discard, resp.Body)
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	for i := range sizes {
		if errs[i] != nil || sizes[i] < 200<<20 {
			t.Errorf("client %d read %d bytes, %v; want the whole page, over 200 MiB", i, sizes[i], errs[i])
		}
	}
	if peak >= memLimit*5/4 {
		t.Errorf("the heap reached %.0f MiB (from %.0f) while 11 clients read a 200 MiB page, want within a quarter over the %d MiB limit",
			peak/(1<<20), before/(1<<20), memLimit>>20)
	} else {
		t.Logf("heap %.0f MiB before, peak %.0f MiB", before/(1<<20), peak/(1<<20))
	}
}

// TestNumberMatchedBound: a first items page counts its matches only up
// to FEATURES_COUNT_MAX, and leaves numberMatched out past it; the pages
// after repeat what the first said.
func TestNumberMatchedBound(t *testing.T) {
	pool, dbURL := testenv.DBWithURL(t)
	heavyTable(t, pool, 40, 64)
	tests := []struct {
		countMax string
		want     any // numberMatched, or nil when left out
	}{
		{"-1", 40.0},
		{"40", 40.0},
		{"39", nil},
		{"0", nil},
	}
	for _, tt := range tests {
		t.Run("FEATURES_COUNT_MAX="+tt.countMax, func(t *testing.T) {
			base, _ := startService(t, map[string]string{"DATABASE_URL": dbURL, "FEATURES_COUNT_MAX": tt.countMax})
			next := base + "/collections/heavy/items?limit=25"
			for page := 1; next != ""; page++ {
				status, _, body := call(t, "GET", next, "", "")
				var p map[string]any
				if status != 200 || json.Unmarshal(body, &p) != nil {
					t.Fatalf("page %d: %d %.200s", page, status, body)
				}
				if got := p["numberMatched"]; got != tt.want {
					t.Errorf("page %d: numberMatched %v, want %v", page, got, tt.want)
				}
				var o ogcPage
				_ = json.Unmarshal(body, &o)
				next = o.next()
			}
		})
	}
}
