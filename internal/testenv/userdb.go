package testenv

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed userdb.sql
var userDBSQL string

// UserSchemas are the schemas of UserDB that hold its tables, in the order
// a deployment would publish them.
var UserSchemas = []string{"public", "transit", "Mixed Case"}

// UserDB returns a pool on a brand-new copy of a team's own database (see
// userdb.sql): the demo data, and tables, views and a materialized view of
// the team's own shapes, SRIDs, keys, column types and names, one of them
// holding a million points. Its template is built once per schema, demo
// data and userdb.sql version, in about half a minute.
func UserDB(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	pool, _ := UserDBWithURL(tb)
	return pool
}

// UserDBWithURL is UserDB that also returns the new database's URL.
func UserDBWithURL(tb testing.TB) (*pgxpool.Pool, string) {
	tb.Helper()
	return CloneDB(tb, UserTemplate(tb))
}

// UserTemplate returns the name of UserDB's template, building it when
// missing.
func UserTemplate(tb testing.TB) string {
	tb.Helper()
	demo := DemoTemplate(tb)
	sum := sha256.Sum256([]byte(demo + "\x00" + userDBSQL))
	name := "geogate_user_" + hex.EncodeToString(sum[:])[:12]
	EnsureTemplate(tb, name, demo, func(ctx context.Context, pool *pgxpool.Pool) error {
		_, err := pool.Exec(ctx, userDBSQL)
		return err
	})
	return name
}
