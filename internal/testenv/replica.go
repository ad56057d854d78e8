package testenv

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// ReplicaURL returns the URL of dbURL's database on the streaming replica
// of the test server (TEST_DATABASE_REPLICA_URL, which scripts/services.sh
// starts), once the replica has replayed the database's creation.
func ReplicaURL(tb testing.TB, dbURL string) string {
	tb.Helper()
	replica := Getenv(tb, "TEST_DATABASE_REPLICA_URL")
	u, err := url.Parse(dbURL)
	if err != nil {
		tb.Fatal(err)
	}
	out := withDatabase(tb, replica, u.Path[1:])
	WaitFor(tb, 30*time.Second, "the replica to hold the test database", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, out)
		if err != nil {
			return false
		}
		_ = c.Close(ctx)
		return true
	})
	return out
}

// HoldReplica gives the test the replica to itself (a test that pauses its
// replay stops it for every database) until it ends, and returns funcs
// that pause and resume its replay. Replay is resumed when the test ends.
func HoldReplica(tb testing.TB) (pause, resume func()) {
	tb.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, Getenv(tb, "TEST_DATABASE_URL"))
	if err != nil {
		tb.Fatal(err)
	}
	// Held on the primary for the test's whole life: the lock goes with
	// the connection.
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock(hashtext('geogate test replica'))"); err != nil {
		tb.Fatal(err)
	}
	replica, err := pgx.Connect(ctx, Getenv(tb, "TEST_DATABASE_REPLICA_URL"))
	if err != nil {
		tb.Fatal(err)
	}
	run := func(sql string) {
		if _, err := replica.Exec(ctx, sql); err != nil {
			tb.Fatalf("%s: %v", sql, err)
		}
	}
	tb.Cleanup(func() {
		run("SELECT pg_wal_replay_resume()")
		_ = replica.Close(ctx)
		_ = admin.Close(ctx)
	})
	return func() { run("SELECT pg_wal_replay_pause()") }, func() { run("SELECT pg_wal_replay_resume()") }
}
