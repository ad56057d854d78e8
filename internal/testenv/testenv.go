// Package testenv gives integration tests their real services: a fresh,
// migrated PostGIS database per test and a Redis client. `make test` starts
// private instances and sets TEST_DATABASE_URL and TEST_REDIS_URL; a test
// that cannot reach them fails, it never skips.
//
// The one exception is -short (`make check`, the quick edit-test loop):
// there every helper that needs a service or an external program skips the
// test through NeedServices, whether or not the service is there, so that
// `go test -short ./...` runs exactly the tests that need nothing.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/geogate/geogate/internal/rdb"
)

// NeedServices skips the test under -short, saying it needs what (a
// service, an external program, or minutes of running); without -short it
// does nothing, and whatever then finds what missing fails the test. Every
// helper of this package that starts or reaches a service calls it, so
// tests only call it themselves for needs no helper covers.
func NeedServices(tb testing.TB, what string) {
	tb.Helper()
	if testing.Short() {
		tb.Skipf("needs %s: skipped under -short (make check); make test runs it", what)
	}
}

// Getenv reads name or fails the test with a hint on how to get services.
// Under -short it skips the test instead (see NeedServices): the variables
// it reads are the test services' URLs.
func Getenv(tb testing.TB, name string) string {
	tb.Helper()
	NeedServices(tb, "the test service in $"+name)
	v := os.Getenv(name)
	if v == "" {
		tb.Fatalf("%s is not set: run the tests through `make test`, which starts private PostGIS and Redis instances and sets it", name)
	}
	return v
}

// Redis returns a client for the test Redis, closed when the test ends.
// Tests share one Redis, so each test must use its own keys (see Prefix).
func Redis(tb testing.TB) redis.UniversalClient {
	tb.Helper()
	url := Getenv(tb, "TEST_REDIS_URL")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := rdb.Open(ctx, url, 5*time.Second)
	if err != nil {
		tb.Fatalf("test redis: %v", err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Prefix returns a string unique to this test run, for key names and
// identities that must not collide with other tests sharing a server.
func Prefix(tb testing.TB) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("t%s", hex.EncodeToString(b[:]))
}
