package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// PeerSchemas are the schemas the peer fixtures (testdata/peer) create
// their tables in, as PUBLISH_SCHEMAS lists them.
var PeerSchemas = []string{"public", `"Quotes' \ \' \" and Space.Dot.`, "MixedCase", "autodetect", "pgfs_test", "schema_a", "schema_b"}

// PeerDBWithURL returns a pool on a brand-new copy of the peer fixtures
// (see PeerTemplate), and its URL.
func PeerDBWithURL(tb testing.TB) (*pgxpool.Pool, string) {
	tb.Helper()
	return CloneDB(tb, PeerTemplate(tb))
}

// PeerTemplate returns the name of a template holding geogate's schema and
// the test databases of martin, tipg, pg_featureserv and pg_tileserv
// (testdata/peer/README.md says which, from where and under which
// licence), building it when missing. The files are loaded as their
// projects load them: each in name order with psql -v ON_ERROR_STOP=1 -f,
// with search_path public, so that unqualified names land there and not
// in the test role's own schema.
func PeerTemplate(tb testing.TB) string {
	tb.Helper()
	NeedServices(tb, "psql")
	psql, err := osexec.LookPath("psql")
	if err != nil {
		tb.Fatalf("the peer fixtures load with psql: %v (apt-get install -y postgresql-client)", err)
	}
	files := peerFiles(tb)
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00", SchemaTemplate(tb))
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00", filepath.Base(f))
		hashFile(tb, h, f)
	}
	name := "geogate_peer_" + hex.EncodeToString(h.Sum(nil))[:12]
	EnsureTemplate(tb, name, SchemaTemplate(tb), func(ctx context.Context, pool *pgxpool.Pool) error {
		url := pool.Config().ConnString()
		for _, f := range files {
			cmd := osexec.CommandContext(ctx, psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-f", f)
			cmd.Env = append(os.Environ(), "PGOPTIONS=-c search_path=public", "PGCLIENTMINMESSAGES=warning")
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("psql -f %s: %v\n%s", filepath.Base(f), err, out)
			}
		}
		_, err := pool.Exec(ctx, "ANALYZE")
		return err
	})
	return name
}

// peerFiles are the fixture files, in name order.
func peerFiles(tb testing.TB) []string {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot(tb), "internal", "testenv", "testdata", "peer", "*.sql"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("peer fixtures: %v (none found)", err)
	}
	slices.Sort(files)
	return files
}
