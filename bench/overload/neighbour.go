package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/pg"
)

// neighbourSQL is a second application's heavy statement: CPU work on
// the same server, straight on the database, not through geogate.
const neighbourSQL = "SELECT count(*) FROM generate_series(1, 5000000)"

// startNeighbour keeps n connections of another application running
// neighbourSQL back to back until the returned func is called.
func startNeighbour(dbURL string, n int) (func(), error) {
	if n == 0 {
		return func() {}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	pool, err := pg.Open(ctx, dbURL, pg.Options{MaxConns: int32(n), AppName: "bench-neighbour"})
	if err != nil {
		cancel()
		return nil, err
	}
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loop(ctx, pool)
		}()
	}
	return func() { cancel(); wg.Wait(); pool.Close() }, nil
}

func loop(ctx context.Context, pool *pgxpool.Pool) {
	for ctx.Err() == nil {
		if _, err := pool.Exec(ctx, neighbourSQL); err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, "bench/overload: neighbour:", err)
			return
		}
	}
}
