package tiles

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// freshVersions reads the data versions of tables from PostgreSQL for
// tiles whose writes geogate does not see: a team's own tables, written
// with plain SQL. NOTIFY reaches the replicas only after the writer has its
// commit, so a cached tile of such a table is served only at a version
// read from PostgreSQL after the tile was asked for: then a write that has
// committed before the request is always seen. Reads are shared: every
// request that arrives while one is in flight waits for the next, which is
// sent after all of them arrived, so under load one small query serves
// many tiles.
type freshVersions struct {
	db  *pgxpool.Pool
	sql string

	mu   sync.Mutex
	next *versionRead // the read that waiting requests will get
	wake chan struct{}
	stop <-chan struct{}
}

// versionRead is one read of every version.
type versionRead struct {
	done     chan struct{}
	versions map[string]int64
	err      error
}

// newFreshVersions reads versions from db's tile_versions in schema own
// (quoted) until ctx ends.
func newFreshVersions(ctx context.Context, db *pgxpool.Pool, own string) *freshVersions {
	f := &freshVersions{db: db, sql: "SELECT tbl, version FROM " + own + ".tile_versions", wake: make(chan struct{}, 1), stop: ctx.Done()}
	go f.run()
	return f
}

// version returns table's version as of a read sent after the call.
func (f *freshVersions) version(ctx context.Context, table string) (int64, error) {
	f.mu.Lock()
	r := f.next
	if r == nil {
		r = &versionRead{done: make(chan struct{})}
		f.next = r
	}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default: // already woken
	}
	select {
	case <-r.done:
		return r.versions[table], r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-f.stop:
		return 0, context.Canceled
	}
}

// run sends the reads, one at a time, until the service stops.
func (f *freshVersions) run() {
	for {
		select {
		case <-f.stop:
			return
		case <-f.wake:
		}
		f.mu.Lock()
		r := f.next
		f.next = nil
		f.mu.Unlock()
		if r == nil {
			continue
		}
		r.versions, r.err = f.read()
		close(r.done)
	}
}

func (f *freshVersions) read() (map[string]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	rows, err := f.db.Query(ctx, f.sql)
	if err != nil {
		return nil, fmt.Errorf("read tile versions: %w", err)
	}
	out := map[string]int64{}
	var table string
	var v int64
	_, err = pgx.ForEachRow(rows, []any{&table, &v}, func() error {
		out[table] = v
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read tile versions: %w", err)
	}
	return out, nil
}
