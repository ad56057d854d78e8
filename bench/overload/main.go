// Command overload measures the fair queue in front of the database when
// PostgreSQL is saturated by callers that are each within their own rate
// limits. Many heavy API keys keep big requests going in a closed loop
// (/within 20 km, items pages of 1,000 places, cold low-zoom tiles) while
// a few light keys send /within 1 km at a fixed rate, open loop. The same
// `api serve` runs twice, with DB_FAIR_SHARE on and off and everything else
// equal; trials alternate between them. Each trial also measures the light
// load alone, to give the latency the light callers have when nothing else
// runs. It prints what the light callers saw, what the heavy ones got and
// how much work the database completed, and "RESULT overload ..." lines for
// scripts/bench.sh. Run it from the repository root:
//
//	go run ./bench/overload -db postgres://geogate@127.0.0.1:55432/geogate -redis redis://127.0.0.1:56379/0 -api bin/api
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/bench/internal/apiproc"
	"github.com/geogate/geogate/bench/internal/demo"
	"github.com/geogate/geogate/bench/internal/load"
	"github.com/geogate/geogate/internal/pg"
)

type config struct {
	db, redis, api string
	dur            time.Duration
	runs           int
	heavyKeys      int
	heavyConc      int
	lightKeys      int
	lightRate      float64
	// name is the case's, in RESULT lines: overload, or a variant.
	name string
	// account, when set, makes every heavy key one account's.
	account string
	// neighbour is how many connections of another application run
	// heavy statements on the database throughout.
	neighbour int
	// spin is how many processes burn CPU beside the heavy load, without
	// touching the database or the service.
	spin int
}

func main() {
	spinIfChild()
	var c config
	flag.StringVar(&c.db, "db", "", "PostgreSQL server URL")
	flag.StringVar(&c.redis, "redis", "", "Redis URL")
	flag.StringVar(&c.api, "api", "bin/api", "the api binary")
	flag.DurationVar(&c.dur, "d", 3*time.Second, "duration of each measured trial")
	flag.IntVar(&c.runs, "runs", 3, "trials per side, alternating; medians are printed")
	flag.IntVar(&c.heavyKeys, "heavy", 40, "heavy API keys")
	flag.IntVar(&c.heavyConc, "heavy-conc", 80, "closed-loop heavy clients, spread over the heavy keys")
	flag.IntVar(&c.lightKeys, "light", 4, "light API keys")
	flag.Float64Var(&c.lightRate, "light-rate", 20, "requests per second of each light key, open loop")
	flag.StringVar(&c.name, "name", "overload", "the case's name in RESULT lines")
	flag.StringVar(&c.account, "account", "", "make every heavy key this account's")
	flag.IntVar(&c.neighbour, "neighbour", 0, "connections of a second application running heavy statements straight on the database throughout")
	flag.IntVar(&c.spin, "spin", 0, "processes that only burn CPU beside the heavy load (with -heavy-conc 0: a crowd that never touches PostgreSQL)")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "bench/overload:", err)
		os.Exit(1)
	}
}

// side is one `api serve`: fair sharing on or off.
type side struct {
	name string // "on" or "off"
	base string
}

func run(c config) error {
	ctx := context.Background()
	dbURL, err := demo.EnsureDB(ctx, c.db, "geogate_geofence_bench")
	if err != nil {
		return err
	}
	pool, err := pg.Open(ctx, dbURL, pg.Options{MaxConns: 2, AppName: "geogate-bench-overload"})
	if err != nil {
		return err
	}
	defer pool.Close()
	// The database work of the run is that of the service's connections,
	// not of the driver's or of other clients of the same server.
	load.Groups = demo.ServerProcesses(pool, map[string]string{"geogate": "pg:api", "geogate-tiles": "pg:api"})

	heavyPrefix := "overload-heavy"
	if c.account != "" {
		heavyPrefix = c.account
	}
	heavyKeys, err := createKeys(c.api, dbURL, heavyPrefix, c.heavyKeys, c.account)
	if err != nil {
		return err
	}
	lightKeys, err := createKeys(c.api, dbURL, "overload-light", c.lightKeys, "")
	if err != nil {
		return err
	}
	points, err := cityPoints(ctx, pool, 64)
	if err != nil {
		return err
	}
	sides, stop, err := startSides(c, dbURL)
	if err != nil {
		return err
	}
	defer stop()
	cursors, err := cursorPages(sides[0].base, heavyKeys[0], 40)
	if err != nil {
		return err
	}
	w := &workload{
		heavy: heavyTargets(points, cursors), heavyKeys: heavyKeys, heavyConc: c.heavyConc,
		light: lightTargets(points), lightKeys: lightKeys, lightRate: c.lightRate, spin: c.spin,
	}
	stopNeighbour, err := startNeighbour(dbURL, c.neighbour)
	if err != nil {
		return err
	}
	defer stopNeighbour()
	printHeader(c, w)
	trials := map[string][]trial{}
	for _, s := range sides { // connections open, keys cached, plans made
		w.overload(pool, s.base, load.Warm)
	}
	for i := range max(c.runs, 1) {
		for _, s := range sides {
			t := w.trial(pool, s.base, c.dur)
			trials[s.name] = append(trials[s.name], t)
			fmt.Printf("trial %d fair share %-3s | %s\n", i+1, s.name, t)
		}
	}
	fmt.Println()
	report(c, trials)
	return nil
}

// startSides starts `api serve` with fair sharing on and off, everything
// else equal, and returns them with a func that stops both.
func startSides(c config, dbURL string) ([]side, func(), error) {
	common := []string{
		"DATABASE_URL=" + dbURL, "REDIS_URL=" + c.redis, "LOG_LEVEL=warn", "MIGRATE_ON_START=false",
		"DB_MAX_CONNS=8", "DB_MIN_CONNS=8",
		// Each heavy key stays within its limits: the point is that the
		// sum, not any one caller, is too much for the database.
		"RATELIMIT_GEOFENCE=100000/1s", "RATELIMIT_FEATURES=100000/1s", "RATELIMIT_TILES=100000/1s", "RATELIMIT_DATABASE=1000000000ms/1s",
		// Every tile is a render: the tiles are meant to load PostgreSQL.
		"TILES_CACHE=false", "TILES_MEMORY_CACHE_MB=0",
		// Both services accept the cursors of the items pages.
		"GEOFENCE_CURSOR_KEY=overload-bench-cursor-key",
	}
	var sides []side
	var stops []func()
	stopAll := func() {
		for _, s := range stops {
			s()
		}
	}
	for _, s := range []struct{ name, value string }{{"on", "true"}, {"off", "false"}} {
		env := append(common, "DB_FAIR_SHARE="+s.value)
		if s.name == "on" {
			env = append(env, strings.Fields(os.Getenv("OVERLOAD_ON_ENV"))...)
		}
		base, stop, err := apiproc.Start(c.api, env)
		if err != nil {
			stopAll()
			return nil, nil, err
		}
		sides = append(sides, side{s.name, base})
		stops = append(stops, stop)
	}
	return sides, stopAll, nil
}

func printHeader(c config, w *workload) {
	fmt.Printf("## %s: light callers next to heavy ones saturating PostgreSQL, fair share on and off (median of %d trials of %s per side, alternating)\n\n", c.name, c.runs, c.dur)
	fmt.Printf("load average at the start: %s\n", loadAvg())
	fmt.Printf("heavy: %d API keys, %d closed-loop clients (each key within its limits, raised to 100000/1s), in turn: /within 20 km around %d cities, items pages of 1,000 places in %d boxes of 5 degrees, items pages of 1,000 at %d cursors through the layer, cold tiles of places and geofences at z4 and z5 (%d, tile cache off)\n",
		c.heavyKeys, c.heavyConc, len(w.heavy.within), len(w.heavy.boxes), len(w.heavy.cursors), len(w.heavy.tiles))
	if c.account != "" {
		fmt.Printf("the heavy keys are one account's (%s): the fair queue weighs them as one caller (DB_FAIR_IDENTITY=account, the default)\n", c.account)
	}
	if c.spin > 0 {
		fmt.Printf("spin: %d processes burn CPU beside the heavy load (not in the light load alone), touching neither the database nor the service\n", c.spin)
	}
	if c.neighbour > 0 {
		fmt.Printf("neighbour: a second application's %d connections run %q back to back on the same database throughout, light load alone included, not through geogate\n", c.neighbour, neighbourSQL)
	}
	fmt.Printf("light: %d API keys, %.0f req/s each, open loop (latency from each request's scheduled time): /within 1 km around %d cities; unloaded: the same light load alone on the same service\n", c.lightKeys, c.lightRate, len(w.light))
	fmt.Println("api serve: DB_MAX_CONNS=8 (DB_FAIR_SLOTS the same, adaptive down to 2), TILES_DB_MAX_CONNS 10 (off: a pool of its own; on: shares the 8 slots), DB_FAIR_MAX_WAIT and DB_ACQUIRE_TIMEOUT 1s, everything else default but DB_FAIR_SHARE")
	fmt.Println("db: completed transactions of the bench database (pg_stat_database.xact_commit) per second over the measured window; every statement of the service is one. PostgreSQL publishes each server process's counts at most once a second, so this is read over a window that starts under load; pg CPU: CPU seconds per second of the service's server processes")
	fmt.Println()
}

// loadAvg is the machine's 1, 5 and 15 minute load averages.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// commits is the bench database's count of committed transactions.
func commits(ctx context.Context, pool *pgxpool.Pool) int64 {
	var n int64
	if err := pool.QueryRow(ctx, "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()").Scan(&n); err != nil {
		fmt.Fprintln(os.Stderr, "bench/overload: read xact_commit:", err)
	}
	return n
}
