// Command features measures geogate's OGC API – Features items route on
// the demo data, each case next to its baseline in the same run:
//
//   - pages of 1,000 places: every page of the layer, collected by walking
//     its next links once and then asked in a fixed random order, through
//     the HTTP API of a real `api serve` process (authentication and the
//     "features" rate limit in the path, the limit raised out of the way)
//     next to the identical statements driven straight through pgx at the
//     same concurrency, their rows read to the end: pages/s, features/s,
//     p50 and p99 for both, and their ratio. The statements come from
//     features.Service.ItemsSQL, the code the route runs, so the baseline
//     cannot drift from it: each page's page statement, and on the first
//     page the count the route sends with it;
//   - the same over a filtered query: the pages of places inside a polygon
//     the size of Germany, filter=S_INTERSECTS(geometry,POLYGON(...)) in
//     CQL2 text. While the service refuses filters (400) the case says so
//     and is skipped;
//   - a whole-layer copy of places into a GeoPackage with ogr2ogr: from
//     geogate through GDAL's OAPIF driver (PAGE_SIZE 1000) next to ogr2ogr
//     straight from PostgreSQL, selecting the same columns (id, name, each
//     stored property, the point); alternating trials, median seconds.
//
// It loads the demo data into its own database with the importer on first
// use, starts the API binary on a free loopback port and stops it at the
// end. Run it from the repository root, after `go build -o bin/api ./cmd/api`:
//
//	go run ./bench/features -db postgres://geogate@127.0.0.1:55432/geogate -redis redis://127.0.0.1:56379/0
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/bench/internal/apiproc"
	"github.com/geogate/geogate/bench/internal/demo"
	"github.com/geogate/geogate/bench/internal/load"
	"github.com/geogate/geogate/internal/catalog"
	"github.com/geogate/geogate/internal/config"
	"github.com/geogate/geogate/internal/features"
	"github.com/geogate/geogate/internal/pg"
)

// germany is a rough outline of Germany (about 1,400 by 900 km), the
// region of the filtered case.
const germany = "POLYGON((7.0 53.6,8.6 53.9,8.9 54.9,10.0 54.8,11.0 54.4,13.0 54.6,14.2 53.9,14.6 52.5,15.0 51.1," +
	"12.1 50.3,13.8 48.6,13.0 47.5,10.2 47.3,7.6 47.6,8.2 49.0,6.4 49.5,6.1 50.8,6.0 51.9,7.0 53.6))"

func main() {
	dbURL := flag.String("db", envOr("DATABASE_URL", "postgres://geogate@127.0.0.1:55432/geogate?sslmode=disable"), "PostgreSQL server URL; the bench uses its own database on it")
	dbName := flag.String("dbname", "geogate_features_bench", "database holding the demo data (created and loaded when missing)")
	redisURL := flag.String("redis", envOr("REDIS_URL", "redis://127.0.0.1:56379/0"), "Redis URL for the API's rate limiter")
	apiBin := flag.String("api", "bin/api", "the API binary to start")
	concs := flag.String("c", "8", "concurrencies, comma-separated")
	dur := flag.Duration("d", 5*time.Second, "duration of each run")
	runs := flag.Int("runs", 1, "runs of each case, alternating the sides; medians are printed")
	limit := flag.Int("limit", 1000, "features per page")
	filter := flag.String("filter", "S_INTERSECTS(geometry,"+germany+")", "CQL2 text filter of the filtered case; empty skips it")
	ogrTrials := flag.Int("ogr-trials", 3, "trials of each ogr2ogr copy, alternating; 0 skips the copy")
	apiPool := flag.Int("api-pool", 8, "DB_MAX_CONNS of the API (the direct SQL side keeps one connection per client)")
	flag.Parse()
	b := &bench{dur: *dur, runs: max(*runs, 1), limit: *limit, apiPool: *apiPool}
	if err := b.run(*dbURL, *dbName, *redisURL, *apiBin, ints(*concs), *filter, *ogrTrials); err != nil {
		fmt.Fprintln(os.Stderr, "bench/features:", err)
		os.Exit(1)
	}
}

type bench struct {
	dur     time.Duration
	runs    int
	limit   int
	apiPool int
	base    string // API base URL
	svc     *features.Service
	pool    *pgxpool.Pool
	// env is what the API is started with on top of this process's
	// environment; the bench's own Service reads its settings from the
	// same, so that both build the same statements and read each other's
	// cursors.
	env map[string]string
}

// pages is a set of items requests: each target's path and query, the
// statements the route runs for it, and how many features it answers.
type pages struct {
	targets  []string
	stmts    [][]features.Statement
	features int
}

func (p *pages) perPage() float64 { return float64(p.features) / float64(len(p.targets)) }

func (b *bench) run(serverURL, dbName, redisURL, apiBin string, concs []int, filter string, ogrTrials int) error {
	ctx := context.Background()
	dbURL, err := demo.EnsureDB(ctx, serverURL, dbName)
	if err != nil {
		return err
	}
	b.env = map[string]string{
		"DATABASE_URL": dbURL, "REDIS_URL": redisURL,
		"RATELIMIT_FEATURES":  "100000/1s", // the exact log's largest window; a page of 1,000 costs 10
		"RATELIMIT_DATABASE":  "1000000000ms/1s",
		"FEATURES_CURSOR_KEY": "geogate-bench-features-cursor-key",
		"FEATURES_COUNT_MAX":  "1000", // numberMatched bounded, as a map-facing deployment would set it
		"DB_MAX_CONNS":        strconv.Itoa(b.apiPool), "DB_MIN_CONNS": strconv.Itoa(b.apiPool),
		"LOG_LEVEL":        "warn", // no access log line per request
		"TILES_PUBLIC_URL": "",     // links to the port the bench talks to
	}
	cfg, err := config.Load(func(k string) string {
		if v, ok := b.env[k]; ok {
			return v
		}
		return os.Getenv(k)
	}, config.NeedPostgres)
	if err != nil {
		return err
	}
	if b.limit > cfg.Features.MaxLimit {
		return fmt.Errorf("-limit %d is above FEATURES_MAX_LIMIT %d", b.limit, cfg.Features.MaxLimit)
	}
	maxC := slices.Max(concs)
	// The API's pool settings: statements planned once per connection.
	b.pool, err = pg.Open(ctx, dbURL, pg.Options{MaxConns: int32(maxC), AppName: "geogate-bench-features", Schema: cfg.DB.Schema,
		Warm: pg.WarmPostGIS, GenericPlans: true})
	if err != nil {
		return err
	}
	defer b.pool.Close()
	// CPU groups: "pg:api" serves `api serve`, "pg:bench" this process.
	load.Groups = demo.ServerProcesses(b.pool, map[string]string{"geogate": "pg:api", "geogate-bench-features": "pg:bench"})
	cctx, stopCatalog := context.WithCancel(ctx)
	defer stopCatalog() // before the pool closes
	cat, err := catalog.Open(cctx, b.pool, cfg.Catalog, nil)
	if err != nil {
		return err
	}
	b.svc = features.New(pg.Runner{Pool: b.pool, Timeouts: cfg.Features.Timeouts}, cat, cfg.Features, features.Rights{})
	stop, err := b.startAPI(apiBin)
	if err != nil {
		return err
	}
	defer stop()

	all, err := b.walk(ctx, url.Values{"limit": {strconv.Itoa(b.limit)}})
	if err != nil {
		return err
	}
	fmt.Printf("items of places, limit %d: %d pages (%d features), collected by walking the next links once, asked in a fixed random order; %v per run, %d runs\n",
		b.limit, len(all.targets), all.features, b.dur, b.runs)
	fmt.Printf("API: api serve (auth, rate limit, handler, GeoJSON); SQL: the statements features.Service.ItemsSQL gives for each page, rows read to the end\n")
	fmt.Printf("%-8s %4s | %9s %11s %8s %8s | %9s %11s %8s %8s | %6s\n", "case", "conc", "API pg/s", "features/s", "p50 ms", "p99 ms", "SQL pg/s", "features/s", "p50 ms", "p99 ms", "ratio")
	// Every server process behind the pools loads PostGIS and plans the
	// statements on its first queries: pay that before any side counts.
	load.Run(maxC, 2*time.Second, b.itemsAPI(all, maxC))
	load.Run(maxC, 2*time.Second, b.itemsSQL(all))
	for _, c := range concs {
		b.compare("items", all, c)
	}

	if err := b.bboxCase(ctx, cat, cfg, concs); err != nil {
		return err
	}

	if filter != "" {
		fmt.Printf("\nfiltered: limit %d, filter=%s\n", b.limit, filter)
		f, err := b.walk(ctx, url.Values{"limit": {strconv.Itoa(b.limit)}, "filter": {filter}})
		if err != nil {
			fmt.Printf("filtered: not measured: %v\n", err)
		} else {
			fmt.Printf("filtered: %d pages (%d features, the first with its count)\n", len(f.targets), f.features)
			for _, c := range concs {
				b.compare("filtered", f, c)
			}
		}
	}

	if ogrTrials > 0 {
		return b.copies(ctx, dbURL, ogrTrials)
	}
	return nil
}

// bboxCase measures a map client's first request: the first page of a
// 5 degree box around each of 64 places, through the API (which counts
// numberMatched up to FEATURES_COUNT_MAX) against the same page
// statement with the count of every match (what every first page cost
// before the bound), and against the page statement alone.
func (b *bench) bboxCase(ctx context.Context, cat *catalog.Catalog, cfg config.Config, concs []int) error {
	exactCfg := cfg.Features
	exactCfg.CountMax = -1
	exact := features.New(pg.Runner{Pool: b.pool, Timeouts: cfg.Features.Timeouts}, cat, exactCfg, features.Rights{})
	rows, err := b.pool.Query(ctx, "SELECT ST_X(geom), ST_Y(geom) FROM places WHERE id % 2671 = 0 ORDER BY id LIMIT 64")
	if err != nil {
		return err
	}
	centres, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]float64, error) {
		var c [2]float64
		err := r.Scan(&c[0], &c[1])
		return c, err
	})
	if err != nil {
		return err
	}
	counted, alone, former := &pages{}, &pages{}, &pages{}
	for _, c := range centres {
		v := url.Values{"limit": {strconv.Itoa(b.limit)}, "bbox": {fmt.Sprintf("%.4f,%.4f,%.4f,%.4f",
			max(c[0]-2.5, -180), max(c[1]-2.5, -90), min(c[0]+2.5, 180), min(c[1]+2.5, 90))}}
		stmts, err := exact.ItemsSQL(ctx, "places", v)
		if err != nil {
			return fmt.Errorf("ItemsSQL(%s): %w", v.Encode(), err)
		}
		n, err := b.pageRows(ctx, stmts)
		if err != nil {
			return err
		}
		target := "/collections/places/items?" + v.Encode()
		old, err := formerPage(stmts[0].SQL)
		if err != nil {
			return err
		}
		for _, ps := range []*pages{counted, alone, former} {
			ps.targets = append(ps.targets, target)
			ps.features += min(n, b.limit)
		}
		counted.stmts = append(counted.stmts, stmts)
		alone.stmts = append(alone.stmts, stmts[:1])
		former.stmts = append(former.stmts, []features.Statement{{SQL: old, Args: stmts[0].Args}, stmts[1]})
	}
	fmt.Printf("\nbbox: the first page (limit %d) of a 5 degree box around %d places, %.0f features a page on average; API: numberMatched counted up to FEATURES_COUNT_MAX (%d); SQL: the page statement with the count of every match (bbox+count), then alone (bbox), then the former page statement, which built every match's properties before its sort, with the count of every match (bbox+former)\n",
		b.limit, len(centres), counted.perPage(), cfg.Features.CountMax)
	for _, c := range concs {
		b.compare("bbox+count", counted, c)
		b.compare("bbox", alone, c)
		b.compare("bbox+former", former, c)
	}
	return nil
}

// pickedFirst is the page statement's subquery choosing its rows.
var pickedFirst = regexp.MustCompile(`FROM \(SELECT l\.\* FROM (.+?) ORDER BY (.+?) LIMIT (\$\d+::int)\) l ORDER BY (.+?)\) p`)

// formerPage is the page statement sql as it was before its rows were
// chosen in a subquery: conditions, order and limit on the table itself,
// so that PostgreSQL builds the properties of every match before its
// top-N sort. It is the baseline of the bbox case.
func formerPage(sql string) (string, error) {
	m := pickedFirst.FindStringSubmatch(sql)
	if m == nil || m[2] != m[4] {
		return "", fmt.Errorf("bench/features: the page statement has no subquery choosing its rows: %s", sql)
	}
	return strings.Replace(sql, m[0], "FROM "+m[1]+" ORDER BY "+m[2]+" LIMIT "+m[3]+") p", 1), nil
}

// compare runs the API and the SQL side of ps at concurrency c and prints
// their medians.
func (b *bench) compare(name string, ps *pages, c int) {
	res := load.Medians(b.runs, c, b.dur, b.itemsAPI(ps, c), b.itemsSQL(ps))
	api, sql := res[0], res[1]
	n := ps.perPage()
	fmt.Printf("%-8s %4d | %9.1f %11.0f %8.1f %8.1f | %9.1f %11.0f %8.1f %8.1f | %5.0f%%%s\n", name, c,
		api.Rate, api.Rate*n, api.P50, api.P99, sql.Rate, sql.Rate*n, sql.P50, sql.P99, 100*api.Rate/sql.Rate, errNote(api)+errNote(sql))
	fmt.Printf("range %s %d api %.1f-%.1f sql %.1f-%.1f\n", name, c, api.Lo, api.Hi, sql.Lo, sql.Hi)
	fmt.Printf("cpu %s %d us/page: API: %s; SQL: %s\n", name, c,
		api.CPUNote("api", "pg:api", "redis-server", "bench"), sql.CPUNote("pg:bench", "bench"))
}

// walk follows the next links of the items query v from its first page
// to its last through the API and returns every page's target with the
// statements ItemsSQL gives for it. It checks that those statements
// select as many features as the API answered on each page.
func (b *bench) walk(ctx context.Context, v url.Values) (*pages, error) {
	ps := &pages{}
	next := b.base + "/collections/places/items?" + v.Encode()
	for next != "" {
		u, err := url.Parse(next)
		if err != nil {
			return nil, err
		}
		resp, err := http.Get(next)
		if err != nil {
			return nil, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s answered %d: %.300s", u.RequestURI(), resp.StatusCode, body)
		}
		var p struct {
			Features       []json.RawMessage
			NumberReturned int
			Links          []struct{ Href, Rel string }
		}
		if err := json.Unmarshal(body, &p); err != nil {
			return nil, fmt.Errorf("GET %s: %w", u.RequestURI(), err)
		}
		stmts, err := b.svc.ItemsSQL(ctx, "places", u.Query())
		if err != nil {
			return nil, fmt.Errorf("ItemsSQL(%s): %w", u.RawQuery, err)
		}
		if n, err := b.pageRows(ctx, stmts); err != nil || min(n, b.limit) != len(p.Features) {
			return nil, fmt.Errorf("page %d: the SQL selects %d rows (%v), the API answered %d features", len(ps.targets), n, err, len(p.Features))
		}
		ps.targets = append(ps.targets, u.RequestURI())
		ps.stmts = append(ps.stmts, stmts)
		ps.features += len(p.Features)
		next = ""
		for _, l := range p.Links {
			if l.Rel == "next" {
				next = l.Href
			}
		}
	}
	rng := rand.New(rand.NewPCG(11, 12))
	rng.Shuffle(len(ps.targets), func(i, j int) {
		ps.targets[i], ps.targets[j] = ps.targets[j], ps.targets[i]
		ps.stmts[i], ps.stmts[j] = ps.stmts[j], ps.stmts[i]
	})
	return ps, nil
}

func (b *bench) pageRows(ctx context.Context, stmts []features.Statement) (int, error) {
	n := 0
	err := b.send(ctx, stmts, func() { n++ })
	return n, err
}

// send runs stmts in one batch, as the route does, and reads every row
// of the page into the types the route reads them into (the id as text,
// the properties and the GeoJSON geometry as bytes, sort values as text),
// then the count when there is one.
func (b *bench) send(ctx context.Context, stmts []features.Statement, row func()) error {
	batch := &pgx.Batch{}
	for _, st := range stmts {
		batch.Queue(st.SQL, st.Args...)
	}
	res := b.pool.SendBatch(ctx, batch)
	defer res.Close()
	rows, err := res.Query()
	if err != nil {
		return err
	}
	var key string
	var props, geom []byte
	dest := []any{&key, &props, &geom}
	for i := 3; i < len(rows.FieldDescriptions()); i++ {
		dest = append(dest, new(*string))
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			rows.Close()
			return err
		}
		row()
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(stmts) > 1 {
		var matched int64
		if err := res.QueryRow().Scan(&matched); err != nil {
			return err
		}
	}
	return res.Close()
}

func (b *bench) itemsSQL(ps *pages) load.Op {
	return func(_, i int) error {
		return b.send(context.Background(), ps.stmts[i%len(ps.stmts)], func() {})
	}
}

func (b *bench) itemsAPI(ps *pages, c int) load.Op {
	client, err := load.NewClient(b.base, c)
	if err != nil {
		panic(err)
	}
	h := load.Header{"Accept: application/geo+json"}
	return func(w, i int) error {
		target := ps.targets[i%len(ps.targets)]
		status, err := client.Get(w, target, h)
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("GET %s: status %d", target, status)
		}
		return err
	}
}

func errNote(r load.Result) string {
	if r.Errors == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d errors: %s)", r.Errors, r.FirstErr)
}

// copies times ogr2ogr copying places into a GeoPackage through geogate's
// OAPIF and straight from PostgreSQL, trials times each, alternating.
func (b *bench) copies(ctx context.Context, dbURL string, trials int) error {
	dir, err := os.MkdirTemp("", "geogate-bench-features-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	conn, err := gdalPG(dbURL)
	if err != nil {
		return err
	}
	sql, err := placesSQL(ctx, b.pool)
	if err != nil {
		return err
	}
	api := []string{"-f", "GPKG", filepath.Join(dir, "api.gpkg"), "OAPIF:" + b.base, "places", "-oo", "PAGE_SIZE=1000", "-nln", "places"}
	direct := []string{"-f", "GPKG", filepath.Join(dir, "pg.gpkg"), "PG:" + conn, "-sql", sql, "-nln", "places"}
	fmt.Printf("\nogr2ogr copy of places into a GeoPackage, %d alternating trials\n", trials)
	fmt.Printf("geogate: ogr2ogr %s\n", strings.Join(api, " "))
	fmt.Printf("PostgreSQL: ogr2ogr -f GPKG pg.gpkg PG:<conn> -sql %q -nln places\n", sql)
	// GDAL's own floor: the same features from a local GeoJSON file, which
	// GDAL parses as it parses the pages, with no network and no server.
	local := filepath.Join(dir, "places.geojson")
	floor := []string{"-f", "GPKG", filepath.Join(dir, "floor.gpkg"), local, "-nln", "places"}
	fmt.Printf("floor: ogr2ogr -f GPKG floor.gpkg places.geojson -nln places (places.geojson: the PostgreSQL copy written as GeoJSON once)\n")
	// ct is GDAL's own CPU in each copy through geogate: single-threaded,
	// it bounds that copy's time whatever the server does.
	var at, pt, ft, ct []float64
	var an, pn int
	for i := range trials {
		a, acpu, err := ogr(filepath.Join(dir, "api.gpkg"), api)
		if err != nil {
			return err
		}
		p, _, err := ogr(filepath.Join(dir, "pg.gpkg"), direct)
		if err != nil {
			return err
		}
		if i == 0 {
			if _, _, err := ogr(local, []string{"-f", "GeoJSON", local, filepath.Join(dir, "pg.gpkg"), "places"}); err != nil {
				return err
			}
		}
		f, _, err := ogr(filepath.Join(dir, "floor.gpkg"), floor)
		if err != nil {
			return err
		}
		ft, ct = append(ft, f), append(ct, acpu)
		if an, err = featureCount(filepath.Join(dir, "api.gpkg")); err != nil {
			return err
		}
		if pn, err = featureCount(filepath.Join(dir, "pg.gpkg")); err != nil {
			return err
		}
		fmt.Printf("trial %d: geogate %.2f s (ogr2ogr CPU %.2f s), PostgreSQL %.2f s (%d and %d features), GDAL from the local file %.2f s\n", i+1, a, acpu, p, an, pn, f)
		at, pt = append(at, a), append(pt, p)
	}
	if an != pn {
		return fmt.Errorf("the copies differ: %d features through geogate, %d from PostgreSQL", an, pn)
	}
	cols, err := columns(filepath.Join(dir, "api.gpkg"))
	if err != nil {
		return err
	}
	pcols, err := columns(filepath.Join(dir, "pg.gpkg"))
	if err != nil {
		return err
	}
	if !slices.Equal(cols, pcols) {
		return fmt.Errorf("the copies' columns differ: %v through geogate, %v from PostgreSQL", cols, pcols)
	}
	am, pm, fm, cm := median(at), median(pt), median(ft), median(ct)
	fmt.Printf("copy %d features, columns %s: geogate %.2f s (%.2f-%.2f) | PostgreSQL %.2f s (%.2f-%.2f) | ratio %.2f (PostgreSQL's time over geogate's) | floor %.2f s (%.2f-%.2f) | best %.2f (PostgreSQL's time over the floor's) | client %.2f s | bound %.2f (PostgreSQL's time over GDAL's own CPU in the copy through geogate)\n",
		an, strings.Join(cols, ","), am, slices.Min(at), slices.Max(at), pm, slices.Min(pt), slices.Max(pt), pm/am, fm, slices.Min(ft), slices.Max(ft), pm/fm, cm, pm/cm)
	return nil
}

// ogr runs ogr2ogr args into out (removed first) and returns its
// seconds, and the CPU seconds ogr2ogr itself spent.
func ogr(out string, args []string) (secs, cpu float64, err error) {
	_ = os.Remove(out)
	cmd := exec.Command("ogr2ogr", args...)
	cmd.Env = append(os.Environ(), "CPL_LOG=OFF")
	t0 := time.Now()
	msg, err := cmd.CombinedOutput()
	secs = time.Since(t0).Seconds()
	if err != nil {
		return 0, 0, fmt.Errorf("ogr2ogr %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	st := cmd.ProcessState
	return secs, (st.UserTime() + st.SystemTime()).Seconds(), nil
}

// featureCount reads the number of features of out's layer places.
func featureCount(out string) (int, error) {
	msg, err := exec.Command("ogrinfo", "-ro", "-so", out, "places").Output()
	if err != nil {
		return 0, fmt.Errorf("ogrinfo %s: %v", out, err)
	}
	for _, line := range strings.Split(string(msg), "\n") {
		if v, ok := strings.CutPrefix(line, "Feature Count: "); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("ogrinfo %s: no feature count", out)
}

// columns lists the attribute columns of out's layer places, sorted.
func columns(out string) ([]string, error) {
	msg, err := exec.Command("ogrinfo", "-ro", "-so", out, "places").Output()
	if err != nil {
		return nil, fmt.Errorf("ogrinfo %s: %v", out, err)
	}
	var cols []string
	// After the "Geometry Column = geom" line come "name: Type (w.p)".
	started := false
	for _, line := range strings.Split(string(msg), "\n") {
		if strings.HasPrefix(line, "Geometry Column") || strings.HasPrefix(line, "FID Column") {
			started = true
			continue
		}
		if name, _, ok := strings.Cut(line, ": "); ok && started && !strings.Contains(name, " ") {
			cols = append(cols, name)
		}
	}
	slices.Sort(cols)
	return cols, nil
}

// placesSQL selects of places what the OAPIF copy holds: the id, the
// name and each stored property as a column of its own, and the point.
func placesSQL(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	rows, err := pool.Query(ctx, "SELECT DISTINCT k FROM places, jsonb_object_keys(properties) k WHERE k NOT IN ('id', 'name') ORDER BY 1")
	if err != nil {
		return "", err
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", err
	}
	cols := []string{"id", "name"}
	for _, k := range keys {
		cols = append(cols, fmt.Sprintf("properties->>'%s' AS %s", strings.ReplaceAll(k, "'", "''"), pgx.Identifier{k}.Sanitize()))
	}
	return "SELECT " + strings.Join(cols, ", ") + ", geom FROM public.places", nil
}

// gdalPG writes a postgres:// URL as the keyword=value connection string
// GDAL's PG: driver takes.
func gdalPG(dbURL string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", err
	}
	kv := []string{"dbname=" + strings.TrimPrefix(u.Path, "/")}
	if h := u.Hostname(); h != "" {
		kv = append(kv, "host="+h)
	}
	if p := u.Port(); p != "" {
		kv = append(kv, "port="+p)
	}
	if n := u.User.Username(); n != "" {
		kv = append(kv, "user="+n)
	}
	if p, ok := u.User.Password(); ok {
		kv = append(kv, "password="+p)
	}
	for k, vs := range u.Query() {
		kv = append(kv, k+"="+vs[0])
	}
	return strings.Join(kv, " "), nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// startAPI starts `api serve` on a free loopback port with b.env and waits
// for /healthz. The returned func stops it.
func (b *bench) startAPI(bin string) (func(), error) {
	base, stop, err := apiproc.Start(bin, b.envList())
	if err != nil {
		return nil, err
	}
	b.base = base
	return stop, nil
}

func ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "bench/features: %q is not a positive integer\n", f)
			os.Exit(2)
		}
		out = append(out, n)
	}
	return out
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// envList is b.env as KEY=VALUE entries.
func (b *bench) envList() []string {
	var out []string
	for k, v := range b.env {
		out = append(out, k+"="+v)
	}
	return out
}
