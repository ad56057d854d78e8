package geofence

import (
	"context"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// benchPool opens GEOFENCE_BENCH_DB (a database holding the demo data, as
// bench/geofence leaves it), or skips: these benchmarks compare the handler
// with its SQL and are not part of the test suite.
func benchPool(b *testing.B) *pgxpool.Pool {
	url := os.Getenv("GEOFENCE_BENCH_DB")
	if url == "" {
		b.Skip("GEOFENCE_BENCH_DB is not set")
	}
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool
}

func BenchmarkWithinHandler(b *testing.B) {
	_, h := newRawService(b, benchPool(b), testTimeouts)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/within?lng=2.35&lat=48.85&radius=1000", nil))
			if w.Code != 200 {
				b.Fatal(w.Code)
			}
		}
	})
}

func BenchmarkWithinSQL(b *testing.B) {
	pool := benchPool(b)
	svc, _ := newRawService(b, pool, testTimeouts)
	sql, args, _ := svc.WithinSQL(WithinQuery{Layer: "places", Lng: 2.35, Lat: 48.85, Radius: 1000, Limit: 100})
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			rows, err := pool.Query(context.Background(), sql, args...)
			if err != nil {
				b.Fatal(err)
			}
			for rows.Next() {
			}
			rows.Close()
		}
	})
}
