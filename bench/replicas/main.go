// Command replicas measures reads from a streaming replica: /within at
// 1 km through an `api serve` that sends reads to a replica
// (DATABASE_REPLICA_URLS) next to one that reads the primary alone, on the
// same demo database, in alternating runs. The ratio is what routing costs
// per read (a Redis look-up of the caller's read floor, the pick of a
// replica); on a machine where primary, replica and load share two cores,
// the replica adds no capacity, so the point here is the overhead, not the
// scaling. Run it from the repository root:
//
//	go run ./bench/replicas -db postgres://geogate@127.0.0.1:55432/geogate -replica postgres://geogate@127.0.0.1:55435/geogate -redis redis://127.0.0.1:56379/0 -api bin/api
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/geogate/geogate/bench/internal/apiproc"
	"github.com/geogate/geogate/bench/internal/demo"
	"github.com/geogate/geogate/bench/internal/load"
)

func main() {
	db := flag.String("db", "", "PostgreSQL server URL (the primary)")
	replica := flag.String("replica", "", "a streaming replica of that server")
	rdb := flag.String("redis", "", "Redis URL")
	api := flag.String("api", "bin/api", "the api binary")
	concs := flag.String("c", "8,32", "concurrencies")
	dur := flag.Duration("d", 5*time.Second, "duration of each run")
	runs := flag.Int("runs", 3, "runs per side, alternating; medians are printed")
	flag.Parse()
	if err := run(*db, *replica, *rdb, *api, *concs, *dur, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "bench/replicas:", err)
		os.Exit(1)
	}
}

func run(server, replicaServer, redisURL, bin, concs string, dur time.Duration, runs int) error {
	ctx := context.Background()
	const name = "geogate_geofence_bench"
	dbURL, err := demo.EnsureDB(ctx, server, name)
	if err != nil {
		return err
	}
	replicaURL, err := withDB(replicaServer, name)
	if err != nil {
		return err
	}
	if err := caughtUp(ctx, dbURL, replicaURL); err != nil {
		return err
	}
	common := []string{"DATABASE_URL=" + dbURL, "REDIS_URL=" + redisURL, "RATELIMIT_GEOFENCE=100000/1s", "RATELIMIT_DATABASE=1000000000ms/1s",
		"DB_MAX_CONNS=8", "DB_MIN_CONNS=8", "LOG_LEVEL=warn", "MIGRATE_ON_START=false"}
	primaryOnly, stopA, err := apiproc.Start(bin, common)
	if err != nil {
		return err
	}
	defer stopA()
	routed, stopB, err := apiproc.Start(bin, append(common, "DATABASE_REPLICA_URLS="+replicaURL, "DB_REPLICA_MAX_LAG=1s"))
	if err != nil {
		return err
	}
	defer stopB()
	if err := replicaHealthy(routed); err != nil {
		return err
	}
	fmt.Printf("## Reads from a streaming replica (/within 1 km, median of %d runs of %s per side, alternating)\n\n", runs, dur)
	fmt.Println("The replica shares the machine's two cores with the primary, both services and the load; it adds no capacity here, so the ratio is the cost of routing (the read floor's Redis look-up and the pick of a replica), not the gain of scaling out.")
	fmt.Println()
	fmt.Println("| concurrency | reads on the primary alone, req/s (p50, p99 ms) | reads on the replica, req/s (p50, p99 ms) | ratio |")
	fmt.Println("|---|---|---|---|")
	for _, s := range strings.Split(concs, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("concurrency %q", s)
		}
		a, err := within(primaryOnly, c)
		if err != nil {
			return err
		}
		b, err := within(routed, c)
		if err != nil {
			return err
		}
		load.Run(c, dur/4, a) // warm both pools and plans
		load.Run(c, dur/4, b)
		res := load.Medians(runs, c, dur, a, b)
		fmt.Printf("| %d | %.0f (%.2f, %.2f)%s | %.0f (%.2f, %.2f)%s | %.1f%% |\n", c,
			res[0].Rate, res[0].P50, res[0].P99, errs(res[0]), res[1].Rate, res[1].P50, res[1].P99, errs(res[1]), 100*res[1].Rate/res[0].Rate)
	}
	fmt.Println()
	return nil
}

func errs(r load.Result) string {
	if r.Errors == 0 {
		return ""
	}
	return fmt.Sprintf(", %d errors (%s)", r.Errors, r.FirstErr)
}

// within is a /within load on base: a point of the demo data's Europe per
// request, anonymous.
func within(base string, c int) (load.Op, error) {
	client, err := load.NewClient(base, c)
	if err != nil {
		return nil, err
	}
	targets := make([]string, 64)
	for i := range targets {
		targets[i] = fmt.Sprintf("/within?lng=%.3f&lat=%.3f&radius=1000", 2+float64(i%16)*0.9, 44+float64(i/16)*2.5)
	}
	return func(w, i int) error {
		st, err := client.Get(w, targets[i%len(targets)], nil)
		if err == nil && st != http.StatusOK {
			err = fmt.Errorf("status %d", st)
		}
		return err
	}, nil
}

func withDB(server, name string) (string, error) {
	u, err := url.Parse(server)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

// caughtUp waits until the replica holds the database with as many places
// as the primary.
func caughtUp(ctx context.Context, primary, replica string) error {
	count := func(u string) (int64, error) {
		c, err := pgx.Connect(ctx, u)
		if err != nil {
			return 0, err
		}
		defer c.Close(ctx)
		var n int64
		err = c.QueryRow(ctx, "SELECT count(*) FROM places").Scan(&n)
		return n, err
	}
	want, err := count(primary)
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if got, err := count(replica); err == nil && got == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the replica at %s did not catch up within a minute", replica)
		}
	}
}

func replicaHealthy(base string) error {
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get(base + "/readyz"); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(body), `"healthy":true`) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the replica never became healthy for %s", base)
		}
	}
}
