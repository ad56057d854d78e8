package geofence

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/openapi/contract"
)

func TestFeatureSizeIsEncodedLength(t *testing.T) {
	tests := []struct {
		name string
		f    Feature
	}{
		{"fence", Feature{ID: 42, Name: "Depot", Props: []byte(`{"zone": "A", "n": 1}`), Geometry: []byte(`{"type":"Point","coordinates":[1,2]}`)}},
		{"no properties", Feature{ID: 7, Name: "x", Props: []byte(`{}`)}},
		{"nil properties", Feature{ID: 1234567890123, Name: ""}},
		{"name to escape", Feature{ID: 1, Name: "a\"b\\c<&>\u00e9\n\x01", Props: []byte(`{"k":[1,2]}`)}},
		{"layer key", Feature{Key: []byte(`"a-key"`), NoName: true, Props: []byte(`{"col": null}`), Distance: 1234.5678}},
		{"no name, no properties", Feature{Key: []byte(`9`), NoName: true, Props: []byte(`{}`), Distance: 0}},
		{"huge distance", Feature{Key: []byte(`9`), NoName: true, Distance: 1e21}},
	}
	for _, tt := range tests {
		for _, withDistance := range []bool{false, true} {
			t.Run(fmt.Sprint(tt.name, withDistance), func(t *testing.T) {
				got := featureSize(tt.f, withDistance)
				want := len(appendFeature(nil, tt.f, withDistance)) + 1 // and a comma
				if got != want {
					t.Errorf("featureSize = %d, want %d (%s)", got, want, appendFeature(nil, tt.f, withDistance))
				}
			})
		}
	}
}

func TestPageBytesFits(t *testing.T) {
	tests := []struct {
		name  string
		max   int
		sizes []int
		want  int // how many fit before the first that does not
	}{
		{"no budget", 0, []int{1 << 30, 1 << 30}, 2},
		{"all fit", 100, []int{40, 60}, 2},
		{"stops before passing", 100, []int{40, 40, 40}, 2},
		{"first always fits", 100, []int{500, 1}, 1},
		{"small after large", 100, []int{60, 50}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pageBytes{max: tt.max}
			got := 0
			for _, n := range tt.sizes {
				if !p.fits(n) {
					break
				}
				got++
			}
			if got != tt.want {
				t.Errorf("fit %d of %v under %d, want %d", got, tt.sizes, tt.max, tt.want)
			}
		})
	}
}

// Sizes of the fences of the byte budget tests: the properties of a big
// fence take 1.5 MB, of the huge one 5 MB, both under a 4 MiB budget.
const (
	testPageBudget = 4 << 20
	bigProps       = 1_500_000
	hugeProps      = 5_000_000
)

// insertHeavyFences stores fences named after their property sizes (s:
// small, b: big, h: huge), in id order, each a small square a little
// further east of (10, 10) than the one before, so that /within around
// (10, 10) finds them in id order too. Their properties are random hex,
// as incompressible as real data. It returns the ids by name.
func insertHeavyFences(t testing.TB, pool *pgxpool.Pool, names ...string) map[string]int64 {
	t.Helper()
	ids := map[string]int64{}
	for i, name := range names {
		size := map[byte]int{'s': 100, 'b': bigProps, 'h': hugeProps}[name[0]]
		var id int64
		err := pool.QueryRow(context.Background(), `
INSERT INTO geofences (name, properties, geom)
VALUES ($1,
  jsonb_build_object('blob', left((SELECT string_agg(md5(random()::text), '') FROM generate_series(1, $2::int / 32 + 1)), $2::int)),
  ST_Multi(ST_MakeEnvelope(10 + $3::float8 * 0.001, 10, 10.0005 + $3::float8 * 0.001, 10.0005, 4326)))
RETURNING id`, name, size, i).Scan(&id)
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = id
	}
	return ids
}

// heavyFences is the order of the fences the byte budget tests store.
var heavyFences = []string{"s1", "b1", "b2", "b3", "h1", "b4", "s2", "b5", "b6", "b7"}

// pageOf is one page a client read: the names of its fences and the
// bytes its features take, commas included.
type pageOf struct {
	names []string
	bytes int
}

// readPages follows next links from target and returns each page; names
// maps fence ids to names.
func readPages(t *testing.T, h http.Handler, target string, names map[int64]string) []pageOf {
	t.Helper()
	var pages []pageOf
	for target != "" {
		if len(pages) > 100 {
			t.Fatalf("more than 100 pages")
		}
		code, body := do(t, h, "GET", target, "")
		if code != http.StatusOK {
			t.Fatalf("GET %s = %d %.300s", target, code, body)
		}
		var c struct {
			Features []json.RawMessage `json:"features"`
			Links    []struct{ Rel, Href string }
		}
		if err := json.Unmarshal(body, &c); err != nil {
			t.Fatal(err)
		}
		var p pageOf
		for _, raw := range c.Features {
			var f struct{ ID int64 }
			if err := json.Unmarshal(raw, &f); err != nil {
				t.Fatal(err)
			}
			p.names = append(p.names, names[f.ID])
			p.bytes += len(raw) + 1
		}
		pages = append(pages, p)
		target = ""
		for _, l := range c.Links {
			if l.Rel == "next" {
				target = l.Href
			}
		}
	}
	return pages
}

// TestPagesStopAtByteBudget stores fences with megabytes of properties
// and reads them, by the listing and by /within, under a 4 MiB page
// budget: a page ends before the fence that would pass the budget, a
// fence larger than the budget comes alone, and following next links
// gives every fence once, in order.
func TestPagesStopAtByteBudget(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	svc := newService(t, pool, pool, testTimeouts)
	rules := testRules
	rules.MaxPageBytes = testPageBudget
	h := contract.Wrap(t, testRouter(svc, rules, nil), rules.Limits)
	ids := insertHeavyFences(t, pool, heavyFences...)
	names := map[int64]string{}
	for n, id := range ids {
		names[id] = n
	}
	tests := []struct {
		name   string
		target string
		want   string
	}{
		{"listing", "/geofences?limit=1000", "[s1 b1 b2] [b3] [h1] [b4 s2 b5] [b6 b7]"},
		{"listing, pages of 2", "/geofences?limit=2", "[s1 b1] [b2 b3] [h1] [b4 s2] [b5 b6] [b7]"},
		{"within", withinURL(10, 10, 5000, "layer=geofences&limit=1000"), "[s1 b1 b2] [b3] [h1] [b4 s2 b5] [b6 b7]"},
		{"within, pages of 2", withinURL(10, 10, 5000, "layer=geofences&limit=2"), "[s1 b1] [b2 b3] [h1] [b4 s2] [b5 b6] [b7]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pages := readPages(t, h, tt.target, names)
			var got []string
			for _, p := range pages {
				got = append(got, fmt.Sprint(p.names))
				if len(p.names) > 1 && p.bytes > testPageBudget {
					t.Errorf("page %v takes %d bytes, over the budget of %d", p.names, p.bytes, testPageBudget)
				}
			}
			if g := strings.Join(got, " "); g != tt.want {
				t.Errorf("pages = %s, want %s", g, tt.want)
			}
		})
	}
}

// TestPageByteBudgetBoundsMemory measures what the first page of a
// listing over 20 MB of fences allocates with limit=1000: about the 4 MiB
// of the page twice (the rows, then the answer) and the first fence past
// it, not the whole table. Without the budget it allocates the table
// several times over; the test checks that too, so that it measures
// something.
func TestPageByteBudgetBoundsMemory(t *testing.T) {
	// Not parallel: the allocations of other tests would count.
	pool := newDB(t)
	svc := newService(t, pool, pool, testTimeouts)
	insertHeavyFences(t, pool, heavyFences...)
	var table int
	if err := pool.QueryRow(context.Background(), "SELECT sum(octet_length(properties::text)) FROM geofences").Scan(&table); err != nil {
		t.Fatal(err)
	}
	allocated := func(budget int) int {
		rules := testRules
		rules.MaxPageBytes = budget
		h := testRouter(svc, rules, nil)
		do(t, h, "GET", "/geofences?limit=1", "") // warm the pool and the statement cache
		// TotalAlloc counts the whole process, and the background loops
		// of earlier tests (catalog watchers, listeners) still allocate:
		// the least of three runs is the request's own.
		least := math.MaxInt
		for range 3 {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			code, body := do(t, h, "GET", "/geofences?limit=1000", "")
			runtime.ReadMemStats(&after)
			if code != http.StatusOK {
				t.Fatalf("GET = %d %.300s", code, body)
			}
			least = min(least, int(after.TotalAlloc-before.TotalAlloc))
		}
		return least
	}
	bounded, unbounded := allocated(testPageBudget), allocated(0)
	t.Logf("table %d bytes; allocated %d bytes with the budget, %d without", table, bounded, unbounded)
	// About the page twice (the rows, then the answer) and the first
	// fence past it; the race detector's runtime adds about a third
	// (15.7 MB here under -race, 10.6 MB without), so the bound allows
	// a page more.
	if limit := 4*testPageBudget + 2*bigProps; bounded > limit || bounded > unbounded/3 {
		t.Errorf("with a budget of %d the first page allocated %d bytes, want at most %d", testPageBudget, bounded, limit)
	}
	if unbounded < 2*table {
		t.Errorf("without a budget the page allocated only %d bytes for a table of %d: the measure is off", unbounded, table)
	}
}
