// Command tiles measures geogate's tile path: cold tiles per second and
// p99 for tile sets at z4, z8 and z12 through the HTTP handler with the
// cache off, next to the identical tile SQL run straight through pgx at
// the same concurrency; and cached tiles per second and p99 (gzip, with
// the default in-process memory cache holding the set, so each costs a
// copy from memory and, once per version window, one Redis GET of the
// layer's version, as a hot tile in the service) with -c clients and with
// one client, whose p99 is the latency of a cached tile without queueing
// behind other clients on the 2 cores. The handler runs in this process on
// a loopback HTTP server (authentication, rate limits and access logs are
// not in the path); both sides use one pool, set as the service's tile
// pool is (-generic). The cold sides alternate, -runs times each, and
// medians are printed; -sets picks some of the sets. It imports the demo
// data into its own database (-dbname) on first use. Run it from the
// repository root:
//
//	go run ./bench/tiles -db postgres://geogate@127.0.0.1:55432/geogate -redis redis://127.0.0.1:56379/0
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/geogate/geogate/bench/internal/demo"
	"github.com/geogate/geogate/bench/internal/load"
	"github.com/geogate/geogate/internal/catalog"
	"github.com/geogate/geogate/internal/config"
	"github.com/geogate/geogate/internal/httpx"
	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/rdb"
	"github.com/geogate/geogate/internal/tiles"
)

func main() {
	dbURL := flag.String("db", envOr("DATABASE_URL", "postgres://geogate@127.0.0.1:55432/geogate?sslmode=disable"), "PostgreSQL server URL; the bench uses its own database on it")
	dbName := flag.String("dbname", "geogate_tiles_bench", "database holding the demo data (created and loaded when missing)")
	redisURL := flag.String("redis", envOr("REDIS_URL", "redis://127.0.0.1:56379/0"), "Redis URL")
	conc := flag.Int("c", 8, "concurrent clients")
	dur := flag.Duration("d", 5*time.Second, "duration of each run")
	setSize := flag.Int("n", 256, "tiles per set")
	runs := flag.Int("runs", 1, "runs of each cold side, alternating; medians are printed (the cached sides run once)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	generic := flag.Bool("generic", true, "plan each tile statement once per connection, as the service's tile pool does (both sides); false measures both with PostgreSQL's default plan choice")
	only := flag.String("sets", "", "comma-separated layer/zoom sets to run, such as places/12 (default: all)")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench/tiles:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(*dbURL, *dbName, *redisURL, *conc, *dur, *setSize, *runs, *only, *generic); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "bench/tiles:", err)
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func run(serverURL, dbName, redisURL string, conc int, dur time.Duration, setSize, runs int, only string, generic bool) error {
	ctx := context.Background()
	dbURL, err := demo.EnsureDB(ctx, serverURL, dbName)
	if err != nil {
		return err
	}
	pool, err := pg.Open(ctx, dbURL, pg.Options{MaxConns: int32(conc + 4), AppName: "geogate-bench-tiles", GenericPlans: generic, Schema: pg.DefaultSchema})
	if err != nil {
		return err
	}
	defer pool.Close()
	load.Groups = demo.ServerProcesses(pool, map[string]string{"geogate-bench-tiles": "pg:bench"})
	rc, err := rdb.Open(ctx, redisURL, 250*time.Millisecond)
	if err != nil {
		return err
	}
	defer rc.Close()

	// TILES_* settings from the environment tune the handler, as in the
	// service.
	cfg, err := config.Load(func(k string) string {
		if strings.HasPrefix(k, "TILES_") {
			return os.Getenv(k)
		}
		return map[string]string{"DATABASE_URL": dbURL, "REDIS_URL": redisURL}[k]
	})
	if err != nil {
		return err
	}
	quiet := silent()
	hctx, stop := context.WithCancel(ctx)
	defer stop()
	if err := ensureMillion(ctx, pool); err != nil {
		return err
	}
	cat, err := catalog.Open(hctx, pool, cfg.Catalog, quiet)
	if err != nil {
		return err
	}
	cold := cfg.Tiles
	cold.Cache = false
	coldS, err := tiles.New(hctx, pg.Runner{Pool: pool}, cat, cold, tiles.Options{Log: quiet})
	if err != nil {
		return err
	}
	coldH := tiles.NewHandler(coldS, cold, tiles.Access{})
	prefix := fmt.Sprintf("bench:%d:", time.Now().UnixNano())
	cached := cfg.Tiles
	cached.KeyPrefix = prefix
	warmS, err := tiles.New(hctx, pg.Runner{Pool: pool}, cat, cached, tiles.Options{Redis: rc, Log: quiet})
	if err != nil {
		return err
	}
	warmH := tiles.NewHandler(warmS, cached, tiles.Access{})
	coldURL, closeCold, err := serve(coldH)
	if err != nil {
		return err
	}
	defer closeCold()
	warmURL, closeWarm, err := serve(warmH)
	if err != nil {
		return err
	}
	defer closeWarm()
	defer cleanKeys(rc, prefix)

	r, err := tiles.NewRenderer(pg.Runner{Pool: pool}, cat, cfg.Tiles, quiet)
	if err != nil {
		return err
	}
	coldC, err := load.NewClient(coldURL, conc)
	if err != nil {
		return err
	}
	warm, err := load.NewClient(warmURL, conc)
	if err != nil {
		return err
	}
	fmt.Printf("tiles bench: %d clients, %s per run, %d runs, %d tiles per set (z4: every tile; z8, z12: the tiles holding most places)\n", conc, dur, runs, setSize)
	floor, err := httpFloor(conc, dur)
	if err != nil {
		return err
	}
	fmt.Printf("loopback HTTP floor (net/http answering 200 bytes, no handler work): %.0f req/s, p99 %.2f ms, bench %d us per request\n\n",
		floor.Rate, floor.P99, floor.CPU["bench"].Microseconds())
	fmt.Printf("%-10s %-4s | %12s %9s | %12s %9s | %6s | %12s %9s | %14s %9s\n", "layer", "zoom", "API cold t/s", "p99 ms", "pgx SQL t/s", "p99 ms", "ratio", "cached t/s", "p99 ms", "1 client t/s", "p99 ms")
	for _, l := range r.Layers() {
		for _, z := range []int{4, 8, 12} {
			if !chosen(only, l.ID, z) {
				continue
			}
			set, err := tileSet(ctx, pool, z, setSize)
			if err != nil {
				return err
			}
			targets := make([]string, len(set))
			for i, t := range set {
				targets[i] = path(l.ID, t)
			}
			res := load.Medians(runs, conc, dur, func(w, i int) error {
				return fetch(coldC, w, targets[i%len(targets)], nil)
			}, func(_, i int) error {
				sql, args := r.SQL(l, set[i%len(set)])
				var v *int64
				var mvt []byte
				return pool.QueryRow(ctx, sql, args...).Scan(&v, &mvt)
			})
			api, raw := res[0], res[1]
			for _, t := range targets { // fill the cache
				if err := fetch(warm, 0, t, gzip); err != nil {
					return err
				}
			}
			cached := load.Medians(1, conc, dur, func(w, i int) error { return fetch(warm, w, targets[i%len(targets)], gzip) })[0]
			single := load.Medians(1, 1, dur, func(w, i int) error { return fetch(warm, w, targets[i%len(targets)], gzip) })[0]
			fmt.Printf("%-10s z%-3d | %12.0f %9.2f | %12.0f %9.2f | %5.0f%% | %12.0f %9.2f | %14.0f %9.2f%s\n", l.ID, z,
				api.Rate, api.P99, raw.Rate, raw.P99, 100*api.Rate/raw.Rate, cached.Rate, cached.P99, single.Rate, single.P99, errNote(api, raw, cached, single))
			fmt.Printf("cpu %s z%d us/tile: cold API: %s; SQL: %s; cached: %s\n", l.ID, z,
				api.CPUNote("pg:bench", "bench"), raw.CPUNote("pg:bench", "bench"), cached.CPUNote("redis-server", "bench"))
		}
	}
	return composite(ctx, pool, r, coldC, only, setSize, runs, conc, dur)
}

// composite measures cold composite tiles of places and geofences through
// the handler next to the two layers' tile statements run one after the
// other through pgx.
func composite(ctx context.Context, pool *pgxpool.Pool, r *tiles.Renderer, coldC *load.Client, only string, setSize, runs, conc int, dur time.Duration) error {
	places, err := r.Layer("places")
	if err != nil {
		return err
	}
	fences, err := r.Layer("geofences")
	if err != nil {
		return err
	}
	for _, z := range []int{4, 8, 12} {
		if !chosen(only, "composite", z) {
			continue
		}
		set, err := tileSet(ctx, pool, z, setSize)
		if err != nil {
			return err
		}
		res := load.Medians(runs, conc, dur, func(w, i int) error {
			return fetch(coldC, w, path("places,geofences", set[i%len(set)]), nil)
		}, func(_, i int) error {
			for _, l := range []*tiles.Layer{places, fences} {
				sql, args := r.SQL(l, set[i%len(set)])
				var v *int64
				var mvt []byte
				if err := pool.QueryRow(ctx, sql, args...).Scan(&v, &mvt); err != nil {
					return err
				}
			}
			return nil
		})
		api, raw := res[0], res[1]
		fmt.Printf("composite places,geofences z%d | %.0f tiles/s p99 %.2f ms | SQL %.0f tiles/s p99 %.2f ms | %.0f%%%s\n",
			z, api.Rate, api.P99, raw.Rate, raw.P99, 100*api.Rate/raw.Rate, errNote(api, raw))
	}
	return nil
}

// ensureMillion makes the bench database's layer of a million points once
// (as the tests' user database has): a city each, moved at random within
// about 50 km.
func ensureMillion(ctx context.Context, pool *pgxpool.Pool) error {
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass('public.million') IS NOT NULL").Scan(&exists); err != nil || exists {
		return err
	}
	fmt.Fprintln(os.Stderr, "bench/tiles: making the million-point layer (once)")
	_, err := pool.Exec(ctx, `
		SELECT setseed(0.16);
		CREATE TABLE public.million (id bigint PRIMARY KEY, value integer NOT NULL, geom geometry(Point, 4326) NOT NULL);
		INSERT INTO public.million
		SELECT g, (random() * 1000)::int,
		       ST_SetSRID(ST_Point(greatest(-180, least(180, ST_X(p.geom) + (random() - 0.5))),
		                           greatest(-85, least(85, ST_Y(p.geom) + (random() - 0.5)))), 4326)
		FROM generate_series(1, 1000000) AS g
		JOIN public.places p ON p.id = 1 + (g::bigint * 7919) % (SELECT count(*) FROM public.places);
		CREATE INDEX million_geom_idx ON public.million USING gist (geom);
		ANALYZE public.million`)
	return err
}

// chosen reports whether the set of layer at zoom z is in the -sets list.
func chosen(only, layer string, z int) bool {
	return only == "" || slices.Contains(strings.Split(only, ","), fmt.Sprintf("%s/%d", layer, z))
}

func path(layer string, t tiles.Tile) string { return "/tiles/" + layer + "/" + t.String() + ".mvt" }

func errNote(rs ...load.Result) string {
	var n int64
	first := ""
	for _, r := range rs {
		n += r.Errors
		if first == "" {
			first = r.FirstErr
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("  (%d errors: %s)", n, first)
}

var gzip = load.Header{"Accept-Encoding: gzip"}

// fetch GETs target from worker w; 200 and 204 are successes.
func fetch(c *load.Client, w int, target string, h load.Header) error {
	status, err := c.Get(w, target, h)
	if err == nil && status != 200 && status != 204 {
		err = fmt.Errorf("GET %s: status %d", target, status)
	}
	return err
}

// tileSet is every tile of z4, or the n tiles of z holding most places.
func tileSet(ctx context.Context, db *pgxpool.Pool, z, n int) ([]tiles.Tile, error) {
	if z == 4 {
		var out []tiles.Tile
		for x := range 16 {
			for y := range 16 {
				out = append(out, tiles.Tile{Z: 4, X: x, Y: y})
			}
		}
		return out, nil
	}
	rows, err := db.Query(ctx, `
		SELECT floor((ST_X(geom) + 180) / 360 * 2^$1)::int,
		       floor((1 - ln(tan(radians(ST_Y(geom))) + 1 / cos(radians(ST_Y(geom)))) / pi()) / 2 * 2^$1)::int
		FROM places WHERE abs(ST_Y(geom)) < 85
		GROUP BY 1, 2 ORDER BY count(*) DESC LIMIT $2`, z, n)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (tiles.Tile, error) {
		t := tiles.Tile{Z: z}
		return t, row.Scan(&t.X, &t.Y)
	})
}

// silent is a logger that formats nothing: access logs are not what this
// measures.
func silent() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError + 1}))
}

func serve(h *tiles.Handler) (string, func(), error) {
	r := httpx.NewRouter(silent(), nil, httpx.TrustedProxies{})
	r.GET("/tiles/:layer/:z/:x/:y", h.Tile)
	return listen(r)
}

// listen serves handler on a loopback port and returns its base URL and a
// func closing it.
func listen(handler http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln) //nolint:errcheck
	return "http://" + ln.Addr().String(), func() { _ = srv.Close() }, nil
}

// httpFloor measures the cheapest answer over the same load client and
// HTTP server: a plain net/http handler writing 200 bytes. What it costs
// per request is the part of a tile's cost no tile handler can remove.
func httpFloor(conc int, dur time.Duration) (load.Result, error) {
	body := make([]byte, 200)
	url, closeSrv, err := listen(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", tiles.ContentType)
		_, _ = w.Write(body)
	}))
	if err != nil {
		return load.Result{}, err
	}
	defer closeSrv()
	c, err := load.NewClient(url, conc)
	if err != nil {
		return load.Result{}, err
	}
	defer c.Close()
	return load.Medians(1, conc, dur, func(w, _ int) error { return fetch(c, w, "/", nil) })[0], nil
}

// cleanKeys deletes the keys this run cached.
func cleanKeys(rc redis.UniversalClient, prefix string) {
	ctx := context.Background()
	iter := rc.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		rc.Del(ctx, iter.Val())
	}
}
