// Command geofence measures geogate's proximity and containment paths on
// the demo data, each next to its baseline in the same run:
//
//   - /within at radius 1 km and 20 km, at several concurrencies, through
//     the HTTP API of a real `api serve` process (authentication and the
//     "geofence" rate limit in the path, the limit raised out of the way,
//     a PostgreSQL pool of -api-pool connections: fewer server processes
//     than clients serve more on 2 cores)
//     next to the identical SQL driven straight through pgx at the same
//     concurrency: requests/s, p50 and p99 for both, and their ratio;
//   - the same /within through the geofence routes alone, served in this
//     process on a loopback port, to tell the handler's cost from the
//     rest of the API's (authentication, the limiter's Redis round trip);
//   - the same /within through a lean server in a process of its own (this
//     binary again, as "lean"): a bare Gin engine, one limiter decision
//     and the geofence handler, without the middleware chain or
//     authentication, and the handler alone on it; the same statement
//     through plain net/http and pgx with no code of geogate's ("raw");
//     and the loopback HTTP floor, a plain net/http handler in that
//     process. The API process's
//     CPU per request is set against 1.5 x (the pgx side's + the floor's),
//     each measured in this run, and the lean sides tell where the rest
//     goes;
//   - /within on the cities in Web Mercator (a projected layer) through the
//     API next to its SQL, and on places through its geometry index next
//     to the former query through a geography index;
//   - containment: points/s for batches of 1,000 random points through
//     POST /geofences/contains (the subdivided fences) next to the naive
//     ST_Intersects against the original polygons through pgx;
//   - containment on a team's polygon layer (the countries in Web
//     Mercator, keyed by text, with the subdivided copy of api publish
//     --contains) through the API, next to the same batches against the
//     demo fences through the API and next to the layer's identical SQL
//     through pgx.
//
// It loads the demo data into its own database with the importer on first
// use, starts the API binary on a free loopback port and stops it at the
// end. Run it from the repository root, after `go build -o bin/api ./cmd/api`:
//
//	go run ./bench/geofence -db postgres://geogate@127.0.0.1:55432/geogate -redis redis://127.0.0.1:56379/0
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
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
	"github.com/geogate/geogate/internal/geofence"
	"github.com/geogate/geogate/internal/httpx"
	"github.com/geogate/geogate/internal/openapi"
	"github.com/geogate/geogate/internal/pg"
)

func main() {
	dbURL := flag.String("db", envOr("DATABASE_URL", "postgres://geogate@127.0.0.1:55432/geogate?sslmode=disable"), "PostgreSQL server URL; the bench uses its own database on it")
	dbName := flag.String("dbname", "geogate_geofence_bench", "database holding the demo data (created and loaded when missing)")
	redisURL := flag.String("redis", envOr("REDIS_URL", "redis://127.0.0.1:56379/0"), "Redis URL for the API's rate limiter")
	apiBin := flag.String("api", "bin/api", "the API binary to start")
	concs := flag.String("c", "4,16,32", "concurrencies, comma-separated")
	radii := flag.String("r", "1000,20000", "radii in metres, comma-separated")
	dur := flag.Duration("d", 5*time.Second, "duration of each run")
	batchConc := flag.Int("batch-c", 4, "concurrency of the containment runs")
	runs := flag.Int("runs", 1, "runs of each case, alternating the sides; medians are printed")
	apiPool := flag.Int("api-pool", 8, "DB_MAX_CONNS of the API: a pool sized for the machine's cores (the direct SQL side keeps one connection per client)")
	lean := flag.String("serve-lean", "", "serve the lean /within on this address instead of measuring (the bench starts itself so)")
	flag.Parse()
	if *lean != "" {
		if err := serveLean(*lean, *dbURL, *redisURL); err != nil {
			fmt.Fprintln(os.Stderr, "bench/geofence lean:", err)
			os.Exit(1)
		}
		return
	}
	b := &bench{dur: *dur, runs: max(*runs, 1)}
	b.apiPool = *apiPool
	if err := b.run(*dbURL, *dbName, *redisURL, *apiBin, ints(*concs), ints(*radii), *batchConc); err != nil {
		fmt.Fprintln(os.Stderr, "bench/geofence:", err)
		os.Exit(1)
	}
}

type bench struct {
	dur    time.Duration
	runs   int
	points [][2]float64 // /within centres: random city positions
	base   string       // API base URL
	// apiPool is the API's DB_MAX_CONNS.
	apiPool  int
	svc      *geofence.Service
	settings geofence.Settings
}

func (b *bench) run(serverURL, dbName, redisURL, apiBin string, concs, radii []int, batchConc int) error {
	ctx := context.Background()
	dbURL, err := demo.EnsureDB(ctx, serverURL, dbName)
	if err != nil {
		return err
	}
	maxC := slices.Max(append(concs, batchConc))
	pool, err := pg.Open(ctx, dbURL, pg.Options{MaxConns: int32(maxC), AppName: "geogate-bench-geofence", Schema: pg.DefaultSchema, GenericPlans: true})
	if err != nil {
		return err
	}
	defer pool.Close()
	// CPU groups: "pg:api" serves `api serve`, "pg:bench" this process.
	load.Groups = demo.ServerProcesses(pool, map[string]string{"geogate": "pg:api", "geogate-bench-geofence": "pg:bench", "geogate-bench-lean": "pg:lean"})
	b.settings = benchSettings()
	// A bench database made by an older geogate lacks the functions of
	// later migrations (the subdivided copies').
	if err := pg.Migrate(ctx, pool, pg.Schemas{}, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		return err
	}
	if err := benchLayers(ctx, pool); err != nil {
		return err
	}
	cat, err := catalog.Open(ctx, pool, catalog.Settings{Schemas: []string{"public"}, Own: pg.DefaultSchema}, nil)
	if err != nil {
		return err
	}
	if err := subdivide(ctx, pool, cat, benchPolygons); err != nil {
		return err
	}
	b.svc = geofence.New(pg.Runner{Pool: pool}, cat, b.settings, nil)
	if err != nil {
		return err
	}
	inproc, err := b.serveInProcess()
	if err != nil {
		return err
	}
	if b.points, err = cityPoints(ctx, pool, 5000); err != nil {
		return err
	}
	stop, err := b.startAPI(apiBin, dbURL, redisURL)
	if err != nil {
		return err
	}
	defer stop()
	leanBase, stopLean, err := startLean(dbURL, redisURL)
	if err != nil {
		return err
	}
	defer stopLean()
	// Every server process behind the pools loads PostGIS on its first
	// query: pay that before any side is measured.
	for _, op := range []load.Op{b.withinSQL(pool, 1000), b.withinAPI(b.base, 1000, maxC), b.withinAPI(inproc, 1000, maxC), b.withinAPI(leanBase, 1000, maxC)} {
		load.Run(maxC, 2*time.Second, op)
	}

	fmt.Printf("/within, %v per run, the same random city centres for every side\n", b.dur)
	fmt.Printf("API: api serve (auth, rate limit, handler); handler: the geofence routes alone on a loopback server in this process\n")
	fmt.Printf("%-8s %4s | %10s %8s %8s | %10s %8s %8s | %6s | %11s %8s\n", "radius", "conc", "API req/s", "p50 ms", "p99 ms", "SQL q/s", "p50 ms", "p99 ms", "ratio", "handler r/s", "p99 ms")
	for _, r := range radii {
		for _, c := range concs {
			res := load.Medians(b.runs, c, b.dur, b.withinSQL(pool, float64(r)), b.withinAPI(b.base, float64(r), c), b.withinAPI(inproc, float64(r), c), b.withinAPI(leanBase, float64(r), c), b.floor(leanBase, c), b.withinAPI(leanBase+"/nolimit", float64(r), c), b.withinAPI(leanBase+"/raw", float64(r), c))
			sqlRes, apiRes, hRes, leanRes, floorRes, nolimRes, rawRes := res[0], res[1], res[2], res[3], res[4], res[5], res[6]
			fmt.Printf("range %d %d api %.0f-%.0f sql %.0f-%.0f handler %.0f-%.0f\n", r, c,
				apiRes.Lo, apiRes.Hi, sqlRes.Lo, sqlRes.Hi, hRes.Lo, hRes.Hi)
			fmt.Printf("%-8s %4d | %10.0f %8.2f %8.2f | %10.0f %8.2f %8.2f | %5.0f%% | %11.0f %8.2f%s\n",
				fmt.Sprintf("%d m", r), c, apiRes.Rate, apiRes.P50, apiRes.P99, sqlRes.Rate, sqlRes.P50, sqlRes.P99,
				100*apiRes.Rate/sqlRes.Rate, hRes.Rate, hRes.P99, errNote(apiRes)+errNote(sqlRes)+errNote(hRes))
			fmt.Printf("cpu %d %d us/request: SQL: %s; API: %s; handler: %s; lean: %s\n", r, c,
				sqlRes.CPUNote("pg:bench", "bench"), apiRes.CPUNote("pg:api", "api", "redis-server", "bench"), hRes.CPUNote("pg:bench", "bench"),
				leanRes.CPUNote("pg:lean", "lean", "redis-server", "bench"))
			us := func(r load.Result, g string) int64 { return r.CPU[g].Microseconds() }
			goal := 1.5 * float64(us(sqlRes, "bench")+us(floorRes, "lean"))
			fmt.Printf("apicpu %d %d api %d pgx %d floor %d lean %d nolimit %d goal %.0f floorrate %.0f raw %d\n", r, c,
				us(apiRes, "api"), us(sqlRes, "bench"), us(floorRes, "lean"), us(leanRes, "lean"), us(nolimRes, "lean"), goal, floorRes.Rate, us(rawRes, "lean"))
		}
	}

	b.gateCase(leanBase, maxC)

	b.layerCases(pool, concs[0])

	fmt.Printf("\ncontainment, batches of 1000 random points (lng -180..180, lat -60..75), concurrency %d\n", batchConc)
	fmt.Printf("%-44s %12s %8s\n", "path", "points/s", "p99 ms")
	batches := randomBatches(64, 1000)
	res := load.Medians(b.runs, batchConc, b.dur, b.batchAPI(batches, batchConc),
		b.batchSQL(pool, geofence.ContainsBatchSQL, batches), b.batchSQL(pool, geofence.NaiveContainsBatchSQL, batches))
	api, sub, naive := res[0], res[1], res[2]
	fmt.Printf("range containment api %.0f-%.0f sql %.0f-%.0f naive %.0f-%.0f\n",
		api.Lo*1000, api.Hi*1000, sub.Lo*1000, sub.Hi*1000, naive.Lo*1000, naive.Hi*1000)
	fmt.Printf("%-44s %12.0f %8.1f%s\n", "API POST /geofences/contains (subdivided)", api.Rate*1000, api.P99, errNote(api))
	fmt.Printf("%-44s %12.0f %8.1f%s\n", "SQL, subdivided parts (same query as API)", sub.Rate*1000, sub.P99, errNote(sub))
	fmt.Printf("%-44s %12.0f %8.1f%s\n", "SQL, naive ST_Intersects on whole polygons", naive.Rate*1000, naive.P99, errNote(naive))
	fmt.Printf("API vs naive: %.1fx\n", api.Rate/naive.Rate)

	b.layerContains(pool, batches, batchConc)
	return nil
}

// benchPolygons is the team's polygon layer of the containment case.
const benchPolygons = "bench_countries_3857"

// subdivide gives layer its subdivided copy, as api publish --contains
// does, unless it has one, before the API starts and reads the catalog.
func subdivide(ctx context.Context, pool *pgxpool.Pool, cat *catalog.Catalog, layer string) error {
	l := cat.Layer(layer)
	if l == nil {
		return fmt.Errorf("no layer %s", layer)
	}
	if l.Parts != nil {
		return nil
	}
	if _, err := geofence.InstallParts(ctx, pool, pg.DefaultSchema, l); err != nil {
		return err
	}
	_, err := cat.Refresh(ctx)
	return err
}

// layerContains measures batches on the team's polygon layer through the
// API, the same batches on the demo fences through the API, and the
// layer's statement through pgx, at concurrency c.
func (b *bench) layerContains(pool *pgxpool.Pool, batches [][][2]float64, c int) {
	sql, ok := b.svc.ContainsSQL(benchPolygons)
	if !ok {
		fmt.Printf("\nno polygon layer %s\n", benchPolygons)
		return
	}
	fmt.Printf("\ncontainment on a team's polygon layer (%s: countries in EPSG:3857, text keys, subdivided copy), the same batches, concurrency %d\n", benchPolygons, c)
	fmt.Printf("%-44s %12s %8s\n", "path", "points/s", "p99 ms")
	res := load.Medians(b.runs, c, b.dur, b.batchAPIOn(benchPolygons, batches, c), b.batchAPIOn("", batches, c), b.batchLayerSQL(pool, sql, batches))
	layer, fences, direct := res[0], res[1], res[2]
	fmt.Printf("range layercontains api %.0f-%.0f fences %.0f-%.0f sql %.0f-%.0f\n",
		layer.Lo*1000, layer.Hi*1000, fences.Lo*1000, fences.Hi*1000, direct.Lo*1000, direct.Hi*1000)
	fmt.Printf("%-44s %12.0f %8.1f%s\n", "Layer API POST /geofences/contains?layer=", layer.Rate*1000, layer.P99, errNote(layer))
	fmt.Printf("%-44s %12.0f %8.1f%s\n", "Fences API POST /geofences/contains", fences.Rate*1000, fences.P99, errNote(fences))
	fmt.Printf("%-44s %12.0f %8.1f%s\n", "Layer SQL (same query as API)", direct.Rate*1000, direct.P99, errNote(direct))
}

// batchLayerSQL is batchSQL for a layer's statement, whose keys are text.
func (b *bench) batchLayerSQL(pool *pgxpool.Pool, sql string, batches [][][2]float64) load.Op {
	return func(_, i int) error {
		pts := batches[i%len(batches)]
		lngs, lats := make([]float64, len(pts)), make([]float64, len(pts))
		for j, p := range pts {
			lngs[j], lats[j] = p[0], p[1]
		}
		rows, err := pool.Query(context.Background(), sql, lngs, lats)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k int64
			var key string
			if err := rows.Scan(&k, &key); err != nil {
				return err
			}
		}
		return rows.Err()
	}
}

func errNote(r load.Result) string {
	if r.Errors == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d errors: %s)", r.Errors, r.FirstErr)
}

// withinSQL runs the service's /within statement for the default page
// (100 rows) and reads every column, as the service does.
func (b *bench) withinSQL(pool *pgxpool.Pool, r float64) load.Op {
	return b.layerSQL(pool, "places", r)
}

// layerSQL is withinSQL on layer.
func (b *bench) layerSQL(pool *pgxpool.Pool, layer string, r float64) load.Op {
	return func(_, i int) error {
		p := b.points[i%len(b.points)]
		sql, args, _ := b.svc.WithinSQL(geofence.WithinQuery{Layer: layer, Lng: p[0], Lat: p[1], Radius: r, Limit: 100})
		rows, err := pool.Query(context.Background(), sql, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string // the key, as text
			var name string
			var d float64
			var props, geom []byte
			if err := rows.Scan(&id, &name, &d, &props, &geom); err != nil {
				return err
			}
		}
		return rows.Err()
	}
}

func (b *bench) withinAPI(base string, r float64, c int) load.Op {
	return b.layerAPI(base, "places", r, c)
}

// layerAPI is withinAPI on layer.
func (b *bench) layerAPI(base, layer string, r float64, c int) load.Op {
	client, err := load.NewClient(base, c)
	if err != nil {
		panic(err)
	}
	targets := make([]string, len(b.points))
	for i, p := range b.points {
		targets[i] = fmt.Sprintf("/within?lng=%s&lat=%s&radius=%s&layer=%s", num(p[0]), num(p[1]), num(r), layer)
	}
	return func(w, i int) error {
		return ok(client.Get(w, targets[i%len(targets)], nil))
	}
}

// floor is a GET of the lean process's plain net/http handler.
func (b *bench) floor(base string, c int) load.Op {
	client, err := load.NewClient(base, c)
	if err != nil {
		panic(err)
	}
	return func(w, _ int) error { return ok(client.Get(w, "/floor", nil)) }
}

func ok(status int, err error) error {
	if err == nil && status != 200 {
		err = fmt.Errorf("status %d", status)
	}
	return err
}

func (b *bench) batchAPI(batches [][][2]float64, c int) load.Op {
	return b.batchAPIOn("", batches, c)
}

// batchAPIOn is batchAPI on layer ("" the demo fences).
func (b *bench) batchAPIOn(layer string, batches [][][2]float64, c int) load.Op {
	target := "/geofences/contains"
	if layer != "" {
		target += "?layer=" + layer
	}
	client, err := load.NewClient(b.base, c)
	if err != nil {
		panic(err)
	}
	bodies := make([][]byte, len(batches))
	for i, pts := range batches {
		bodies[i], _ = json.Marshal(map[string]any{"points": pts})
	}
	h := load.Header{"Content-Type: application/json"}
	return func(w, i int) error {
		return ok(client.Do(w, "POST", target, h, bodies[i%len(bodies)]))
	}
}

func (b *bench) batchSQL(pool *pgxpool.Pool, sql string, batches [][][2]float64) load.Op {
	return func(_, i int) error {
		pts := batches[i%len(batches)]
		lngs, lats := make([]float64, len(pts)), make([]float64, len(pts))
		for j, p := range pts {
			lngs[j], lats[j] = p[0], p[1]
		}
		rows, err := pool.Query(context.Background(), sql, lngs, lats)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k, id int64
			if err := rows.Scan(&k, &id); err != nil {
				return err
			}
		}
		return rows.Err()
	}
}

func randomBatches(n, size int) [][][2]float64 {
	rng := rand.New(rand.NewPCG(42, 7))
	out := make([][][2]float64, n)
	for i := range out {
		out[i] = make([][2]float64, size)
		for j := range out[i] {
			out[i][j] = [2]float64{-180 + rng.Float64()*360, -60 + rng.Float64()*135}
		}
	}
	return out
}

// cityPoints returns n random city positions, the same ones every run.
func cityPoints(ctx context.Context, pool *pgxpool.Pool, n int) ([][2]float64, error) {
	rows, err := pool.Query(ctx, "SELECT ST_X(geom), ST_Y(geom) FROM places ORDER BY id")
	if err != nil {
		return nil, err
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]float64, error) {
		var p [2]float64
		err := r.Scan(&p[0], &p[1])
		return p, err
	})
	if err != nil || len(all) == 0 {
		return nil, fmt.Errorf("read cities: %v (%d rows)", err, len(all))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	out := make([][2]float64, n)
	for i := range out {
		out[i] = all[rng.IntN(len(all))]
	}
	return out, nil
}

// serveInProcess serves the /within handler alone (no authentication, no
// rate limit) on a loopback port of this process and returns the base URL.
func (b *bench) serveInProcess() (string, error) {
	r := httpx.NewRouter(slog.New(slog.NewTextHandler(io.Discard, nil)), nil, httpx.TrustedProxies{})
	r.GET("/within", geofence.NewHandler(b.svc, b.settings, geofence.Access{}).Within)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go func() { _ = http.Serve(ln, r) }()
	return "http://" + ln.Addr().String(), nil
}

// startAPI starts `api serve` on a free loopback port with the geofence
// rate limit raised out of the way and waits for /healthz. The returned
// func stops it.
func (b *bench) startAPI(bin, dbURL, redisURL string) (func(), error) {
	base, stop, err := apiproc.Start(bin, []string{
		"DATABASE_URL=" + dbURL, "REDIS_URL=" + redisURL,
		"RATELIMIT_GEOFENCE=100000/1s", // the exact log's largest window
		// Every request is charged at least a millisecond of the database
		// budget, which would cap one client at 4,000 requests a second.
		"RATELIMIT_DATABASE=1000000000ms/1s",
		"DB_MAX_CONNS=" + strconv.Itoa(b.apiPool), "DB_MIN_CONNS=" + strconv.Itoa(b.apiPool),
		"LOG_LEVEL=warn", // no access log line per request
	})
	if err != nil {
		return nil, err
	}
	b.base = base
	return stop, nil
}

// benchSettings are the geofence settings of the in-process sides.
func benchSettings() geofence.Settings {
	return geofence.Settings{
		Timeouts: geofence.Timeouts{QueryTimeout: 2 * time.Second, AcquireTimeout: time.Second},
		Rules: geofence.Rules{
			Limits:      openapi.Limits{MaxRadius: 100_000, DefaultLimit: 100, MaxLimit: 1000, MaxBatchPoints: 1000},
			MaxVertices: 100_000, MaxBodyBytes: 5 << 20,
		},
	}
}

func ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "bench/geofence: %q is not a positive integer\n", f)
			os.Exit(2)
		}
		out = append(out, n)
	}
	return out
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// benchLayers makes the bench database's extra layers once: the cities in
// Web Mercator (a team's projected table), a copy of places with the
// geography index places had before /within used its geometry index, and
// the countries as a team keeps them, in Web Mercator (cut at 85 degrees
// of latitude) keyed by a text code.
func benchLayers(ctx context.Context, pool *pgxpool.Pool) error {
	_, err := pool.Exec(ctx, `
		CREATE TABLE IF NOT EXISTS public.bench_countries_3857 AS
		  SELECT name AS iso3, properties,
		         ST_Multi(ST_CollectionExtract(ST_Transform(ST_Intersection(geom, ST_MakeEnvelope(-180, -85, 180, 85, 4326)), 3857), 3))::geometry(MultiPolygon, 3857) AS geom
		  FROM public.geofences WHERE NOT ST_IsEmpty(ST_Intersection(geom, ST_MakeEnvelope(-180, -85, 180, 85, 4326)));
		DO $$ BEGIN
		  IF NOT EXISTS (SELECT FROM pg_index WHERE indrelid = 'public.bench_countries_3857'::regclass AND indisprimary) THEN
		    ALTER TABLE public.bench_countries_3857 ADD PRIMARY KEY (iso3);
		  END IF;
		END $$;
		CREATE INDEX IF NOT EXISTS bench_countries_3857_geom_idx ON public.bench_countries_3857 USING gist (geom);
		ANALYZE public.bench_countries_3857;`)
	if err != nil {
		return err
	}
	_, err = pool.Exec(ctx, `
		CREATE TABLE IF NOT EXISTS public.bench_places_3857 AS
		  SELECT id, name, properties, ST_Transform(geom, 3857)::geometry(Point, 3857) AS geom FROM public.places;
		CREATE INDEX IF NOT EXISTS bench_places_3857_geom_idx ON public.bench_places_3857 USING gist (geom);
		CREATE TABLE IF NOT EXISTS public.bench_places_geog AS SELECT id, name, properties, geom FROM public.places;
		CREATE INDEX IF NOT EXISTS bench_places_geog_idx ON public.bench_places_geog USING gist ((geom::geography));
		ANALYZE public.bench_places_3857; ANALYZE public.bench_places_geog`)
	return err
}

// layerCases measures /within on the cities in Web Mercator through the
// API next to its SQL, and /within on places through its geometry index
// next to the former query through the geography index, at concurrency c.
func (b *bench) layerCases(pool *pgxpool.Pool, c int) {
	fmt.Printf("\n/within on other layers, concurrency %d\n", c)
	for _, r := range []float64{1000, 20000} {
		res := load.Medians(b.runs, c, b.dur, b.layerAPI(b.base, "bench_places_3857", r, c), b.layerSQL(pool, "bench_places_3857", r))
		api, sql := res[0], res[1]
		fmt.Printf("mercator %.0f m: API %.0f req/s p99 %.2f ms | SQL %.0f q/s p99 %.2f ms | range api %.0f-%.0f sql %.0f-%.0f%s\n",
			r, api.Rate, api.P99, sql.Rate, sql.P99, api.Lo, api.Hi, sql.Lo, sql.Hi, errNote(api)+errNote(sql))
		res = load.Medians(b.runs, c, b.dur, b.layerSQL(pool, "places", r), b.formerSQL(pool, r))
		native, former := res[0], res[1]
		fmt.Printf("geography %.0f m: native %.0f q/s p99 %.2f ms | former %.0f q/s p99 %.2f ms | range native %.0f-%.0f former %.0f-%.0f%s\n",
			r, native.Rate, native.P99, former.Rate, former.P99, native.Lo, native.Hi, former.Lo, former.Hi, errNote(native)+errNote(former))
	}
}

// formerSQL is the /within statement places was searched with before, on
// its geography index (geom::geography), against bench_places_geog.
func (b *bench) formerSQL(pool *pgxpool.Pool, r float64) load.Op {
	return func(_, i int) error {
		p := b.points[i%len(b.points)]
		rows, err := pool.Query(context.Background(), formerWithinSQL, p[0], p[1], r, 101, nil, nil, nil)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var name string
			var d float64
			var props, geom []byte
			if err := rows.Scan(&id, &name, &d, &props, &geom); err != nil {
				return err
			}
		}
		return rows.Err()
	}
}

// formerWithinSQL is the /within statement of geogate before it searched
// layers through their own geometry index: both steps through ST_DWithin
// on geom::geography and its expression index.
const formerWithinSQL = `
WITH pt AS MATERIALIZED (
  SELECT ST_SetSRID(ST_MakePoint($1::float8, $2::float8), 4326)::geography AS g
),
bound AS (
  SELECT max(ST_Distance(c.geom::geography, (SELECT g FROM pt), true)) AS d
  FROM (
    SELECT l.geom FROM public.bench_places_geog l
    WHERE ST_DWithin(l.geom::geography, (SELECT g FROM pt), $3::float8)
      AND ($6::bigint IS NULL
           OR (ST_Distance(l.geom::geography, (SELECT g FROM pt), true), l.id) > ($5::float8, $6::bigint))
    ORDER BY l.geom::geography <-> (SELECT g FROM pt)
    LIMIT $4::int
  ) c
)
SELECT r.id, coalesce(r.name::text, ''), r.d,
  CASE WHEN $7::text[] IS NULL THEN coalesce(r.properties, '{}'::jsonb)
       ELSE (SELECT coalesce(jsonb_object_agg(e.key, e.value), '{}'::jsonb)
             FROM jsonb_each(coalesce(r.properties, '{}'::jsonb)) e WHERE e.key = ANY($7::text[]))
  END - '{name,distance_m}'::text[],
  ST_AsGeoJSON(r.geom)
FROM (
  SELECT l.id, l.name, l.properties, l.geom,
         ST_Distance(l.geom::geography, (SELECT g FROM pt), true) AS d
  FROM public.bench_places_geog l
  WHERE ST_DWithin(l.geom::geography, (SELECT g FROM pt),
                   LEAST($3::float8, (SELECT d FROM bound) * (1 + 1e-9) + 1e-6))
    AND ST_DWithin(l.geom::geography, (SELECT g FROM pt), $3::float8)
    AND ($6::bigint IS NULL
         OR (ST_Distance(l.geom::geography, (SELECT g FROM pt), true), l.id) > ($5::float8, $6::bigint))
  ORDER BY d, l.id
  LIMIT $4::int
) r
ORDER BY r.d, r.id`

// gateCase measures what the gate adds to /within at 1 km: the lean
// process's /within behind one limiter decision, against the same
// requests through the gate (the route's policy and the database budget
// admitted together, the statement metered and settled), in alternating
// runs. Each side's spread over its runs is the noise its difference is
// held against.
func (b *bench) gateCase(leanBase string, c int) {
	runs := max(b.runs, 5)
	alone, gated := b.withinAPI(leanBase, 1000, c), b.withinAPI(leanBase+"/gate", 1000, c)
	var a, g []load.Result
	for range runs {
		load.Run(c, load.Warm, alone)
		a = append(a, load.Run(c, b.dur, alone))
		load.Run(c, load.Warm, gated)
		g = append(g, load.Run(c, b.dur, gated))
	}
	fmt.Printf("\nthe gate: /within at 1 km, concurrency %d, %d alternating runs of %v each\n", c, runs, b.dur)
	fmt.Printf("%-22s %s\n", "side", "req/s per run (CPU us/request of the serving process)")
	for _, side := range []struct {
		name string
		rs   []load.Result
	}{{"limiter alone", a}, {"gate", g}} {
		fmt.Printf("%-22s", side.name)
		for _, r := range side.rs {
			fmt.Printf(" %.0f (%d)", r.Rate, r.CPU["lean"].Microseconds())
		}
		fmt.Println(errNote(side.rs[0]))
	}
	ma, mg := medianRate(a), medianRate(g)
	lo, hi := spread(a)
	fmt.Printf("gate %d alone %.0f gate %.0f ratio %.3f alone-noise %.3f-%.3f\n", c, ma, mg, mg/ma, lo/ma, hi/ma)
}

// medianRate is the median rate of rs.
func medianRate(rs []load.Result) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = r.Rate
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// spread is the lowest and highest rate of rs.
func spread(rs []load.Result) (lo, hi float64) {
	lo, hi = rs[0].Rate, rs[0].Rate
	for _, r := range rs[1:] {
		lo, hi = min(lo, r.Rate), max(hi, r.Rate)
	}
	return lo, hi
}
